// The engine's control channel as CPython's multiprocessing.connection frames it (engine/transport/channel.py),
// and its mutual HMAC challenge, in both forms: Python <= 3.11 (HMAC-MD5 over 20 random bytes, no prefix) and
// Python >= 3.12 ("{sha256}" + 40 random bytes, answered "{sha256}" + HMAC-SHA256 of the whole message).
// The wire format is written down in ofx/PROTOCOL.md.
#pragma once
#include <stdexcept>
#include <string>

namespace ff {

// Anything wrong with the engine or the connection to it; the message is one line an artist can act on.
struct EngineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct EngineGone : EngineError {  // the connection closed: the engine died or shut down
  using EngineError::EngineError;
};
struct EngineStuck : EngineError {  // alive but silent: not even a heartbeat for too long
  using EngineError::EngineError;
};

class Wire {
 public:
  Wire() = default;
  ~Wire();
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  // Connect to the engine's Unix socket and authenticate with ``key`` (raw bytes); throws EngineError.
  void open(const std::string& address, const std::string& key, double timeout_s = 10.0);
  void close();
  bool is_open() const { return fd_ >= 0; }

  void send_bytes(const std::string& data);
  // One frame; waits at most timeout_s (<0: forever). Throws EngineGone on EOF, EngineError on a timeout.
  std::string recv_bytes(double timeout_s, size_t max_bytes = 1 << 20);

  // True when a frame (or EOF) is waiting, within timeout_s.
  bool readable(double timeout_s);

  // The handshake, client side (answer the engine's challenge, then challenge it); public for the tests.
  void answer_challenge(const std::string& key);
  void deliver_challenge(const std::string& key);
  int fd() const { return fd_; }
  void adopt(int fd) { fd_ = fd; }

 private:
  void read_exact(char* out, size_t n, double timeout_s);
  void write_all(const char* data, size_t n);
  int fd_ = -1;
};

// The response multiprocessing expects to a challenge ``message`` (the bytes after "#CHALLENGE#").
std::string challenge_response(const std::string& key, const std::string& message);
// True when ``response`` is a valid answer to ``message``: "{sha256}"+HMAC-SHA256 or a bare 16-byte HMAC-MD5.
bool response_ok(const std::string& key, const std::string& message, const std::string& response);

}  // namespace ff
