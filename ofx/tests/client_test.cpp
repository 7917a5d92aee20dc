// The C++ engine client against a real `python -m engine serve` (started here, as the plugin starts it).
//   client_test PYTHON ENGINE_ROOT CASE...      cases: handshake echo wrong_key consent killed queue missing digests
// Prints "ok CASE" per case that passed; exits 1 on the first failure (tests/test_ofx_client.py runs it).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "digest.h"
#include "engine_client.h"

using namespace ff;

namespace {

EngineConfig config;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

std::vector<float> ramp(int w, int h) {
  std::vector<float> px(size_t(w) * h * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(i % 977) / 977.0f - 0.25f;  // negatives survive too
  return px;
}

void echo_case(EngineClient& c, int w, int h) {
  std::vector<float> px = ramp(w, h);
  Json f;
  f.set("image", c.put_image(px.data(), w, h, "linear", "test")).set("out_slot", c.result_slot(px.size() * 4));
  JobResult r = c.run_job("echo", f);
  std::vector<long long> shape;
  const float* out = r.layer("rgba", &shape);
  CHECK(out && shape.size() == 3 && shape[0] == h && shape[1] == w && shape[2] == 4);
  CHECK(std::memcmp(out, px.data(), px.size() * 4) == 0);  // bit for bit
}

void handshake() {
  auto proc = EngineProcess::start(config);
  EngineClient c(proc->address(), proc->key(), "client_test");
  CHECK(c.hello()["protocol"].as_int() == 1);
  CHECK(c.request("ping")["pong"].as_bool());
  proc->stop();
  CHECK(WIFEXITED(proc->exit_status()) && WEXITSTATUS(proc->exit_status()) == 0);
}

void echo() {
  auto proc = EngineProcess::start(config);
  {
    EngineClient c(proc->address(), proc->key(), "client_test");
    echo_case(c, 33, 17);
    echo_case(c, 640, 360);  // a bigger frame: both slots grow
    echo_case(c, 8, 8);
  }
  proc->stop();
  CHECK(WIFEXITED(proc->exit_status()) && WEXITSTATUS(proc->exit_status()) == 0);
}

void wrong_key() {
  auto proc = EngineProcess::start(config);
  std::string bad = proc->key();
  bad[0] ^= 1;
  std::string err = error_of([&] { EngineClient c(proc->address(), bad, "client_test"); });
  CHECK(err.find("refused this plugin's key") != std::string::npos);
  EngineClient good(proc->address(), proc->key(), "client_test");  // the engine keeps serving
  CHECK(good.request("ping")["pong"].as_bool());
  proc->stop();
  CHECK(WIFEXITED(proc->exit_status()) && WEXITSTATUS(proc->exit_status()) == 0);
}

void consent() {  // a frame of an identity without a confirmation fails with the engine's own message
  auto proc = EngineProcess::start(config);
  {
    EngineClient c(proc->address(), proc->key(), "client_test");
    std::vector<float> px = ramp(64, 64);
    Json f;
    Json source;
    source.set("path", std::getenv("FF_TEST_SOURCE") ? std::getenv("FF_TEST_SOURCE") : "");
    f.set("plate", c.put_image(px.data(), 64, 64, "sRGB", "test"))
        .set("sources", Json::Array{source})
        .set("frame", 1)
        .set("settings", Json(Json::Object{}))
        .set("out_slot", c.result_slot(64 * 64 * 40));
    std::string err = error_of([&] { c.run_job("frame", f); });
    CHECK(err.find("no consent is recorded for source identity") != std::string::npos);
    echo_case(c, 16, 16);  // the connection is fine after a failed job
  }
  proc->stop();
  CHECK(WIFEXITED(proc->exit_status()) && WEXITSTATUS(proc->exit_status()) == 0);
}

void killed() {  // an engine killed mid-job: EngineGone, then a fresh engine serves again
  auto proc = EngineProcess::start(config);
  EngineClient c(proc->address(), proc->key(), "client_test");
  CHECK(::kill(proc->pid(), SIGKILL) == 0);
  std::string err = error_of([&] { echo_case(c, 16, 16); });
  CHECK(!err.empty());
  for (int i = 0; i < 50 && proc->alive(); ++i) usleep(100000);  // the socket closes a moment before the exit
  CHECK(!proc->alive());
  CHECK(WIFSIGNALED(proc->exit_status()) && WTERMSIG(proc->exit_status()) == SIGKILL);
  auto again = EngineProcess::start(config);
  EngineClient c2(again->address(), again->key(), "client_test");
  echo_case(c2, 16, 16);
  again->stop();
  CHECK(WIFEXITED(again->exit_status()) && WEXITSTATUS(again->exit_status()) == 0);
}

void queue() {  // several connections at once, each its own thread (as the plugin's render threads)
  auto proc = EngineProcess::start(config);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      EngineClient c(proc->address(), proc->key(), "client_test");
      for (int i = 0; i < 5; ++i) echo_case(c, 64 + i, 48);
      ++ok;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 4);
  proc->stop();
  CHECK(WIFEXITED(proc->exit_status()) && WEXITSTATUS(proc->exit_status()) == 0);
}

void digests() {  // the MACs of both handshakes and the cache key's hash, against published test vectors
  CHECK(to_hex(md5("abc")) == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(to_hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(hmac("sha256", "key", "The quick brown fox jumps over the lazy dog")) ==
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
  CHECK(to_hex(hmac("md5", "key", "The quick brown fox jumps over the lazy dog")) ==
        "80070713463e7749b90c2dc24911e275");
  std::string big(1000003, 'x');
  Sha256 pieces;
  for (size_t i = 0; i < big.size(); i += 7777) pieces.update(big.data() + i, std::min<size_t>(7777, big.size() - i));
  CHECK(pieces.digest() == sha256(big));
}

void missing() {  // a Python that does not exist: a message, at once
  EngineConfig bad = config;
  bad.python = "/nonexistent/python3";
  std::string err = error_of([&] { EngineProcess::start(bad); });
  CHECK(err.find("not an executable file") != std::string::npos);
  for (int i = 0; i < 20; ++i) {  // a Python that exits at once: the key written to it must not SIGPIPE us
    bad.python = "/bin/false";
    err = error_of([&] { EngineProcess::start(bad); });
    CHECK(err.find("exited during start-up with code 1") != std::string::npos);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: client_test PYTHON ENGINE_ROOT CASE...\n");
    return 2;
  }
  config.python = argv[1];
  config.root = argv[2];
  config.start_timeout_s = 60;
  const std::map<std::string, void (*)()> cases = {
      {"handshake", handshake}, {"echo", echo},   {"wrong_key", wrong_key}, {"consent", consent},
      {"killed", killed},       {"queue", queue}, {"missing", missing},     {"digests", digests}};
  for (int i = 3; i < argc; ++i) {
    const std::string name = argv[i];
    auto it = cases.find(name);
    if (it == cases.end()) {
      std::fprintf(stderr, "unknown case %s\n", name.c_str());
      return 2;
    }
    it->second();
    std::printf("ok %s\n", name.c_str());
    std::fflush(stdout);
  }
  return 0;
}
