// A shared-memory frame slot the engine made (engine/transport/slots.py): a 4 KiB header (magic "FFSLOT\0\1",
// layout 1, owner pid, client id, capacity, generation at byte 40) then the payload. The engine creates and
// unlinks segments; a client only maps them (never unlinks: that would pull the frame from under the engine).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ff {

class Slot {
 public:
  static constexpr size_t kHeader = 4096;
  explicit Slot(const std::string& name);  // attach; throws EngineError
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  const std::string& name() const { return name_; }
  size_t capacity() const { return capacity_; }
  char* payload() const { return base_ + kHeader; }
  int64_t generation() const;
  int64_t bump();  // announce new contents: the next generation, written into the header

 private:
  std::string name_;
  char* base_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace ff
