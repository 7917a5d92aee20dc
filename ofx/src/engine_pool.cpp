#include "engine_pool.h"

namespace ff {

EnginePool& engine_pool() {
  static EnginePool* pool = new EnginePool();  // never destroyed: hosts unload plugins in any order at exit
  return *pool;
}

std::unique_ptr<EngineClient> EnginePool::acquire(const EngineConfig& config) {
  std::shared_ptr<EngineProcess> process;
  {
    std::lock_guard<std::mutex> hold(lock_);
    if (process_ && (!(config == config_) || !process_->alive())) {
      idle_.clear();
      process_->stop();
      process_.reset();
    }
    while (!idle_.empty()) {
      auto client = std::move(idle_.back());
      idle_.pop_back();
      try {  // an engine that died between renders is found here, not by the render that comes next
        client->request("ping", Json(Json::Object{}), 5.0);
        return client;
      } catch (const EngineError&) {
        idle_.clear();
        if (process_)
          process_->stop();
        process_.reset();
      }
    }
    if (!process_) {  // started under the lock: other render threads wait for this one engine, never start two
      process_ = config.socket_dir.empty() ? EngineProcess::start(config) : EngineProcess::find(config.socket_dir);
      config_ = config;
    }
    process = process_;
  }
  try {
    return std::make_unique<EngineClient>(process->address(), process->key(), "Face Fusion OpenFX");
  } catch (const EngineGone&) {
    std::lock_guard<std::mutex> hold(lock_);
    if (process_ == process)
      process_.reset();  // it is gone: the next render starts (or finds) another
    throw;
  }
}

void EnginePool::release(std::unique_ptr<EngineClient> client, bool ok, bool gone) {
  std::lock_guard<std::mutex> hold(lock_);
  if (ok && client && client->usable()) {
    idle_.push_back(std::move(client));
    return;
  }
  client.reset();
  if (process_ && (gone || !process_->alive())) {
    idle_.clear();  // their connections went with it
    process_->kill();
    process_.reset();
  }
}

void EnginePool::shutdown() {
  std::lock_guard<std::mutex> hold(lock_);
  idle_.clear();
  if (process_)
    process_->stop();
  process_.reset();
}

}  // namespace ff
