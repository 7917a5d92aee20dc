#include "slot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wire.h"

namespace ff {

namespace {
const char kMagic[8] = {'F', 'F', 'S', 'L', 'O', 'T', '\0', '\1'};
}

Slot::Slot(const std::string& name) : name_(name) {
  if (name.compare(0, 4, "ffe_") != 0 || name.size() > 30 || name.find('/') != std::string::npos)
    throw EngineError("'" + name + "' is not an engine slot name");
  int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    throw EngineError("cannot attach slot " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || size_t(st.st_size) < kHeader) {
    ::close(fd);
    throw EngineError("slot " + name + " is smaller than its header");
  }
  size_ = size_t(st.st_size);
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw EngineError("cannot map slot " + name + ": " + std::strerror(errno));
  base_ = static_cast<char*>(p);
  uint32_t layout = 0;
  int64_t capacity = 0;
  std::memcpy(&layout, base_ + 8, 4);
  std::memcpy(&capacity, base_ + 32, 8);
  if (std::memcmp(base_, kMagic, 8) != 0 || layout != 1 || capacity < 0 || size_t(capacity) + kHeader > size_) {
    ::munmap(base_, size_);
    base_ = nullptr;
    throw EngineError("slot " + name + " has an unknown header: engine and plugin versions differ");
  }
  capacity_ = size_t(capacity);
}

Slot::~Slot() {
  if (base_)
    ::munmap(base_, size_);
}

int64_t Slot::generation() const {
  int64_t gen;
  std::memcpy(&gen, base_ + 40, 8);  // little-endian, as the engine's struct "<q" (x86-64 and arm64 alike)
  return gen;
}

int64_t Slot::bump() {
  const int64_t gen = generation() + 1;
  std::memcpy(base_ + 40, &gen, 8);
  return gen;
}

}  // namespace ff
