// Face Fusion as an OpenFX image effect (issue 37): the host's frame goes to the Face Fusion engine through the
// engine's own protocol (engine_client.h) as a "frame" job - the engine's final render of one frame, with the
// consent check, watermark, audit line and provenance a Blender render gets - and the swapped frame comes back.
//
// C API only (ofxImageEffect.h and friends). Every failure is a persistent message on the instance and a failed
// render status; nothing here may crash or hang the host.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "digest.h"
#include "engine_pool.h"
#include "ofxImageEffect.h"
#include "ofxMessage.h"
#include "ofxParam.h"
#include "ofxProperty.h"
#include "params.gen.h"
#include "pixels.h"

#define EXPORT __attribute__((visibility("default")))

namespace ff {
namespace {

OfxHost* gHost = nullptr;
OfxImageEffectSuiteV1* gEffect = nullptr;
OfxPropertySuiteV1* gProp = nullptr;
OfxParameterSuiteV1* gParam = nullptr;
OfxMessageSuiteV1* gMessage = nullptr;
OfxMessageSuiteV2* gMessage2 = nullptr;

const char* const kOutputs[] = {"composite", "face",    "FaceMatte", "Face1",
                                "Occlusion", "Regions", "Skin",      "SourceRegion"};
const char* const kOutputHelp[] = {"The plate with the new face",
                                   "The face layer, premultiplied by its matte: Over the plate gives the composite",
                                   "The combined face matte as RGBA (every channel the matte)",
                                   "The first face's own matte",
                                   "The occlusion matte (what is in front of the face)",
                                   "The face parser's regions matte",
                                   "The skin matte",
                                   "The source region matte"};
const char* const kSpaces[] = {"auto", "linear", "sRGB", "ACEScg", "ACES2065-1"};
const char* const kAnalyses[] = {"clip", "frame"};
const char* const kAnalysisHelp[] = {
    "One shot analysis over the whole input clip, read by every frame (as a Blender bake): the host hands the "
    "plugin every frame of the clip once",
    "Each frame analysed as a shot of its own: no tracking, smoothing or pooled colour across frames"};
const int kSources = 4;

// ------------------------------------------------------------------------------------------- parameters

void define_string(OfxParamSetHandle params, const char* name, const char* label, const char* help, bool file) {
  OfxPropertySetHandle props;
  gParam->paramDefine(params, kOfxParamTypeString, name, &props);
  gProp->propSetString(props, kOfxPropLabel, 0, label);
  gProp->propSetString(props, kOfxParamPropHint, 0, help);
  gProp->propSetString(props, kOfxParamPropStringMode, 0,
                       file ? kOfxParamStringIsFilePath : kOfxParamStringIsSingleLine);
  gProp->propSetString(props, kOfxParamPropDefault, 0, "");
  gProp->propSetInt(props, kOfxParamPropAnimates, 0, 0);
}

void define_choice(OfxParamSetHandle params, const char* name, const char* label, const char* help,
                   const char* const* options, const char* const* option_help, int count, int def) {
  OfxPropertySetHandle props;
  gParam->paramDefine(params, kOfxParamTypeChoice, name, &props);
  gProp->propSetString(props, kOfxPropLabel, 0, label);
  std::string hint = help;
  for (int i = 0; i < count; ++i) {
    gProp->propSetString(props, kOfxParamPropChoiceOption, i, options[i]);  // the engine's values: scriptable
    if (option_help)
      hint += std::string("\n") + options[i] + ": " + option_help[i];
  }
  gProp->propSetString(props, kOfxParamPropHint, 0, hint.c_str());
  gProp->propSetInt(props, kOfxParamPropDefault, 0, def);
  gProp->propSetInt(props, kOfxParamPropAnimates, 0, 0);
}

void define_schema_param(OfxParamSetHandle params, const SchemaParam& s) {
  OfxPropertySetHandle props = nullptr;
  const std::string kind = s.kind;
  if (kind == "enum") {
    int def = 0;
    for (int i = 0; i < s.choice_count; ++i)
      if (std::strcmp(s.choices[i], s.text_default) == 0)
        def = i;
    define_choice(params, s.name, s.label, s.help, s.choices, s.choice_help, s.choice_count, def);
    return;
  }
  if (kind == "str") {
    define_string(params, s.name, s.label, s.help, false);
    gParam->paramGetHandle(params, s.name, nullptr, &props);
    gProp->propSetString(props, kOfxParamPropDefault, 0, s.text_default);
    return;
  }
  const char* type = kind == "float" ? kOfxParamTypeDouble
                     : kind == "int" ? kOfxParamTypeInteger
                                     : kOfxParamTypeBoolean;
  gParam->paramDefine(params, type, s.name, &props);
  gProp->propSetString(props, kOfxPropLabel, 0, s.label);
  gProp->propSetString(props, kOfxParamPropHint, 0, s.help);
  gProp->propSetInt(props, kOfxParamPropAnimates, 0, 0);  // the engine takes one setting per shot
  if (kind == "float") {
    gProp->propSetDouble(props, kOfxParamPropDefault, 0, s.number_default);
    if (s.has_min)
      gProp->propSetDouble(props, kOfxParamPropMin, 0, s.min);
    if (s.has_max)
      gProp->propSetDouble(props, kOfxParamPropMax, 0, s.max);
    if (s.has_min)
      gProp->propSetDouble(props, kOfxParamPropDisplayMin, 0, s.min);
    if (s.has_max)
      gProp->propSetDouble(props, kOfxParamPropDisplayMax, 0, s.max);
  } else {
    gProp->propSetInt(props, kOfxParamPropDefault, 0, int(s.number_default));
    if (kind == "int" && s.has_min)
      gProp->propSetInt(props, kOfxParamPropMin, 0, int(s.min));
    if (kind == "int" && s.has_max)
      gProp->propSetInt(props, kOfxParamPropMax, 0, int(s.max));
  }
}

std::string get_string(OfxParamSetHandle params, const char* name, double t) {
  OfxParamHandle h;
  if (gParam->paramGetHandle(params, name, &h, nullptr) != kOfxStatOK)
    return "";
  char* value = nullptr;
  if (gParam->paramGetValueAtTime(h, t, &value) != kOfxStatOK || !value)
    return "";
  return value;
}

// An int (integer, boolean, choice) or double parameter's value at time t; 0 when the host has no such parameter.
template <typename T>
T get_number(OfxParamSetHandle params, const char* name, double t) {
  OfxParamHandle h;
  T value = 0;
  if (gParam->paramGetHandle(params, name, &h, nullptr) == kOfxStatOK)
    gParam->paramGetValueAtTime(h, t, &value);
  return value;
}

int get_int(OfxParamSetHandle params, const char* name, double t) {
  return get_number<int>(params, name, t);
}
double get_double(OfxParamSetHandle params, const char* name, double t) {
  return get_number<double>(params, name, t);
}

// The engine settings the parameters hold, by the schema's names (the engine validates them again).
Json settings_of(OfxParamSetHandle params, double t) {
  Json out;
  for (int i = 0; i < kSchemaCount; ++i) {
    const SchemaParam& s = kSchema[i];
    const std::string kind = s.kind;
    if (kind == "enum") {
      const int index = get_int(params, s.name, t);
      if (index < 0 || index >= s.choice_count)
        throw EngineError(std::string("parameter ") + s.name + " has no choice number " + std::to_string(index));
      out.set(s.name, s.choices[index]);
    } else if (kind == "str") {
      out.set(s.name, get_string(params, s.name, t));
    } else if (kind == "float") {
      out.set(s.name, get_double(params, s.name, t));
    } else if (kind == "int") {
      out.set(s.name, get_int(params, s.name, t));
    } else {
      out.set(s.name, get_int(params, s.name, t) != 0);
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------ engine settings

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The engine's Python and folder: the parameters, else $FACE_FUSION_ENGINE_*, else ~/.config/facefusion/ofx.json
// (the add-on's preferences, for a host).
EngineConfig engine_config(OfxParamSetHandle params, double t) {
  Json file;
  const std::string home = env("HOME");
  std::ifstream in(env("FACE_FUSION_OFX_CONFIG").empty() ? home + "/.config/facefusion/ofx.json"
                                                         : env("FACE_FUSION_OFX_CONFIG"));
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    try {
      file = Json::parse(text.str());
    } catch (const std::exception& e) {
      throw EngineError(std::string("the plugin's config file is not JSON (") + e.what() + ")");
    }
  }
  auto pick = [&](const char* param, const char* var, const char* key) {
    std::string v = get_string(params, param, t);
    if (v.empty())
      v = env(var);
    if (v.empty() && file[key].is_string())
      v = file[key].as_string();
    return v;
  };
  EngineConfig c;
  c.python = pick("engine_python", "FACE_FUSION_ENGINE_PYTHON", "python");
  if (c.python.empty())
    c.python = "python3";
  c.root = pick("engine_root", "FACE_FUSION_ENGINE_ROOT", "root");
  c.socket_dir = pick("engine_socket_dir", "FACE_FUSION_ENGINE_SOCKET_DIR", "socket_dir");
  c.log_path = env("FACE_FUSION_ENGINE_LOG");
  if (c.log_path.empty() && file["log"].is_string())
    c.log_path = file["log"].as_string();
  const std::string workers = env("FACE_FUSION_OFX_RENDER_WORKERS");
  if (!workers.empty())
    c.extra_args = {"--render-workers", workers};
  return c;
}

// ------------------------------------------------------------------------------------------ the cache

// Results by (input pixels, settings, sources, output): a frame asked for again (hosts do) is not recomputed.
class ResultCache {
 public:
  bool get(const std::string& key, std::vector<float>& out) {
    std::lock_guard<std::mutex> hold(lock_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        out = it->second;
        items_.splice(items_.begin(), items_, it);
        return true;
      }
    return false;
  }
  void put(const std::string& key, std::vector<float> value) {
    std::lock_guard<std::mutex> hold(lock_);
    items_.emplace_front(key, std::move(value));
    while (items_.size() > 8) items_.pop_back();
  }

 private:
  std::mutex lock_;
  std::list<std::pair<std::string, std::vector<float>>> items_;
};
ResultCache& cache() {
  static ResultCache* c = new ResultCache();
  return *c;
}

// ------------------------------------------------------------------------------------------ test mode

std::atomic<int> gDumpCount{0};

void write_npy(const std::string& path, const char* descr, const std::vector<long long>& shape, const void* data,
               size_t nbytes) {
  std::string dims;
  for (long long d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header.push_back(' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(static_cast<const char*>(data), std::streamsize(nbytes));
}

// $FACE_FUSION_OFX_DUMP: what the host handed over and what went back, for the tests' comparison with the engine.
void dump(const std::string& folder, double t, const std::vector<float>& input, const HostImage& out_img,
          const Json& request) {
  const int n = gDumpCount++;
  char stem[64];
  std::snprintf(stem, sizeof stem, "/frame_%05d_%d", int(t), n);
  const std::string base = folder + stem;
  const int w = out_img.width(), h = out_img.height();
  write_npy(base + ".in.npy", "<f4", {h, w, 4}, input.data(), input.size() * 4);
  const size_t px = out_img.depth == Depth::Float ? 16 : out_img.depth == Depth::Short ? 8 : 4;
  std::vector<char> rows(size_t(w) * h * px);  // the output as the host got it, top row first
  for (int r = 0; r < h; ++r)
    std::memcpy(rows.data() + size_t(r) * w * px,
                static_cast<char*>(out_img.data) + long(out_img.y2 - 1 - r - out_img.y1) * out_img.row_bytes, w * px);
  const char* descr = out_img.depth == Depth::Float ? "<f4" : out_img.depth == Depth::Short ? "<u2" : "|u1";
  write_npy(base + ".out.npy", descr, {h, w, 4}, rows.data(), rows.size());
  std::ofstream(base + ".json") << request.dump();
}

// ------------------------------------------------------------------------------------------ messages

void set_message(OfxImageEffectHandle effect, const std::string& text) {
  if (gMessage2) {
    gMessage2->setPersistentMessage(effect, kOfxMessageError, "", "%s", text.c_str());
  } else if (gMessage) {
    gMessage->message(effect, kOfxMessageError, "", "%s", text.c_str());
  }
  std::fprintf(stderr, "Face Fusion: %s\n", text.c_str());  // headless hosts (melt) show no messages
}

void clear_message(OfxImageEffectHandle effect) {
  if (gMessage2)
    gMessage2->clearPersistentMessage(effect);
}

// ---------------------------------------------------------------------------------------- host images

struct Image {  // a fetched clip image, released when it goes
  OfxPropertySetHandle handle = nullptr;
  ~Image() {
    if (handle)
      gEffect->clipReleaseImage(handle);
  }
};

HostImage host_image(OfxPropertySetHandle img) {
  HostImage out;
  int bounds[4] = {0, 0, 0, 0};
  char* depth = nullptr;
  char* comps = nullptr;
  int row_bytes = 0;
  if (gProp->propGetPointer(img, kOfxImagePropData, 0, &out.data) != kOfxStatOK ||
      gProp->propGetIntN(img, kOfxImagePropBounds, 4, bounds) != kOfxStatOK ||
      gProp->propGetInt(img, kOfxImagePropRowBytes, 0, &row_bytes) != kOfxStatOK)
    throw EngineError("the host's image lacks its pixels, bounds or row bytes");
  gProp->propGetString(img, kOfxImageEffectPropPixelDepth, 0, &depth);
  gProp->propGetString(img, kOfxImageEffectPropComponents, 0, &comps);
  out.x1 = bounds[0];
  out.y1 = bounds[1];
  out.x2 = bounds[2];
  out.y2 = bounds[3];
  out.row_bytes = row_bytes;
  if (!comps || std::strcmp(comps, kOfxImageComponentRGBA) != 0)
    throw EngineError(std::string("the clip holds ") + (comps ? comps : "no") + " components; Face Fusion takes RGBA");
  if (depth && std::strcmp(depth, kOfxBitDepthFloat) == 0)
    out.depth = Depth::Float;
  else if (depth && std::strcmp(depth, kOfxBitDepthShort) == 0)
    out.depth = Depth::Short;
  else if (depth && std::strcmp(depth, kOfxBitDepthByte) == 0)
    out.depth = Depth::Byte;
  else
    throw EngineError(std::string("pixel depth ") + (depth ? depth : "?") +
                      " is not supported (8-bit, 16-bit or float)");
  const long min_row = long(out.width()) * (out.depth == Depth::Float ? 16 : out.depth == Depth::Short ? 8 : 4);
  if (!out.data || out.width() <= 0 || out.height() <= 0 || std::labs(out.row_bytes) < min_row)
    throw EngineError("the host gave an image without pixels (or with rows shorter than its width)");
  return out;
}

std::string gHostName = "OpenFX";  // "OpenFX <the host's name>": the application the audit line names

// The identity's confirmation as the request carries it (the note is the parameter; who and when are now).
Json consent_records(EngineClient& client, const Json& sources, const std::string& note) {
  if (note.empty())
    return Json();  // the engine's own consent store decides
  static std::mutex lock;
  static std::map<std::string, std::string> identities;  // the engine's hash of each list of photos, asked once
  std::string identity;
  {
    std::lock_guard<std::mutex> hold(lock);
    identity = identities[sources.dump()];
  }
  if (identity.empty()) {
    Json f;
    f.set("sources", sources).set("action", "check");
    identity = client.run_job("consent", f).result["identity"].as_string();
    std::lock_guard<std::mutex> hold(lock);
    identities[sources.dump()] = identity;
  }
  char when[32];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S+00:00", std::gmtime(&now));
  const std::string who = env("USER").empty() ? "openfx" : env("USER");
  Json rec;
  rec.set("identity", identity).set("who", who).set("when", when).set("note", note);
  return Json(Json::Array{rec});
}

// ------------------------------------------------------------------------------------------ the clip

// Whether the host's image holds colour premultiplied by its alpha: the image's own property, else its clip's.
bool premultiplied(OfxPropertySetHandle img, OfxImageClipHandle clip) {
  char* state = nullptr;
  if (gProp->propGetString(img, kOfxImageEffectPropPreMultiplication, 0, &state) != kOfxStatOK || !state) {
    OfxPropertySetHandle props = nullptr;
    state = nullptr;
    if (gEffect->clipGetPropertySet(clip, &props) == kOfxStatOK)
      gProp->propGetString(props, kOfxImageEffectPropPreMultiplication, 0, &state);
  }
  return state && std::strcmp(state, kOfxImagePreMultiplied) == 0;
}

// What the engine gets of a host image: float RGBA, top row first, straight colour (the engine swaps colour, not
// colour times coverage).
std::vector<float> engine_pixels(const HostImage& img, bool premult) {
  std::vector<float> px = to_engine(img);
  if (premult)
    unpremultiply(px);
  return px;
}

size_t pixel_bytes(Depth d) {
  return d == Depth::Float ? 16 : d == Depth::Short ? 8 : 4;
}

// The SHA-256 of a host image's pixels as the host holds them (its own bytes, row by row), with its size and depth.
std::string pixels_digest(const HostImage& in) {
  Sha256 hash;
  const size_t row = size_t(in.width()) * pixel_bytes(in.depth);
  for (int y = in.y1; y < in.y2; ++y)
    hash.update(static_cast<const char*>(in.data) + long(y - in.y1) * in.row_bytes, row);
  const std::string shape =
      std::to_string(in.width()) + "x" + std::to_string(in.height()) + "/" + std::to_string(int(in.depth));
  hash.update(shape.data(), shape.size());
  return hash.digest();
}

// A clip as the engine knows it (engine/server/host_clips.py): its id is the digest of every frame's pixels, so a
// changed input is a new clip with a new shot analysis.
struct ClipInfo {
  std::string id;
  long long first = 0, last = 0;
  int width = 0, height = 0;
  bool premult = false;
  Json json() const {
    Json c;
    c.set("id", id).set("first", first).set("last", last).set("width", width).set("height", height);
    return c;
  }
};

// What an instance knows of its input clip: the last clip id and each frame's digest. Locked while a clip is
// gathered and handed over, so the host's other render threads wait for it rather than doing it again.
struct ClipState {
  std::mutex lock;
  ClipInfo info;
  std::map<long long, std::string> digests;
};
std::mutex gClipsLock;
std::map<const void*, std::shared_ptr<ClipState>>& clip_states() {  // by instance
  static auto* states = new std::map<const void*, std::shared_ptr<ClipState>>();
  return *states;
}
std::shared_ptr<ClipState> clip_state(OfxImageEffectHandle effect) {
  std::lock_guard<std::mutex> hold(gClipsLock);
  auto& s = clip_states()[effect];
  if (!s)
    s = std::make_shared<ClipState>();
  return s;
}

// The input clip's frame range (its kOfxImageEffectPropFrameRange), false when the host gives none.
bool frame_range(OfxImageClipHandle clip, double range[2]) {
  OfxPropertySetHandle props = nullptr;
  return gEffect->clipGetPropertySet(clip, &props) == kOfxStatOK && props &&
         gProp->propGetDoubleN(props, kOfxImageEffectPropFrameRange, 2, range) == kOfxStatOK;
}

const long long kMaxClipFrames = 100000;  // the engine's own limit per job is far above; this is a shot
bool gTemporal = false;                   // the host offers temporal clip access (MLT does not)

// The clip's frame ``f`` fetched from the host, checked to be the size of the rendered frame.
HostImage clip_frame(OfxImageClipHandle src, long long f, const HostImage& like, Image& holder) {
  if (gEffect->clipGetImage(src, double(f), nullptr, &holder.handle) != kOfxStatOK)
    throw EngineError("the host gave no image of frame " + std::to_string(f) + " of the input clip");
  HostImage img = host_image(holder.handle);
  if (img.width() != like.width() || img.height() != like.height() || img.depth != like.depth)
    throw EngineError("frame " + std::to_string(f) +
                      " of the input clip differs in size or depth from the "
                      "rendered frame; one shot analysis needs one format (or set Shot Analysis to frame)");
  return img;
}

// The input clip's identity for the frame at ``t`` whose pixels have ``digest``. Known frames are not fetched again:
// the clip is gathered anew (every frame fetched and hashed) when the instance has not seen it, its range changed,
// or the rendered frame's pixels differ from the ones it recorded (an edit upstream the host re-renders).
ClipInfo clip_of(OfxImageEffectHandle effect, ClipState& state, OfxImageClipHandle src, long long t,
                 const std::string& digest, const HostImage& in, bool premult) {
  double range[2] = {0, 0};
  if (!frame_range(src, range))
    throw EngineError("the host gives no frame range of the input clip: set Shot Analysis to frame");
  const double a = range[0], b = range[1];
  const long long first = std::llround(std::ceil(a)), last = std::llround(std::floor(b));
  if (last < first || t < first || t > last)
    throw EngineError("frame " + std::to_string(t) + " is outside the input clip's frames " + std::to_string(first) +
                      " to " + std::to_string(last));
  if (last - first + 1 > kMaxClipFrames)
    throw EngineError("the input clip has " + std::to_string(last - first + 1) + " frames, more than the " +
                      std::to_string(kMaxClipFrames) +
                      " one shot analysis takes: trim it or set Shot Analysis to frame");
  ClipInfo& known = state.info;
  auto seen = state.digests.find(t);
  if (!known.id.empty() && known.first == first && known.last == last && known.width == in.width() &&
      known.height == in.height() && known.premult == premult && seen != state.digests.end() && seen->second == digest)
    return known;
  std::map<long long, std::string> digests;
  Sha256 all;
  for (long long f = first; f <= last; ++f) {
    if (gEffect->abort(effect))
      throw EngineError("the host stopped the render while the clip was read");
    if (f == t) {
      digests[f] = digest;
    } else {
      Image holder;
      digests[f] = pixels_digest(clip_frame(src, f, in, holder));
    }
    all.update(digests[f].data(), digests[f].size());
  }
  const std::string shape = std::to_string(first) + ":" + std::to_string(last) + (premult ? "/premultiplied" : "");
  all.update(shape.data(), shape.size());
  known = ClipInfo{to_hex(all.digest()), first, last, in.width(), in.height(), premult};
  state.digests = std::move(digests);
  return known;
}

// Hand the engine the frames of the clip it lacks (none, once it holds the clip: its store outlives a restart).
void hand_over(OfxImageEffectHandle effect, EngineClient& client, ClipState& state, OfxImageClipHandle src,
               const HostImage& in, const std::string& space) {
  const ClipInfo& clip = state.info;
  Json ask;
  ask.set("clip", clip.json());
  const Json missing = client.run_job("clip", ask).result["missing"];
  for (const Json& number : missing.is_array() ? missing.as_array() : Json::Array{}) {
    const long long f = number.as_int();
    if (gEffect->abort(effect))
      throw EngineError("the host stopped the render while the clip was handed to the engine");
    Image holder;
    const HostImage img = clip_frame(src, f, in, holder);
    if (pixels_digest(img) != state.digests[f]) {  // the host's upstream gave other pixels: the id would lie
      state.info.id.clear();
      throw EngineError("the host gave frame " + std::to_string(f) +
                        " of the input clip with other pixels than "
                        "a moment ago; render again");
    }
    const std::vector<float> px = engine_pixels(img, clip.premult);
    Json put;
    put.set("clip", clip.json())
        .set("frame", f)
        .set("plate", client.put_image(px.data(), img.width(), img.height(), space, "OpenFX clip"));
    client.run_job("clip_frame", put);
  }
}

// ---------------------------------------------------------------------------------------------- render

OfxStatus render(OfxImageEffectHandle effect, OfxPropertySetHandle in_args) {
  double t = 0;
  int window[4];
  double scale[2] = {1, 1};
  gProp->propGetDouble(in_args, kOfxPropTime, 0, &t);
  gProp->propGetIntN(in_args, kOfxImageEffectPropRenderWindow, 4, window);
  gProp->propGetDoubleN(in_args, kOfxImageEffectPropRenderScale, 2, scale);
  OfxParamSetHandle params;
  gEffect->getParamSet(effect, &params);
  OfxImageClipHandle src_clip, out_clip;
  gEffect->clipGetHandle(effect, kOfxImageEffectSimpleSourceClipName, &src_clip, nullptr);
  gEffect->clipGetHandle(effect, kOfxImageEffectOutputClipName, &out_clip, nullptr);
  Image src, dst;
  try {
    if (gEffect->clipGetImage(out_clip, t, nullptr, &dst.handle) != kOfxStatOK)
      throw EngineError("no output image");
    if (gEffect->clipGetImage(src_clip, t, nullptr, &src.handle) != kOfxStatOK)
      throw EngineError("no source image");
    const HostImage in = host_image(src.handle);
    const HostImage out = host_image(dst.handle);
    double aspect = 1.0;
    gProp->propGetDouble(src.handle, kOfxImagePropPixelAspectRatio, 0, &aspect);
    if (std::fabs(aspect - 1.0) > 1e-6)  // faces would be found and warped squeezed
      throw EngineError("pixel aspect " + std::to_string(aspect) +
                        " is not supported: Face Fusion needs square "
                        "pixels (reformat to square pixels before this node)");
    if (in.width() != out.width() || in.height() != out.height() || in.x1 != out.x1 || in.y1 != out.y1)
      throw EngineError("the source and output images differ in size; Face Fusion renders whole frames");
    const bool premult = premultiplied(src.handle, src_clip);

    // What the engine gets: the parameters, the sources, the picture in its colour space.
    Json settings = settings_of(params, t);
    const std::string output = kOutputs[std::clamp(get_int(params, "output", t), 0, int(std::size(kOutputs)) - 1)];
    settings.set("output_mode", output == "face" ? "face" : "composite");
    std::string space = kSpaces[std::clamp(get_int(params, "input_colorspace", t), 0, int(std::size(kSpaces)) - 1)];
    if (space == "auto")
      space = in.depth == Depth::Float ? "linear" : "sRGB";
    // One shot analysis over the clip where the host lets us read it; each frame alone otherwise (MLT), and for a
    // time between frames (motion blur, retimes), which is no frame of the clip.
    const bool whole_clip = gTemporal && get_int(params, "shot_analysis", t) == 0 && t == std::floor(t);
    Json sources = Json(Json::Array{});
    Json::Array list;
    for (int i = 1; i <= kSources; ++i) {
      const std::string path = get_string(params, ("source" + std::to_string(i)).c_str(), t);
      if (path.empty())
        continue;
      Json ref;  // the engine's working folder is not the host's: a relative path is made absolute here
      char cwd[4096];
      ref.set("path", path[0] == '/' || !::getcwd(cwd, sizeof cwd) ? path : std::string(cwd) + "/" + path);
      list.push_back(ref);
    }
    if (list.empty())
      throw EngineError("no source photo: set Source Photo 1 to a photo of the new face");
    sources = Json(list);
    const std::string note = get_string(params, "consent_note", t);
    const long long frame = std::llround(t);

    const std::string digest = pixels_digest(in);  // the host's own bytes (a quarter of the float copy for 8-bit)
    std::shared_ptr<ClipState> state;
    ClipInfo clip;
    std::unique_lock<std::mutex> clip_hold;
    if (whole_clip) {  // held until the engine has the clip: the instance's other threads wait, then reuse it
      state = clip_state(effect);
      clip_hold = std::unique_lock<std::mutex>(state->lock);
      clip = clip_of(effect, *state, src_clip, frame, digest, in, premult);
    }
    // The cache key: the frame's pixels, the clip it is a frame of, everything else.
    Sha256 hash;
    const std::string rest =
        digest + clip.id + (premult ? "premultiplied" : "") + settings.dump() + sources.dump() + output + space + note;
    hash.update(rest.data(), rest.size());
    const std::string key = hash.digest();
    std::vector<float> pixels;  // the engine's float copy: made only when the engine is asked
    std::vector<float> result;
    Json request;
    request.set("settings", settings)
        .set("sources", sources)
        .set("colorspace", space)
        .set("output", output)
        .set("frame", t)
        .set("premultiplied", premult);
    if (whole_clip)
      request.set("clip", clip.json());
    if (!cache().get(key, result)) {
      EngineConfig config = engine_config(params, t);
      auto client = engine_pool().acquire(config);
      bool ok = false;
      try {
        if (whole_clip) {
          hand_over(effect, *client, *state, src_clip, in, space);
          clip_hold.unlock();
        }
        Json f;
        const int w = in.width(), h = in.height();
        pixels = engine_pixels(in, premult);
        f.set("plate", client->put_image(pixels.data(), w, h, space, "OpenFX clip"))
            .set("sources", sources)
            .set("settings", settings)
            .set("frame", frame)
            .set("host", gHostName)
            .set("out_slot", client->result_slot(size_t(w) * h * 4 * 10));
        if (whole_clip)
          f.set("clip", clip.json());
        Json records = consent_records(*client, sources, note);
        if (!records.is_null())
          f.set("consent", records);
        const std::string stuck = env("FACE_FUSION_OFX_STUCK_S");  // seconds without a heartbeat (default 30)
        JobResult r = client->run_job(
            "frame", f, [effect] { return gEffect->abort(effect) != 0; },
            stuck.empty() ? 30.0 : std::atof(stuck.c_str()));
        std::vector<long long> shape;
        result.assign(size_t(w) * h * 4, 0.0f);
        if (output == "composite" || output == "face") {
          const float* rgba = r.layer("rgba", &shape);
          if (!rgba || shape.size() != 3 || shape[0] != h || shape[1] != w || shape[2] != 4)
            throw EngineError("the engine's result has no RGBA of the frame's size");
          std::copy_n(rgba, result.size(), result.data());
          if (output == "composite")  // the face changes the element's colour, not its coverage: the input's alpha
            for (size_t i = 3; i < result.size(); i += 4) result[i] = pixels[i];
        } else {
          const float* m = r.layer("matte." + output, &shape);
          if (!m)
            throw EngineError("the engine made no " + output + " matte with these settings");
          for (size_t i = 0; i < size_t(w) * h; ++i) std::fill_n(&result[i * 4], 4, m[i]);
        }
        request.set("provenance", r.result["provenance"]).set("faces", r.result["faces"]);
        ok = true;
      } catch (const EngineGone&) {  // died: forgotten, the next render starts a fresh one
        engine_pool().release(std::move(client), false, true);
        throw;
      } catch (const EngineStuck&) {  // stuck: killed, likewise
        engine_pool().release(std::move(client), false, true);
        throw;
      } catch (const EngineError&) {
        engine_pool().release(std::move(client), false, false);
        throw;
      }
      engine_pool().release(std::move(client), ok);
      cache().put(key, result);
    }
    if (clip_hold.owns_lock())
      clip_hold.unlock();
    // Mattes are data, never colour-encoded; the picture goes back in the space it came in. The face layer is
    // premultiplied by its matte; the composite goes back as the input came (premultiplied again if it was).
    const bool picture = output == "composite" || output == "face";
    const bool srgb = space == "sRGB" && picture;
    from_engine(result.data(), out, window[0], window[1], window[2], window[3], srgb, output == "face",
                output == "face" || (output == "composite" && premult));
    if (output == "composite" && premult) {  // untouched pixels: the host's own bytes, not (x / a) * a
      if (pixels.empty())
        pixels = engine_pixels(in, premult);
      keep_untouched(result.data(), pixels.data(), in, out, window[0], window[1], window[2], window[3]);
    }
    const std::string folder = env("FACE_FUSION_OFX_DUMP");
    if (!folder.empty())
      dump(folder, t, pixels.empty() ? engine_pixels(in, premult) : pixels, out, request);
    clear_message(effect);
    return kOfxStatOK;
  } catch (const std::exception& e) {
    if (gEffect->abort(effect))
      return kOfxStatOK;  // the host gave up on this frame itself
    set_message(effect, e.what());
    return kOfxStatFailed;
  }
}

// --------------------------------------------------------------------------------------------- describe

OfxStatus describe(OfxImageEffectHandle effect) {
  OfxPropertySetHandle props;
  gEffect->getPropertySet(effect, &props);
  gProp->propSetString(props, kOfxPropLabel, 0, "Face Fusion");
  gProp->propSetString(props, kOfxImageEffectPluginPropGrouping, 0, "Face Fusion");
  gProp->propSetString(props, kOfxPropPluginDescription, 0,
                       "Replaces faces with the identity of source photos, with the Face Fusion engine (consent, "
                       "watermark, audit line and provenance on every rendered frame).");
  gProp->propSetString(props, kOfxImageEffectPropSupportedContexts, 0, kOfxImageEffectContextFilter);
  gProp->propSetString(props, kOfxImageEffectPropSupportedPixelDepths, 0, kOfxBitDepthFloat);
  gProp->propSetString(props, kOfxImageEffectPropSupportedPixelDepths, 1, kOfxBitDepthShort);
  gProp->propSetString(props, kOfxImageEffectPropSupportedPixelDepths, 2, kOfxBitDepthByte);
  gProp->propSetInt(props, kOfxImageEffectPropSupportsMultipleClipDepths, 0, 0);
  gProp->propSetInt(props, kOfxImageEffectPropSupportsTiles, 0, 0);  // the engine needs the whole face
  gProp->propSetInt(props, kOfxImageEffectPropSupportsMultiResolution, 0, 0);
  // The clip's frames for one shot analysis (Shot Analysis: clip), where the host offers them.
  gProp->propSetInt(props, kOfxImageEffectPropTemporalClipAccess, 0, 1);
  gProp->propSetInt(props, kOfxImageEffectPluginPropHostFrameThreading, 0, 0);
  // Instances share nothing but the engine pool and the cache, both locked: any number of renders at once.
  gProp->propSetString(props, kOfxImageEffectPluginRenderThreadSafety, 0, kOfxImageEffectRenderFullySafe);
  return kOfxStatOK;
}

OfxStatus describe_in_context(OfxImageEffectHandle effect) {
  OfxPropertySetHandle props;
  gEffect->clipDefine(effect, kOfxImageEffectOutputClipName, &props);
  gProp->propSetString(props, kOfxImageEffectPropSupportedComponents, 0, kOfxImageComponentRGBA);
  gProp->propSetInt(props, kOfxImageEffectPropSupportsTiles, 0, 0);
  gEffect->clipDefine(effect, kOfxImageEffectSimpleSourceClipName, &props);
  gProp->propSetString(props, kOfxImageEffectPropSupportedComponents, 0, kOfxImageComponentRGBA);
  gProp->propSetInt(props, kOfxImageEffectPropSupportsTiles, 0, 0);
  gProp->propSetInt(props, kOfxImageEffectPropTemporalClipAccess, 0, 1);

  OfxParamSetHandle params;
  gEffect->getParamSet(effect, &params);
  for (int i = 1; i <= kSources; ++i) {
    const std::string name = "source" + std::to_string(i);
    const std::string label = "Source Photo " + std::to_string(i);
    define_string(params, name.c_str(), label.c_str(),
                  "A photo of the new face; several photos are views of one head (the engine picks the one turned "
                  "most like each face)",
                  true);
  }
  define_string(params, "consent_note", "Consent Note",
                "Your confirmation that you may use this likeness for this work: whose face, which release, which "
                "work. Saved with the project; empty: the engine's consent store decides",
                false);
  define_choice(params, "output", "Output", "What the node outputs", kOutputs, kOutputHelp, int(std::size(kOutputs)),
                0);
  define_choice(params, "input_colorspace", "Input Colour Space",
                "The colour space of the input clip; the output is in the same space. auto: scene-linear for "
                "float clips, sRGB for 8- and 16-bit clips",
                kSpaces, nullptr, int(std::size(kSpaces)), 0);
  define_choice(params, "shot_analysis", "Shot Analysis",
                "Which frames the faces are tracked over (tracks, smoothing, colour pooled per track, the reference "
                "face). Hosts without temporal clip access (MLT) always analyse each frame alone",
                kAnalyses, kAnalysisHelp, int(std::size(kAnalyses)), 0);
  for (int i = 0; i < kSchemaCount; ++i) define_schema_param(params, kSchema[i]);
  define_string(params, "engine_python", "Engine Python",
                "The engine's own Python (its environment's bin/python). Empty: $FACE_FUSION_ENGINE_PYTHON, the config "
                "file, else python3",
                true);
  define_string(params, "engine_root", "Engine Folder",
                "The Face Fusion folder that holds engine/. Empty: $FACE_FUSION_ENGINE_ROOT or the config file", true);
  define_string(params, "engine_socket_dir", "Running Engine",
                "Use the engine already serving from this folder (its engine.json) instead of starting one", true);
  return kOfxStatOK;
}

OfxStatus clip_preferences(OfxImageEffectHandle effect, OfxPropertySetHandle out_args, OfxParamSetHandle params) {
  const int output = get_int(params, "output", 0);
  // The composite keeps the input's alpha state; a face layer and a matte are premultiplied.
  const char* state = kOfxImagePreMultiplied;
  if (output == 0) {
    OfxImageClipHandle src;
    OfxPropertySetHandle props = nullptr;
    char* in = nullptr;
    if (gEffect->clipGetHandle(effect, kOfxImageEffectSimpleSourceClipName, &src, &props) != kOfxStatOK || !props ||
        gProp->propGetString(props, kOfxImageEffectPropPreMultiplication, 0, &in) != kOfxStatOK || !in)
      return kOfxStatOK;
    state = in;
  }
  gProp->propSetString(out_args, kOfxImageEffectPropPreMultiplication, 0, state);
  return kOfxStatOK;
}

// Shot Analysis clip: the render reads every frame of the input clip (hosts with temporal access ask first).
OfxStatus frames_needed(OfxImageEffectHandle effect, OfxPropertySetHandle out_args) {
  OfxParamSetHandle params;
  gEffect->getParamSet(effect, &params);
  OfxImageClipHandle src;
  double range[2] = {0, 0};
  if (!gTemporal || get_int(params, "shot_analysis", 0) != 0 ||
      gEffect->clipGetHandle(effect, kOfxImageEffectSimpleSourceClipName, &src, nullptr) != kOfxStatOK ||
      !frame_range(src, range))
    return kOfxStatReplyDefault;
  gProp->propSetDoubleN(out_args, "OfxImageClipPropFrameRange_" kOfxImageEffectSimpleSourceClipName, 2, range);
  return kOfxStatOK;
}

OfxStatus on_load() {
  if (!gHost)
    return kOfxStatErrMissingHostFeature;
  gEffect = (OfxImageEffectSuiteV1*)gHost->fetchSuite(gHost->host, kOfxImageEffectSuite, 1);
  gProp = (OfxPropertySuiteV1*)gHost->fetchSuite(gHost->host, kOfxPropertySuite, 1);
  gParam = (OfxParameterSuiteV1*)gHost->fetchSuite(gHost->host, kOfxParameterSuite, 1);
  gMessage = (OfxMessageSuiteV1*)gHost->fetchSuite(gHost->host, kOfxMessageSuite, 1);
  gMessage2 = (OfxMessageSuiteV2*)gHost->fetchSuite(gHost->host, kOfxMessageSuite, 2);
  if (!gEffect || !gProp || !gParam)
    return kOfxStatErrMissingHostFeature;
  char* name = nullptr;
  if (gProp->propGetString(gHost->host, kOfxPropName, 0, &name) == kOfxStatOK && name && *name)
    gHostName = std::string("OpenFX ") + name;
  int temporal = 0;  // absent (MLT): no temporal clip access
  gTemporal = gProp->propGetInt(gHost->host, kOfxImageEffectPropTemporalClipAccess, 0, &temporal) == kOfxStatOK &&
              temporal != 0;
  return kOfxStatOK;
}

OfxStatus main_entry(const char* action, const void* handle, OfxPropertySetHandle in_args,
                     OfxPropertySetHandle out_args) {
  try {
    OfxImageEffectHandle effect = (OfxImageEffectHandle)handle;
    if (std::strcmp(action, kOfxActionLoad) == 0)
      return on_load();
    if (std::strcmp(action, kOfxActionUnload) == 0) {
      engine_pool().shutdown();
      return kOfxStatOK;
    }
    if (std::strcmp(action, kOfxActionDescribe) == 0)
      return describe(effect);
    if (std::strcmp(action, kOfxImageEffectActionDescribeInContext) == 0)
      return describe_in_context(effect);
    if (std::strcmp(action, kOfxImageEffectActionRender) == 0)
      return render(effect, in_args);
    if (std::strcmp(action, kOfxImageEffectActionGetRegionsOfInterest) == 0) {
      // The whole source frame, whatever window is rendered: faces are found and blended on the whole picture.
      OfxImageClipHandle src;
      OfxRectD rod;
      double t = 0;
      gProp->propGetDouble(in_args, kOfxPropTime, 0, &t);
      gEffect->clipGetHandle(effect, kOfxImageEffectSimpleSourceClipName, &src, nullptr);
      if (gEffect->clipGetRegionOfDefinition(src, t, &rod) != kOfxStatOK)
        return kOfxStatReplyDefault;
      gProp->propSetDoubleN(out_args, "OfxImageClipPropRoI_" kOfxImageEffectSimpleSourceClipName, 4, &rod.x1);
      return kOfxStatOK;
    }
    if (std::strcmp(action, kOfxImageEffectActionGetClipPreferences) == 0) {
      OfxParamSetHandle params;
      gEffect->getParamSet(effect, &params);
      return clip_preferences(effect, out_args, params);
    }
    if (std::strcmp(action, kOfxImageEffectActionGetFramesNeeded) == 0)
      return frames_needed(effect, out_args);
    if (std::strcmp(action, kOfxActionDestroyInstance) == 0) {  // its clip's record goes with it
      std::lock_guard<std::mutex> hold(gClipsLock);
      clip_states().erase(effect);
      return kOfxStatOK;
    }
  } catch (const std::bad_alloc&) {
    return kOfxStatErrMemory;
  } catch (...) {
    return kOfxStatFailed;
  }
  return kOfxStatReplyDefault;
}

void set_host(OfxHost* host) {
  gHost = host;
}

OfxPlugin gPlugin = {kOfxImageEffectPluginApi, 1, "org.facefusion.FaceFusion", 0, 1, set_host, main_entry};

}  // namespace
}  // namespace ff

extern "C" {
EXPORT OfxPlugin* OfxGetPlugin(int nth) {
  return nth == 0 ? &ff::gPlugin : nullptr;
}
EXPORT int OfxGetNumberOfPlugins(void) {
  return 1;
}
}
