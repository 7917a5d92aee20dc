// HMAC-MD5 and HMAC-SHA256: what CPython's multiprocessing.connection handshake signs with (MD5 up to Python 3.11,
// SHA-256 from 3.12). Self-contained so the bundle links no crypto library a host might ship in another version.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ff {

// SHA-256 fed in pieces (a frame's rows straight from the host's memory), for the plugin's cache keys.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string digest();  // 32 raw bytes; the object is spent afterwards

 private:
  void block(const unsigned char* p);
  uint32_t h_[8];
  unsigned char buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

std::string md5(const std::string& data);     // 16 raw bytes
std::string sha256(const std::string& data);  // 32 raw bytes
// HMAC (RFC 2104) with "md5" or "sha256"; throws std::invalid_argument for any other name.
std::string hmac(const std::string& digest, const std::string& key, const std::string& message);
std::string to_hex(const std::string& raw);
std::string from_hex(const std::string& hex);  // throws std::invalid_argument on a bad digit or odd length

}  // namespace ff
