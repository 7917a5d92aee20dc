// A small OpenFX host for the plugin's tests (issue 37): what MLT's melt cannot show. It loads the bundle with
// dlopen, drives it through the OpenFX actions, and runs a JSON script read from stdin, one JSON line out per step:
//
//   {"bundle": PATH, "steps": [STEP, ...]}
//   STEP: {"op": "describe"}                      -> plugin properties and every parameter with its props
//         {"op": "render", "instance": N, "input": FILE.f32, "width": W, "height": H,
//          "depth": "float"|"short"|"byte", "rows": "up"|"down", "scale": S, "aspect": A, "time": T,
//          "window": [x1, y1, x2, y2], "params": {NAME: VALUE}, "out": FILE,
//          "kill_engine_at_line": TEXT, "audit": AUDIT_LOG, "signal": N}  (SIGKILL, or signal N, the engine
//          once its audit log says TEXT; "abort_at_line": TEXT instead makes abort() say yes then;
//          "kill_engine_after": true SIGKILLs it once the render has returned)
//                                                 -> status (ok | failed), the persistent message, seconds
//         {"op": "parallel", "renders": [STEP, ...]} -> each render on its own thread; their results, seconds
//         {"op": "frames_needed", "instance": N, "time": T, "first": F, "last": L, "params": {...}}
//                                                 -> the frames the plugin needs of a source clip of frames F..L
// A render may also give "clip": {"first": F, "frames": [FILE.f32, ...]}: the source clip's frames F, F+1, ...
// (its frame range; the image at any time is read from its file: temporal clip access, which the script's
// top-level "temporal": true offers the plugin), and "premult": "premultiplied"|"unpremultiplied"|"opaque" (the
// source clip's and images' premultiplication). Its result then counts the source images the plugin fetched.
// Input files are float32 RGBA, top row first; "byte"/"short" inputs are quantised by the host (round half up).
// Outputs are written in the clip's depth, top row first. "rows": "up" hands the image as MLT does (negative
// rowBytes: the bottom row last in memory); "down" as most hosts (positive rowBytes).
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "json.h"
#include "ofxImageEffect.h"
#include "ofxMessage.h"
#include "ofxParam.h"
#include "ofxProperty.h"

using ff::Json;

namespace {

// ------------------------------------------------------------------------------------------ properties

struct Prop {
  std::vector<std::string> s;
  std::vector<double> d;
  std::vector<int> i;
  std::vector<void*> p;
};
struct PropertySet {
  std::map<std::string, Prop> props;
  std::mutex lock;
  PropertySet() = default;
  PropertySet(const PropertySet& o) : props(o.props) {}
  PropertySet& operator=(const PropertySet& o) {
    props = o.props;
    return *this;
  }
};
PropertySet* ps(OfxPropertySetHandle h) {
  return reinterpret_cast<PropertySet*>(h);
}

template <class T>
void put(std::vector<T>& v, int index, T value) {
  if (int(v.size()) <= index)
    v.resize(index + 1);
  v[index] = value;
}
OfxStatus setP(OfxPropertySetHandle h, const char* n, int i, void* v) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  put(ps(h)->props[n].p, i, v);
  return kOfxStatOK;
}
OfxStatus setS(OfxPropertySetHandle h, const char* n, int i, const char* v) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  put(ps(h)->props[n].s, i, std::string(v));
  return kOfxStatOK;
}
OfxStatus setD(OfxPropertySetHandle h, const char* n, int i, double v) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  put(ps(h)->props[n].d, i, v);
  return kOfxStatOK;
}
OfxStatus setI(OfxPropertySetHandle h, const char* n, int i, int v) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  put(ps(h)->props[n].i, i, v);
  return kOfxStatOK;
}
OfxStatus setPN(OfxPropertySetHandle h, const char* n, int c, void* const* v) {
  for (int k = 0; k < c; ++k) setP(h, n, k, v[k]);
  return kOfxStatOK;
}
OfxStatus setSN(OfxPropertySetHandle h, const char* n, int c, const char* const* v) {
  for (int k = 0; k < c; ++k) setS(h, n, k, v[k]);
  return kOfxStatOK;
}
OfxStatus setDN(OfxPropertySetHandle h, const char* n, int c, const double* v) {
  for (int k = 0; k < c; ++k) setD(h, n, k, v[k]);
  return kOfxStatOK;
}
OfxStatus setIN(OfxPropertySetHandle h, const char* n, int c, const int* v) {
  for (int k = 0; k < c; ++k) setI(h, n, k, v[k]);
  return kOfxStatOK;
}

template <class T>
OfxStatus fetch(OfxPropertySetHandle h, const char* n, int i, T* out, std::vector<T> Prop::*member) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  auto it = ps(h)->props.find(n);
  if (it == ps(h)->props.end())
    return kOfxStatErrUnknown;
  const std::vector<T>& v = it->second.*member;
  if (i < 0 || i >= int(v.size()))
    return kOfxStatErrBadIndex;
  *out = v[i];
  return kOfxStatOK;
}
OfxStatus getP(OfxPropertySetHandle h, const char* n, int i, void** v) {
  return fetch(h, n, i, v, &Prop::p);
}
OfxStatus getS(OfxPropertySetHandle h, const char* n, int i, char** v) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  auto it = ps(h)->props.find(n);
  if (it == ps(h)->props.end())
    return kOfxStatErrUnknown;
  if (i < 0 || i >= int(it->second.s.size()))
    return kOfxStatErrBadIndex;
  *v = const_cast<char*>(it->second.s[i].c_str());  // stable while the set lives, as the API promises
  return kOfxStatOK;
}
OfxStatus getD(OfxPropertySetHandle h, const char* n, int i, double* v) {
  return fetch(h, n, i, v, &Prop::d);
}
OfxStatus getI(OfxPropertySetHandle h, const char* n, int i, int* v) {
  return fetch(h, n, i, v, &Prop::i);
}
OfxStatus getPN(OfxPropertySetHandle h, const char* n, int c, void** v) {
  for (int k = 0; k < c; ++k)
    if (OfxStatus s = getP(h, n, k, v + k))
      return s;
  return kOfxStatOK;
}
OfxStatus getSN(OfxPropertySetHandle h, const char* n, int c, char** v) {
  for (int k = 0; k < c; ++k)
    if (OfxStatus s = getS(h, n, k, v + k))
      return s;
  return kOfxStatOK;
}
OfxStatus getDN(OfxPropertySetHandle h, const char* n, int c, double* v) {
  for (int k = 0; k < c; ++k)
    if (OfxStatus s = getD(h, n, k, v + k))
      return s;
  return kOfxStatOK;
}
OfxStatus getIN(OfxPropertySetHandle h, const char* n, int c, int* v) {
  for (int k = 0; k < c; ++k)
    if (OfxStatus s = getI(h, n, k, v + k))
      return s;
  return kOfxStatOK;
}
OfxStatus reset(OfxPropertySetHandle h, const char* n) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  ps(h)->props.erase(n);
  return kOfxStatOK;
}
OfxStatus dimension(OfxPropertySetHandle h, const char* n, int* c) {
  std::lock_guard<std::mutex> l(ps(h)->lock);
  auto it = ps(h)->props.find(n);
  if (it == ps(h)->props.end())
    return kOfxStatErrUnknown;
  const Prop& p = it->second;
  *c = int(std::max(std::max(p.s.size(), p.d.size()), std::max(p.i.size(), p.p.size())));
  return kOfxStatOK;
}

// -------------------------------------------------------------------------------------- effects, params

struct Param {
  std::string name, type;
  PropertySet props;
  double d = 0;
  int i = 0;
  std::string s;
};
struct Effect;
struct Clip {
  std::string name;
  PropertySet props;
  Effect* effect = nullptr;
};
struct Effect {
  PropertySet props;
  std::vector<std::unique_ptr<Param>> params;  // definition order
  std::map<std::string, std::unique_ptr<Clip>> clips;
  std::mutex lock;
  std::string persistent;             // the persistent message, "" when cleared
  std::atomic<bool> aborting{false};  // what abort() answers (the user pressed Esc)
  Param* param(const std::string& n) {
    for (auto& p : params)
      if (p->name == n)
        return p.get();
    return nullptr;
  }
};

// What one render call hands the plugin (thread-local: several renders run at once).
struct RenderContext {
  int w = 0, h = 0;
  std::string depth = "float";
  bool rows_up = false;  // negative rowBytes
  double aspect = 1.0;
  std::string premult = kOfxImageOpaque;
  std::vector<char> src, dst;  // in memory order
  std::vector<std::unique_ptr<PropertySet>> images;
  long long clip_first = 0;
  std::vector<std::string> clip_files;                    // the source clip's frames, when the step gives a clip
  std::vector<std::unique_ptr<std::vector<char>>> other;  // frames fetched at other times
  int fetches = 0;                                        // source images the plugin asked for
};
thread_local RenderContext* gContext = nullptr;

size_t pixel_bytes(const std::string& depth) {
  return depth == "float" ? 16 : depth == "short" ? 8 : 4;
}

OfxStatus getPropertySet(OfxImageEffectHandle e, OfxPropertySetHandle* out) {
  *out = reinterpret_cast<OfxPropertySetHandle>(&reinterpret_cast<Effect*>(e)->props);
  return kOfxStatOK;
}
OfxStatus getParamSet(OfxImageEffectHandle e, OfxParamSetHandle* out) {
  *out = reinterpret_cast<OfxParamSetHandle>(e);
  return kOfxStatOK;
}
OfxStatus clipDefine(OfxImageEffectHandle e, const char* name, OfxPropertySetHandle* props) {
  Effect* fx = reinterpret_cast<Effect*>(e);
  auto& c = fx->clips[name];
  c = std::make_unique<Clip>();
  c->name = name;
  c->effect = fx;
  *props = reinterpret_cast<OfxPropertySetHandle>(&c->props);
  return kOfxStatOK;
}
OfxStatus clipGetHandle(OfxImageEffectHandle e, const char* name, OfxImageClipHandle* clip,
                        OfxPropertySetHandle* props) {
  Effect* fx = reinterpret_cast<Effect*>(e);
  auto it = fx->clips.find(name);
  if (it == fx->clips.end())
    return kOfxStatErrBadHandle;
  *clip = reinterpret_cast<OfxImageClipHandle>(it->second.get());
  if (props)
    *props = reinterpret_cast<OfxPropertySetHandle>(&it->second->props);
  return kOfxStatOK;
}
OfxStatus clipGetPropertySet(OfxImageClipHandle c, OfxPropertySetHandle* props) {
  *props = reinterpret_cast<OfxPropertySetHandle>(&reinterpret_cast<Clip*>(c)->props);
  return kOfxStatOK;
}
void fill(RenderContext& ctx, std::vector<char>& buf, const std::string& file);

OfxStatus clipGetImage(OfxImageClipHandle c, OfxTime t, const OfxRectD*, OfxPropertySetHandle* out) {
  RenderContext* ctx = gContext;
  if (!ctx)
    return kOfxStatFailed;
  Clip* clip = reinterpret_cast<Clip*>(c);
  const bool source = clip->name != kOfxImageEffectOutputClipName;
  std::vector<char>* chosen = source ? &ctx->src : &ctx->dst;
  if (source) {
    ++ctx->fetches;
    if (!ctx->clip_files.empty()) {  // temporal access: the clip's frame at t, from its file
      const long long k = std::llround(t) - ctx->clip_first;
      if (k < 0 || k >= (long long)ctx->clip_files.size())
        return kOfxStatFailed;
      ctx->other.push_back(std::make_unique<std::vector<char>>());
      fill(*ctx, *ctx->other.back(), ctx->clip_files[size_t(k)]);
      chosen = ctx->other.back().get();
    }
  }
  std::vector<char>& buf = *chosen;
  auto img = std::make_unique<PropertySet>();
  OfxPropertySetHandle h = reinterpret_cast<OfxPropertySetHandle>(img.get());
  const long stride = long(ctx->w) * long(pixel_bytes(ctx->depth));
  // OpenFX addresses rows bottom-up from (x1, y1): "down" stores the bottom row first, "up" stores it last.
  char* data = ctx->rows_up ? buf.data() + (ctx->h - 1) * stride : buf.data();
  setP(h, kOfxImagePropData, 0, data);
  int bounds[4] = {0, 0, ctx->w, ctx->h};
  setIN(h, kOfxImagePropBounds, 4, bounds);
  setIN(h, kOfxImagePropRegionOfDefinition, 4, bounds);
  setI(h, kOfxImagePropRowBytes, 0, int(ctx->rows_up ? -stride : stride));
  setS(h, kOfxImageEffectPropPixelDepth, 0,
       ctx->depth == "float"   ? kOfxBitDepthFloat
       : ctx->depth == "short" ? kOfxBitDepthShort
                               : kOfxBitDepthByte);
  setS(h, kOfxImageEffectPropComponents, 0, kOfxImageComponentRGBA);
  setD(h, kOfxImagePropPixelAspectRatio, 0, ctx->aspect);
  setS(h, kOfxImageEffectPropPreMultiplication, 0, source ? ctx->premult.c_str() : kOfxImageOpaque);
  *out = h;
  ctx->images.push_back(std::move(img));
  return kOfxStatOK;
}
OfxStatus clipReleaseImage(OfxPropertySetHandle) {
  return kOfxStatOK;
}
OfxStatus clipGetRegionOfDefinition(OfxImageClipHandle, OfxTime, OfxRectD* r) {
  if (!gContext)
    return kOfxStatFailed;
  *r = {0, 0, double(gContext->w), double(gContext->h)};
  return kOfxStatOK;
}
int abort_render(OfxImageEffectHandle e) {
  return reinterpret_cast<Effect*>(e)->aborting ? 1 : 0;
}
OfxStatus unsupported_alloc(OfxImageEffectHandle, size_t, OfxImageMemoryHandle*) {
  return kOfxStatErrUnsupported;
}
OfxStatus unsupported_mem(OfxImageMemoryHandle) {
  return kOfxStatErrUnsupported;
}
OfxStatus unsupported_lock(OfxImageMemoryHandle, void**) {
  return kOfxStatErrUnsupported;
}

OfxStatus paramDefine(OfxParamSetHandle set, const char* type, const char* name, OfxPropertySetHandle* props) {
  Effect* fx = reinterpret_cast<Effect*>(set);
  auto p = std::make_unique<Param>();
  p->name = name;
  p->type = type;
  if (props)
    *props = reinterpret_cast<OfxPropertySetHandle>(&p->props);
  fx->params.push_back(std::move(p));
  return kOfxStatOK;
}
OfxStatus paramGetHandle(OfxParamSetHandle set, const char* name, OfxParamHandle* param, OfxPropertySetHandle* props) {
  Param* p = reinterpret_cast<Effect*>(set)->param(name);
  if (!p)
    return kOfxStatErrUnknown;
  if (param)
    *param = reinterpret_cast<OfxParamHandle>(p);
  if (props)
    *props = reinterpret_cast<OfxPropertySetHandle>(&p->props);
  return kOfxStatOK;
}
OfxStatus paramSetGetPropertySet(OfxParamSetHandle set, OfxPropertySetHandle* props) {
  *props = reinterpret_cast<OfxPropertySetHandle>(&reinterpret_cast<Effect*>(set)->props);
  return kOfxStatOK;
}
OfxStatus paramGetPropertySet(OfxParamHandle param, OfxPropertySetHandle* props) {
  *props = reinterpret_cast<OfxPropertySetHandle>(&reinterpret_cast<Param*>(param)->props);
  return kOfxStatOK;
}
OfxStatus get_value(Param* p, va_list ap) {
  if (p->type == kOfxParamTypeDouble)
    *va_arg(ap, double*) = p->d;
  else if (p->type == kOfxParamTypeString)
    *va_arg(ap, char**) = const_cast<char*>(p->s.c_str());
  else
    *va_arg(ap, int*) = p->i;
  return kOfxStatOK;
}
OfxStatus paramGetValue(OfxParamHandle h, ...) {
  va_list ap;
  va_start(ap, h);
  OfxStatus s = get_value(reinterpret_cast<Param*>(h), ap);
  va_end(ap);
  return s;
}
OfxStatus paramGetValueAtTimeImpl(OfxParamHandle h, OfxTime t, ...) {
  va_list ap;
  va_start(ap, t);
  OfxStatus s = get_value(reinterpret_cast<Param*>(h), ap);
  va_end(ap);
  return s;
}
OfxStatus paramUnsupported(OfxParamHandle, ...) {
  return kOfxStatErrUnsupported;
}

// --------------------------------------------------------------------------------------------- messages

OfxStatus message(void* handle, const char*, const char*, const char* format, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  Effect* fx = reinterpret_cast<Effect*>(handle);
  if (fx) {
    std::lock_guard<std::mutex> l(fx->lock);
    fx->persistent = buf;
  }
  return kOfxStatOK;
}
OfxStatus setPersistentMessage(void* handle, const char*, const char*, const char* format, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  Effect* fx = reinterpret_cast<Effect*>(handle);
  std::lock_guard<std::mutex> l(fx->lock);
  fx->persistent = buf;
  return kOfxStatOK;
}
OfxStatus clearPersistentMessage(void* handle) {
  Effect* fx = reinterpret_cast<Effect*>(handle);
  std::lock_guard<std::mutex> l(fx->lock);
  fx->persistent.clear();
  return kOfxStatOK;
}

// ------------------------------------------------------------------------------------------------ host

OfxPropertySuiteV1 gPropSuite;
OfxImageEffectSuiteV1 gEffectSuite;
OfxParameterSuiteV1 gParamSuite;
OfxMessageSuiteV1 gMessageSuite;
OfxMessageSuiteV2 gMessageSuite2;
PropertySet gHostProps;
OfxHost gHost;

const void* fetchSuite(OfxPropertySetHandle, const char* name, int version) {
  if (!std::strcmp(name, kOfxPropertySuite) && version == 1)
    return &gPropSuite;
  if (!std::strcmp(name, kOfxImageEffectSuite) && version == 1)
    return &gEffectSuite;
  if (!std::strcmp(name, kOfxParameterSuite) && version == 1)
    return &gParamSuite;
  if (!std::strcmp(name, kOfxMessageSuite) && version == 1)
    return &gMessageSuite;
  if (!std::strcmp(name, kOfxMessageSuite) && version == 2)
    return &gMessageSuite2;
  return nullptr;
}

void init_host() {
  gPropSuite = {setP, setS, setD, setI,  setPN, setSN, setDN, setIN, getP,
                getS, getD, getI, getPN, getSN, getDN, getIN, reset, dimension};
  gEffectSuite = {};
  gEffectSuite.getPropertySet = getPropertySet;
  gEffectSuite.getParamSet = getParamSet;
  gEffectSuite.clipDefine = clipDefine;
  gEffectSuite.clipGetHandle = clipGetHandle;
  gEffectSuite.clipGetPropertySet = clipGetPropertySet;
  gEffectSuite.clipGetImage = clipGetImage;
  gEffectSuite.clipReleaseImage = clipReleaseImage;
  gEffectSuite.clipGetRegionOfDefinition = clipGetRegionOfDefinition;
  gEffectSuite.abort = abort_render;
  gEffectSuite.imageMemoryAlloc = unsupported_alloc;
  gEffectSuite.imageMemoryFree = unsupported_mem;
  gEffectSuite.imageMemoryLock = unsupported_lock;
  gEffectSuite.imageMemoryUnlock = unsupported_mem;
  gParamSuite = {};
  gParamSuite.paramDefine = paramDefine;
  gParamSuite.paramGetHandle = paramGetHandle;
  gParamSuite.paramSetGetPropertySet = paramSetGetPropertySet;
  gParamSuite.paramGetPropertySet = paramGetPropertySet;
  gParamSuite.paramGetValue = paramGetValue;
  gParamSuite.paramGetValueAtTime = paramGetValueAtTimeImpl;
  gMessageSuite.message = message;
  gMessageSuite2.message = message;
  gMessageSuite2.setPersistentMessage = setPersistentMessage;
  gMessageSuite2.clearPersistentMessage = clearPersistentMessage;
  setS(reinterpret_cast<OfxPropertySetHandle>(&gHostProps), kOfxPropName, 0, "org.facefusion.testhost");
  gHost.host = reinterpret_cast<OfxPropertySetHandle>(&gHostProps);
  gHost.fetchSuite = fetchSuite;
}

OfxPlugin* gPlugin = nullptr;
Effect gDescriptor;
std::vector<std::unique_ptr<Effect>> gInstances;

OfxStatus act(const char* action, const void* handle, OfxPropertySetHandle in = nullptr,
              OfxPropertySetHandle out = nullptr) {
  return gPlugin->mainEntry(action, handle, in, out);
}

Effect* instance(int n) {
  while (int(gInstances.size()) <= n) {
    auto fx = std::make_unique<Effect>();
    fx->props = gDescriptor.props;
    for (auto& p : gDescriptor.params) {  // a parameter starts at its default
      auto q = std::make_unique<Param>(*p);
      Prop& def = q->props.props[kOfxParamPropDefault];
      if (!def.d.empty())
        q->d = def.d[0];
      if (!def.i.empty())
        q->i = def.i[0];
      if (!def.s.empty())
        q->s = def.s[0];
      fx->params.push_back(std::move(q));
    }
    for (auto& c : gDescriptor.clips) {
      auto d = std::make_unique<Clip>(*c.second);
      d->effect = fx.get();
      fx->clips[c.first] = std::move(d);
    }
    if (act(kOfxActionCreateInstance, fx.get()) > kOfxStatReplyDefault) {
      std::cerr << "createInstance failed\n";
      std::exit(1);
    }
    gInstances.push_back(std::move(fx));
  }
  return gInstances[n].get();
}

Json props_json(PropertySet& set) {
  Json out;
  for (auto& kv : set.props) {
    Json::Array values;
    for (auto& s : kv.second.s) values.push_back(s);
    for (double d : kv.second.d) values.push_back(d);
    for (int i : kv.second.i) values.push_back(i);
    out.set(kv.first, values);
  }
  return out;
}

Json describe() {
  Json out;
  out.set("plugin", props_json(gDescriptor.props));
  Json::Array params;
  for (auto& p : gDescriptor.params) {
    Json j = props_json(p->props);
    j.set("name", p->name).set("type", p->type);
    params.push_back(j);
  }
  out.set("params", params);
  return out;
}

void set_param(Effect* fx, const std::string& name, const Json& v) {
  Param* p = fx->param(name);
  if (!p)
    throw std::runtime_error("no parameter " + name);
  if (p->type == kOfxParamTypeChoice && v.is_string()) {  // by the option's name, as melt sets them
    auto& options = p->props.props[kOfxParamPropChoiceOption].s;
    for (size_t k = 0; k < options.size(); ++k)
      if (options[k] == v.as_string())
        p->i = int(k);
  } else if (v.is_string()) {
    p->s = v.as_string();
  } else if (v.is_bool()) {
    p->i = v.as_bool();
  } else {
    p->d = v.as_number();
    p->i = int(v.as_number());
  }
}

// Our engine, killed: the children of this process (the plugin started it) get SIGKILL.
void kill_children(int sig) {
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0)
      continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid())
      kill(pid, sig);
  }
  closedir(d);
}

// A float32 RGBA file (top row first) as the host holds it: quantised to the render's depth, rows as it lays them.
void fill(RenderContext& ctx, std::vector<char>& buf, const std::string& file) {
  const size_t px = pixel_bytes(ctx.depth), stride = size_t(ctx.w) * px, n = size_t(ctx.w) * ctx.h * 4;
  std::vector<float> in(n);
  std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(in.data()), n * 4);
  buf.resize(stride * ctx.h);
  for (int r = 0; r < ctx.h; ++r) {  // r: row from the top; memory row: "down" stores the bottom row first
    const int mem = ctx.rows_up ? r : ctx.h - 1 - r;
    char* row = buf.data() + size_t(mem) * stride;
    for (int k = 0; k < ctx.w * 4; ++k) {
      const float v = in[size_t(r) * ctx.w * 4 + k];
      if (ctx.depth == "float")
        reinterpret_cast<float*>(row)[k] = v;
      else if (ctx.depth == "short")
        reinterpret_cast<uint16_t*>(row)[k] = uint16_t(std::floor(std::clamp(v, 0.f, 1.f) * 65535.0 + 0.5));
      else
        reinterpret_cast<uint8_t*>(row)[k] = uint8_t(std::floor(std::clamp(v, 0.f, 1.f) * 255.0 + 0.5));
    }
  }
}

Json render(const Json& step) {
  Effect* fx = instance(int(step["instance"].is_number() ? step["instance"].as_int() : 0));
  for (auto& kv : step["params"].is_object() ? step["params"].as_object() : Json::Object{})
    set_param(fx, kv.first, kv.second);
  RenderContext ctx;
  ctx.w = int(step["width"].as_int());
  ctx.h = int(step["height"].as_int());
  ctx.depth = step["depth"].is_string() ? step["depth"].as_string() : "float";
  ctx.rows_up = step["rows"].is_string() && step["rows"].as_string() == "up";
  ctx.aspect = step["aspect"].is_number() ? step["aspect"].as_number() : 1.0;
  const size_t px = pixel_bytes(ctx.depth), stride = size_t(ctx.w) * px;
  const double time = step["time"].is_number() ? step["time"].as_number() : 1.0;
  if (step["premult"].is_string())
    ctx.premult = step["premult"].as_string() == "premultiplied"     ? kOfxImagePreMultiplied
                  : step["premult"].as_string() == "unpremultiplied" ? kOfxImageUnPreMultiplied
                                                                     : kOfxImageOpaque;
  OfxPropertySetHandle src_props =
      reinterpret_cast<OfxPropertySetHandle>(&fx->clips[kOfxImageEffectSimpleSourceClipName]->props);
  setS(src_props, kOfxImageEffectPropPreMultiplication, 0, ctx.premult.c_str());
  std::string input = step["input"].is_string() ? step["input"].as_string() : "";
  if (step["clip"].is_object()) {
    ctx.clip_first = step["clip"]["first"].as_int();
    for (const Json& f : step["clip"]["frames"].as_array()) ctx.clip_files.push_back(f.as_string());
    const double range[2] = {double(ctx.clip_first), double(ctx.clip_first + long(ctx.clip_files.size()) - 1)};
    setDN(src_props, kOfxImageEffectPropFrameRange, 2, range);
    input = ctx.clip_files.at(size_t(std::llround(time) - ctx.clip_first));
  }
  fill(ctx, ctx.src, input);
  ctx.dst.assign(stride * ctx.h, char(0x3F));  // a sentinel: what the plugin leaves unwritten stays this
  PropertySet args;
  OfxPropertySetHandle a = reinterpret_cast<OfxPropertySetHandle>(&args);
  setD(a, kOfxPropTime, 0, time);
  int window[4] = {0, 0, ctx.w, ctx.h};
  if (step["window"].is_array())
    for (int k = 0; k < 4; ++k) window[k] = int(step["window"].as_array()[k].as_int());
  setIN(a, kOfxImageEffectPropRenderWindow, 4, window);
  const double scale = step["scale"].is_number() ? step["scale"].as_number() : 1.0;
  setD(a, kOfxImageEffectPropRenderScale, 0, scale);
  setD(a, kOfxImageEffectPropRenderScale, 1, scale);
  setS(a, kOfxImageEffectPropFieldToRender, 0, kOfxImageFieldNone);
  std::thread killer;
  fx->aborting = false;
  const bool aborts = step["abort_at_line"].is_string();
  if (step["kill_engine_at_line"].is_string() || aborts) {
    // Mid-render for sure: once the engine's audit log (the step's "audit" file) gets a line holding this text,
    // signal the engine (SIGKILL, or "signal") or, for "abort_at_line", make abort() say yes.
    const std::string text = step[aborts ? "abort_at_line" : "kill_engine_at_line"].as_string();
    const std::string log = step["audit"].as_string();
    const int sig = step["signal"].is_number() ? int(step["signal"].as_int()) : SIGKILL;
    std::ifstream first(log, std::ios::ate);
    const std::streamoff start = first ? std::streamoff(first.tellg()) : 0;
    killer = std::thread([text, log, start, sig, aborts, fx] {
      for (int k = 0; k < 6000; ++k) {
        std::ifstream in(log);
        in.seekg(start);
        std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (rest.find(text) != std::string::npos)
          break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (aborts)
        fx->aborting = true;
      else
        kill_children(sig);
    });
  }
  gContext = &ctx;
  const auto t0 = std::chrono::steady_clock::now();
  const OfxStatus status = act(kOfxImageEffectActionRender, fx, a, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gContext = nullptr;
  if (killer.joinable())
    killer.join();
  if (step["kill_engine_after"].is_bool() && step["kill_engine_after"].as_bool())
    kill_children(SIGKILL);  // after the render returned: the next render finds the engine dead, with no race
  if (step["out"].is_string()) {
    std::ofstream out(step["out"].as_string(), std::ios::binary);
    for (int r = 0; r < ctx.h; ++r) {
      const int mem = ctx.rows_up ? r : ctx.h - 1 - r;
      out.write(ctx.dst.data() + size_t(mem) * stride, std::streamsize(stride));
    }
  }
  Json result;
  std::lock_guard<std::mutex> l(fx->lock);
  result.set("status", status == kOfxStatOK       ? "ok"
                       : status == kOfxStatFailed ? "failed"
                                                  : std::to_string(status))
      .set("message", fx->persistent)
      .set("seconds", seconds)
      .set("fetches", ctx.fetches);
  return result;
}

}  // namespace

int main() {
  std::stringstream text;
  text << std::cin.rdbuf();
  Json script = Json::parse(text.str());
  init_host();
  if (script["temporal"].is_bool() && script["temporal"].as_bool())  // as Nuke, Resolve, Flame and Natron
    setI(reinterpret_cast<OfxPropertySetHandle>(&gHostProps), kOfxImageEffectPropTemporalClipAccess, 0, 1);
  const std::string bundle = script["bundle"].as_string();
  void* lib = dlopen(bundle.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::cerr << "cannot load " << bundle << ": " << dlerror() << "\n";
    return 1;
  }
  auto get = reinterpret_cast<OfxPlugin* (*)(int)>(dlsym(lib, "OfxGetPlugin"));
  auto count = reinterpret_cast<int (*)()>(dlsym(lib, "OfxGetNumberOfPlugins"));
  if (!get || !count || count() != 1)
    return 1;
  gPlugin = get(0);
  gPlugin->setHost(&gHost);
  if (act(kOfxActionLoad, nullptr) != kOfxStatOK)
    return 1;
  if (act(kOfxActionDescribe, &gDescriptor) != kOfxStatOK)
    return 1;
  PropertySet ctx_args;
  setS(reinterpret_cast<OfxPropertySetHandle>(&ctx_args), kOfxImageEffectPropContext, 0, kOfxImageEffectContextFilter);
  if (act(kOfxImageEffectActionDescribeInContext, &gDescriptor, reinterpret_cast<OfxPropertySetHandle>(&ctx_args)) !=
      kOfxStatOK)
    return 1;
  for (const Json& step : script["steps"].as_array()) {
    const std::string op = step["op"].as_string();
    Json out;
    if (op == "describe") {
      out = describe();
    } else if (op == "render") {
      out = render(step);
    } else if (op == "frames_needed") {  // what the plugin asks of the source clip before a render at "time"
      Effect* fx = instance(int(step["instance"].is_number() ? step["instance"].as_int() : 0));
      for (auto& kv : step["params"].is_object() ? step["params"].as_object() : Json::Object{})
        set_param(fx, kv.first, kv.second);
      const double range[2] = {step["first"].as_number(), step["last"].as_number()};
      setDN(reinterpret_cast<OfxPropertySetHandle>(&fx->clips[kOfxImageEffectSimpleSourceClipName]->props),
            kOfxImageEffectPropFrameRange, 2, range);
      PropertySet args, needed;
      setD(reinterpret_cast<OfxPropertySetHandle>(&args), kOfxPropTime, 0, step["time"].as_number());
      const OfxStatus status =
          act(kOfxImageEffectActionGetFramesNeeded, fx, reinterpret_cast<OfxPropertySetHandle>(&args),
              reinterpret_cast<OfxPropertySetHandle>(&needed));
      out = props_json(needed);
      out.set("status", status == kOfxStatOK             ? "ok"
                        : status == kOfxStatReplyDefault ? "default"
                                                         : std::to_string(status));
    } else if (op == "parallel") {
      const auto& renders = step["renders"].as_array();
      std::vector<Json> results(renders.size());
      std::vector<std::thread> threads;
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t k = 0; k < renders.size(); ++k) threads.emplace_back([&, k] { results[k] = render(renders[k]); });
      for (auto& t : threads) t.join();
      out.set("results", Json::Array(results.begin(), results.end()))
          .set("seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } else {
      std::cerr << "unknown op " << op << "\n";
      return 2;
    }
    std::cout << out.dump() << std::endl;
  }
  for (auto& fx : gInstances) act(kOfxActionDestroyInstance, fx.get());
  act(kOfxActionUnload, nullptr);
  return 0;
}
