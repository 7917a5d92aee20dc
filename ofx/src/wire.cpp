#include "wire.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "digest.h"

namespace ff {
namespace {

const std::string kChallenge = "#CHALLENGE#";
const std::string kWelcome = "#WELCOME#";
const std::string kFailure = "#FAILURE#";

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(&out[got], n - got, 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      throw EngineError(std::string("no random bytes for the handshake: ") + std::strerror(errno));
    }
    got += size_t(r);
  }
  return out;
}

// "{name}payload" -> name, or "" when the message has no digest prefix (the legacy MD5 form).
std::string digest_prefix(const std::string& message) {
  if (message.size() < 3 || message[0] != '{')
    return "";
  size_t close = message.find('}', 1);
  if (close == std::string::npos || close > 20)
    return "";
  return message.substr(1, close - 1);
}

bool same(const std::string& a, const std::string& b) {  // constant time, as hmac.compare_digest
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string challenge_response(const std::string& key, const std::string& message) {
  // 3.12 treats a 16- or 20-byte message as the legacy form whatever it holds; so do we.
  std::string name = (message.size() == 16 || message.size() == 20) ? "" : digest_prefix(message);
  if (name.empty())
    return hmac("md5", key, message);
  if (name != "sha256" && name != "md5")
    throw EngineError("the engine asks for an HMAC digest this plugin does not know ('" + name + "')");
  return "{" + name + "}" + hmac(name, key, message);  // the MAC covers the prefix too
}

bool response_ok(const std::string& key, const std::string& message, const std::string& response) {
  if (response.size() == 16)
    return same(response, hmac("md5", key, message));  // a 3.11 engine
  const std::string name = digest_prefix(response);
  if (name != "sha256" && name != "md5")
    return false;
  return same(response.substr(name.size() + 2), hmac(name, key, message));
}

Wire::~Wire() {
  close();
}

void Wire::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void Wire::open(const std::string& address, const std::string& key, double timeout_s) {
  close();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.size() >= sizeof addr.sun_path)
    throw EngineError("engine socket path is too long: " + address);
  std::memcpy(addr.sun_path, address.c_str(), address.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw EngineError(std::string("cannot make a socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    throw EngineGone("no engine listens on " + address + " (" + std::strerror(err) + ")");
  }
  fd_ = fd;
  try {
    answer_challenge(key);
    deliver_challenge(key);
    (void)timeout_s;
  } catch (...) {
    close();
    throw;
  }
}

void Wire::answer_challenge(const std::string& key) {
  std::string message = recv_bytes(10.0, 256);
  if (message.compare(0, kChallenge.size(), kChallenge) != 0)
    throw EngineError("the engine did not start the handshake with a challenge");
  message = message.substr(kChallenge.size());
  if (message.size() < 20)
    throw EngineError("the engine's challenge is too short");
  send_bytes(challenge_response(key, message));
  if (recv_bytes(10.0, 256) != kWelcome)
    throw EngineError("the engine refused this plugin's key (wrong key: is engine.json from another engine?)");
}

void Wire::deliver_challenge(const std::string& key) {
  // The 3.12 form; a 3.11 engine answers it with a bare HMAC-MD5 of the same bytes, which we accept (as 3.12 does).
  const std::string message = "{sha256}" + random_bytes(40);
  send_bytes(kChallenge + message);
  const std::string response = recv_bytes(10.0, 256);
  if (!response_ok(key, message, response)) {
    send_bytes(kFailure);
    throw EngineError("the engine could not prove it holds the key: refusing to talk to it");
  }
  send_bytes(kWelcome);
}

bool Wire::readable(double timeout_s) {
  if (fd_ < 0)
    throw EngineGone("not connected to the engine");
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, int(timeout_s * 1000));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

void Wire::write_all(const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      throw EngineGone(std::string("the engine connection broke: ") + std::strerror(errno));
    }
    data += w;
    n -= size_t(w);
  }
}

void Wire::send_bytes(const std::string& data) {
  if (fd_ < 0)
    throw EngineGone("not connected to the engine");
  std::string header;
  const uint64_t n = data.size();
  auto be = [&header](uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) header.push_back(char(v >> (8 * i)));
  };
  if (n > 0x7fffffff) {  // multiprocessing's long form: -1, then the length as 8 bytes
    be(0xffffffffu, 4);
    be(n, 8);
  } else {
    be(n, 4);
  }
  write_all((header + data).data(), header.size() + data.size());
}

void Wire::read_exact(char* out, size_t n, double timeout_s) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
  while (n > 0) {
    if (timeout_s >= 0) {
      const double left = std::chrono::duration<double>(deadline - clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      int r = left > 0 ? ::poll(&p, 1, int(left * 1000) + 1) : 0;
      if (r < 0 && errno == EINTR)
        continue;
      if (r == 0)
        throw EngineError("the engine did not answer within " + std::to_string(int(timeout_s)) + " s");
    }
    ssize_t r = ::recv(fd_, out, n, 0);
    if (r == 0)
      throw EngineGone("the engine closed the connection (it died or shut down)");
    if (r < 0) {
      if (errno == EINTR)
        continue;
      throw EngineGone(std::string("the engine connection broke: ") + std::strerror(errno));
    }
    out += r;
    n -= size_t(r);
  }
}

std::string Wire::recv_bytes(double timeout_s, size_t max_bytes) {
  if (fd_ < 0)
    throw EngineGone("not connected to the engine");
  unsigned char h[4];
  read_exact(reinterpret_cast<char*>(h), 4, timeout_s);
  uint64_t n = uint64_t(h[0]) << 24 | uint64_t(h[1]) << 16 | uint64_t(h[2]) << 8 | h[3];
  if (n == 0xffffffffu) {
    unsigned char l[8];
    read_exact(reinterpret_cast<char*>(l), 8, timeout_s);
    n = 0;
    for (unsigned char c : l) n = n << 8 | c;
  }
  if (n > max_bytes) {
    close();  // the framing is lost now
    throw EngineError("the engine sent a message of " + std::to_string(n) + " bytes, over the limit");
  }
  std::string out(size_t(n), '\0');
  if (n)
    read_exact(&out[0], size_t(n), timeout_s);
  return out;
}

}  // namespace ff
