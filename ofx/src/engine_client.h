// The plugin's side of the engine protocol (engine/protocol, engine/client in Python): start or reuse
// ``python -m engine serve``, authenticate, say hello, move pixels through the engine's slots and run jobs.
// One EngineClient is one connection, used by one thread at a time; the plugin keeps a pool of them.
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "json.h"
#include "slot.h"
#include "wire.h"

namespace ff {

struct EngineConfig {
  std::string python = "python3";       // the engine's own Python (its virtual environment)
  std::string root;                     // the folder holding engine/ (cwd and PYTHONPATH of the engine)
  std::string socket_dir;               // non-empty: use the engine already serving there (its engine.json)
  std::string log_path;                 // the engine's stderr goes here (empty: the host's stderr)
  std::vector<std::string> extra_args;  // more `engine serve` options (tests: --render-workers, ...)
  double start_timeout_s = 120.0;
  bool operator==(const EngineConfig& o) const {
    return python == o.python && root == o.root && socket_dir == o.socket_dir && log_path == o.log_path &&
           extra_args == o.extra_args;
  }
};

// Where to reach an engine: started by us (we hold its stdin: it exits when this process dies) or found.
class EngineProcess {
 public:
  static std::shared_ptr<EngineProcess> start(const EngineConfig& config);
  static std::shared_ptr<EngineProcess> find(const std::string& socket_dir);  // reads engine.json
  ~EngineProcess();
  bool alive();  // started: the child has not exited; found: always true (the connection tells)
  void stop();   // started only: close its stdin (it shuts down), wait, kill if it must
  void kill();   // started only: SIGKILL now (it died or is stuck: nothing to wait for)
  const std::string& address() const { return address_; }
  const std::string& key() const { return key_; }
  pid_t pid() const { return pid_; }
  int exit_status() const { return status_; }

 private:
  std::string address_, key_, socket_dir_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int status_ = -1;
  bool reaped_ = false;
};

struct JobResult {
  Json event;                  // the terminal "done" event
  Json result;                 // its "result"
  const Slot* slot = nullptr;  // where the result's layers are (null: no pixels)
  // A layer's payload and shape, or null when the result has no such layer.
  const float* layer(const std::string& name, std::vector<long long>* shape = nullptr) const;
};

class EngineClient {
 public:
  // Connect, authenticate and say hello (heartbeats on): throws EngineError / EngineGone.
  EngineClient(const std::string& address, const std::string& key, const std::string& client_name);

  Json request(const std::string& op, Json fields = Json(Json::Object{}),
               double timeout_s = 30.0);  // a direct op's result
  // Submit a job and wait for its terminal event. No message (not even a heartbeat) for silence_s: the engine
  // is stuck (EngineError). An "error" event throws EngineError with the engine's message. ``abort`` (may be
  // empty) is asked between messages; true cancels the job.
  JobResult run_job(const std::string& op, Json fields, const std::function<bool()>& abort = {},
                    double silence_s = 30.0);

  // A float32 image in one of this connection's slots, as the protocol's image reference.
  Json put_image(const float* rgba, int width, int height, const std::string& colorspace, const std::string& name);
  // The slot the engine should write the next result into (grown to at least nbytes).
  std::string result_slot(size_t nbytes);

  const Json& hello() const { return hello_; }
  bool usable() const { return wire_.is_open(); }

 private:
  Json next_message(double timeout_s);
  Slot& attach(const std::string& name);
  Slot& own_slot(std::string& name, size_t nbytes);

  Wire wire_;
  Json hello_;
  long long next_id_ = 1;
  std::map<std::string, std::unique_ptr<Slot>> slots_;
  std::string in_slot_, out_slot_;
};

}  // namespace ff
