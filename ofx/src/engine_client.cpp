#include "engine_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "digest.h"

extern char** environ;

namespace ff {

constexpr int kProtocol = 1;  // engine/__init__.py PROTOCOL_VERSION

// ------------------------------------------------------------------------------------------ the process

namespace {

std::string read_ready_line(int fd, pid_t pid, double timeout_s, int* status, bool* reaped) {
  std::string buf;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      try {
        Json msg = Json::parse(line);
        if (msg["event"].is_string() && msg["event"].as_string() == "ready")
          return line;
      } catch (const std::exception&) {  // other output before the ready line
      }
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    if (r > 0) {
      char chunk[4096];
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n > 0) {
        buf.append(chunk, size_t(n));
        continue;
      }
      if (n == 0)
        r = -2;  // EOF: it exited
    }
    if (::waitpid(pid, status, WNOHANG) == pid && (*reaped = true))
      throw EngineError("the engine exited during start-up with code " +
                        std::to_string(WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status)) +
                        " (see its log)");
    if (std::chrono::steady_clock::now() > deadline)
      throw EngineError("the engine did not start within " + std::to_string(int(timeout_s)) + " s");
  }
}

}  // namespace

std::shared_ptr<EngineProcess> EngineProcess::start(const EngineConfig& c) {
  if (c.root.empty())
    throw EngineError(
        "no engine folder: set the plugin's Engine Folder parameter, $FACE_FUSION_ENGINE_ROOT or "
        "\"root\" in ~/.config/facefusion/ofx.json");
  char tmpl[] = "/tmp/ffofx-XXXXXX";  // mode 0700; the engine writes engine.json (with its key) there
  if (!::mkdtemp(tmpl))
    throw EngineError(std::string("cannot make the engine's folder: ") + std::strerror(errno));
  auto proc = std::make_shared<EngineProcess>();
  proc->socket_dir_ = tmpl;
  std::string raw(32, '\0');
  if (::getrandom(&raw[0], raw.size(), 0) != ssize_t(raw.size()))
    throw EngineError("no random bytes for a key");
  proc->key_ = raw;

  std::vector<std::string> args = {c.python,
                                   "-m",
                                   "engine",
                                   "serve",
                                   "--socket-dir",
                                   proc->socket_dir_,
                                   "--key-stdin",
                                   "--remove-socket-dir",
                                   "--watch-stdin",
                                   "--parent-pid",
                                   std::to_string(::getpid())};
  args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("PYTHONHOME=", 0) == 0 || kv.rfind("PYTHONPATH=", 0) == 0 ||
        kv.rfind("FACEFUSION_ENGINE_KEY=", 0) == 0)
      continue;  // a host's own Python settings must not leak into the engine's Python
    env.push_back(kv);
  }
  env.push_back("PYTHONPATH=" + c.root);
  env.push_back("PYTHONUNBUFFERED=1");
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(&e[0]);
  envp.push_back(nullptr);

  if (c.python.find('/') != std::string::npos && ::access(c.python.c_str(), X_OK) != 0)
    throw EngineError("the engine's Python '" + c.python + "' is not an executable file");
  // stdin is a socket pair, not a pipe: writing the key to an engine that died at once must not raise SIGPIPE,
  // which would kill the host (send with MSG_NOSIGNAL cannot).
  int in[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)
    throw EngineError("cannot make a socket pair");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw EngineError("cannot make a pipe");
  }
  int log_fd = c.log_path.empty() ? -1 : ::open(c.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  pid_t pid = ::fork();
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (log_fd >= 0)
      ::dup2(log_fd, 2);
    if (::chdir(c.root.c_str()) != 0)
      ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::execvpe(argv[0], argv.data(), envp.data());  // a bare name ("python3"): searched on PATH
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  if (log_fd >= 0)
    ::close(log_fd);
  if (pid < 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw EngineError(std::string("cannot start the engine: ") + std::strerror(errno));
  }
  proc->pid_ = pid;
  proc->stdin_fd_ = in[1];
  const std::string line = to_hex(raw) + "\n";
  if (::send(in[1], line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size())) { /* died: reported below */
  }
  try {
    Json ready = Json::parse(read_ready_line(out[0], pid, c.start_timeout_s, &proc->status_, &proc->reaped_));
    proc->address_ = ready["address"].as_string();
  } catch (...) {
    ::close(out[0]);
    proc->stop();
    throw;
  }
  // The engine says nothing more on stdout; a thread drains it so a stray print can never block it.
  int fd = out[0];
  std::thread([fd] {
    char sink[4096];
    while (::read(fd, sink, sizeof sink) > 0) {
    }
    ::close(fd);
  }).detach();
  return proc;
}

std::shared_ptr<EngineProcess> EngineProcess::find(const std::string& socket_dir) {
  std::ifstream in(socket_dir + "/engine.json");
  if (!in)
    throw EngineError("no running engine in " + socket_dir + " (no engine.json there)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    Json info = Json::parse(text.str());
    auto proc = std::make_shared<EngineProcess>();
    proc->address_ = info["address"].as_string();
    proc->key_ = from_hex(info["key"].as_string());
    return proc;
  } catch (const std::exception& e) {
    throw EngineError(socket_dir + "/engine.json is not an engine's connection file (" + e.what() + ")");
  }
}

EngineProcess::~EngineProcess() {
  stop();
}

bool EngineProcess::alive() {
  if (pid_ <= 0)
    return true;
  if (reaped_)
    return false;
  const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD))
    reaped_ = true;  // never signal a pid that may be reused
  return !reaped_;
}

void EngineProcess::kill() {
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);
    stdin_fd_ = -1;
  }
  if (pid_ <= 0 || !alive())
    return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status_, 0);
  reaped_ = true;
}

void EngineProcess::stop() {
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);  // --watch-stdin: the engine shuts down cleanly
    stdin_fd_ = -1;
  }
  if (pid_ <= 0 || reaped_)
    return;
  for (int i = 0; i < 150 && alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (alive()) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
}

// ------------------------------------------------------------------------------------------- the client

const float* JobResult::layer(const std::string& name, std::vector<long long>* shape) const {
  if (!slot)
    return nullptr;
  for (const Json& l : result["layers"].as_array()) {
    if (l["name"].as_string() != name)
      continue;
    if (l["dtype"].as_string() != "float32")
      throw EngineError("layer " + name + " is not float32");
    size_t count = 1;
    std::vector<long long> dims;
    for (const Json& d : l["shape"].as_array()) {
      dims.push_back(d.as_int());
      count *= size_t(d.as_int());
    }
    const size_t offset = size_t(l["offset"].as_int());
    if (offset + count * 4 > slot->capacity())
      throw EngineError("layer " + name + " runs past its slot");
    if (shape)
      *shape = dims;
    return reinterpret_cast<const float*>(slot->payload() + offset);
  }
  return nullptr;
}

EngineClient::EngineClient(const std::string& address, const std::string& key, const std::string& client_name) {
  wire_.open(address, key);
  Json fields;
  fields.set("protocol", kProtocol).set("client", client_name).set("pid", int(::getpid())).set("heartbeat", true);
  hello_ = request("hello", fields, 30.0);
}

Json EngineClient::next_message(double timeout_s) {
  Json msg = Json::parse(wire_.recv_bytes(timeout_s));
  if (!msg["v"].is_number() || msg["v"].as_int() != kProtocol)
    throw EngineError("the engine speaks another protocol version; update the plugin or the engine");
  const Json& notice = msg["notice"];
  if (msg["kind"].is_string() && msg["kind"].as_string() == "notice" && notice["type"].is_string() &&
      notice["type"].as_string() == "shutdown") {
    wire_.close();
    throw EngineGone("the engine shut down (" + (notice["message"].is_string() ? notice["message"].as_string() : "") +
                     ")");
  }
  return msg;
}

Json EngineClient::request(const std::string& op, Json fields, double timeout_s) {
  const long long id = next_id_++;
  fields.set("v", kProtocol).set("id", id).set("op", op);
  wire_.send_bytes(fields.dump());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      throw EngineError("the engine did not answer '" + op + "' within " + std::to_string(int(timeout_s)) + " s");
    Json msg = next_message(left);
    if (msg["kind"].as_string() != "reply" || msg["id"].as_int() != id)
      continue;  // heartbeats, stray events
    if (!msg["ok"].as_bool())
      throw EngineError(msg["error"].is_string() ? msg["error"].as_string() : "refused");
    return msg["result"];
  }
}

Slot& EngineClient::attach(const std::string& name) {
  auto it = slots_.find(name);
  if (it == slots_.end())
    it = slots_.emplace(name, std::make_unique<Slot>(name)).first;
  return *it->second;
}

Slot& EngineClient::own_slot(std::string& name, size_t nbytes) {
  if (!name.empty() && attach(name).capacity() >= nbytes)
    return attach(name);
  if (!name.empty()) {  // too small for this frame: give it back, take a bigger one
    slots_.erase(name);
    Json f;
    f.set("slot", name);
    request("slot_free", f);
    name.clear();
  }
  Json f;
  f.set("nbytes", (long long)nbytes);
  name = request("slot_alloc", f)["slot"].as_string();
  return attach(name);
}

Json EngineClient::put_image(const float* rgba, int width, int height, const std::string& colorspace,
                             const std::string& name) {
  const size_t nbytes = size_t(width) * size_t(height) * 16;
  Slot& slot = own_slot(in_slot_, nbytes);
  std::memcpy(slot.payload(), rgba, nbytes);
  Json ref;
  ref.set("slot", slot.name())
      .set("gen", (long long)slot.bump())
      .set("dtype", "float32")
      .set("shape", Json::Array{height, width, 4})
      .set("colorspace", colorspace)
      .set("name", name);
  return ref;
}

std::string EngineClient::result_slot(size_t nbytes) {
  return own_slot(out_slot_, nbytes).name();
}

JobResult EngineClient::run_job(const std::string& op, Json fields, const std::function<bool()>& abort,
                                double silence_s) {
  const long long job = request(op, std::move(fields))["job"].as_int();
  bool cancelled = false;
  auto heard = std::chrono::steady_clock::now();
  while (true) {
    if (!cancelled && abort && abort()) {
      Json f;
      f.set("job", job);
      const long long id = next_id_++;
      f.set("v", kProtocol).set("id", id).set("op", "cancel");
      wire_.send_bytes(f.dump());  // its reply arrives among the events; the terminal event ends the wait
      cancelled = true;
    }
    // Heartbeats come every second (hello asked for them): silence means a stuck engine, not a slow frame.
    if (!wire_.readable(0.25)) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - heard).count() > silence_s)
        throw EngineStuck("the engine is stuck: no word from it for " + std::to_string(int(silence_s)) +
                          " s; it is stopped and the next render starts a fresh one");
      continue;
    }
    Json msg = next_message(silence_s);
    heard = std::chrono::steady_clock::now();
    if (msg["kind"].as_string() != "event" || msg["job"].as_int() != job)
      continue;
    const Json& ev = msg["event"];
    const std::string type = ev["type"].as_string();
    if (type == "error")
      throw EngineError(ev["message"].is_string() ? ev["message"].as_string() : "job failed");
    if (type == "cancelled")
      throw EngineError("the render was cancelled");
    if (type != "done")
      continue;
    JobResult out;
    out.event = ev;
    out.result = ev["result"];
    if (out.result["slot"].is_string()) {
      const std::string name = out.result["slot"].as_string();
      if (out.result["replaced"].is_string()) {  // the engine made a bigger slot and dropped ours
        slots_.erase(out.result["replaced"].as_string());
        if (out_slot_ == out.result["replaced"].as_string())
          out_slot_ = name;
      }
      if (out_slot_.empty())
        out_slot_ = name;
      Slot& slot = attach(name);
      if (slot.generation() != out.result["gen"].as_int())
        throw EngineError("the result slot holds other contents than the engine announced (stale)");
      out.slot = &slot;
    }
    return out;
  }
}

}  // namespace ff
