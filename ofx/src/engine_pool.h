// The engine every instance of the plugin in a host process shares, and a pool of connections to it: each render
// thread takes its own connection, so several host threads render at once and the engine queues their frames on
// its render lane (one render worker by default) instead of this process serialising them.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "engine_client.h"

namespace ff {

class EnginePool {
 public:
  // A connection to the engine ``config`` names, starting (or restarting) it when needed. Throws EngineError.
  std::unique_ptr<EngineClient> acquire(const EngineConfig& config);
  // Give a connection back; a failed one (``ok`` false) is dropped. ``gone``: the engine died or is stuck: it is
  // stopped (killed if it must) and forgotten, so the next acquire starts (or finds) a fresh one.
  void release(std::unique_ptr<EngineClient> client, bool ok, bool gone = false);
  void shutdown();  // the host unloads the plugin: stop the engine we started

 private:
  std::mutex lock_;
  EngineConfig config_;
  std::shared_ptr<EngineProcess> process_;
  std::vector<std::unique_ptr<EngineClient>> idle_;
};

EnginePool& engine_pool();

}  // namespace ff
