// A growable f32 array in 64-byte aligned host memory: the CPU backend's activation buffers and
// scratch. Growing zeroes the new array and drops the old contents (a step refills what it
// reads), so it is meant for reserve(), never for a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace tern {

class HostFloats {
 public:
  void grow(int64_t n) {
    if (n <= size_) return;
    const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    data_.reset(p);
    size_ = n;
  }
  float* data() const { return data_.get(); }
  int64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  int64_t size_ = 0;
};

}  // namespace tern
