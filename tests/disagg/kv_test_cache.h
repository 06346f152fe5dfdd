// Test helpers of the KV transfer tests: a fake paged KV cache whose blocks are scattered byte
// ranges (per layer K codes, V codes, K scales, V scales, each range kind in its own region, as
// in tern's cache), and running this test binary again as a child process (another producer or
// consumer that a test can kill).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "run_process.h"

namespace tern::disagg::testing {

// Range sizes of one block: `layers` × {K codes, V codes[, K scales, V scales]}.
inline std::vector<size_t> kv_layout(int layers, size_t codes, size_t scales) {
  std::vector<size_t> sizes;
  for (int l = 0; l < layers; ++l) {
    sizes.push_back(codes);
    sizes.push_back(codes);
    if (scales > 0) {
      sizes.push_back(scales);
      sizes.push_back(scales);
    }
  }
  return sizes;
}

class FakeCache {
 public:
  // seed 0: zeros; otherwise random bytes.
  FakeCache(int num_blocks, std::vector<size_t> sizes, uint32_t seed)
      : num_blocks_(num_blocks), sizes_(std::move(sizes)) {
    size_t total = 0;
    for (size_t s : sizes_) {
      offsets_.push_back(total);
      total += s * static_cast<size_t>(num_blocks_) + 64;  // a gap: ranges of a block never touch
    }
    mem_.resize(total);
    if (seed != 0) {
      std::mt19937_64 rng(seed);
      for (size_t i = 0; i + 8 <= mem_.size(); i += 8) {
        const uint64_t v = rng();
        std::memcpy(&mem_[i], &v, 8);
      }
    }
  }
  int num_blocks() const { return num_blocks_; }
  const std::vector<size_t>& sizes() const { return sizes_; }
  uint64_t block_bytes() const {
    uint64_t n = 0;
    for (size_t s : sizes_) n += s;
    return n;
  }
  std::vector<std::span<const std::byte>> block(int b) const {
    std::vector<std::span<const std::byte>> out;
    for (size_t r = 0; r < sizes_.size(); ++r)
      out.emplace_back(&mem_[offsets_[r] + b * sizes_[r]], sizes_[r]);
    return out;
  }
  std::vector<std::span<std::byte>> block_mut(int b) {
    std::vector<std::span<std::byte>> out;
    for (size_t r = 0; r < sizes_.size(); ++r)
      out.emplace_back(&mem_[offsets_[r] + b * sizes_[r]], sizes_[r]);
    return out;
  }
  bool same_block(int b, const FakeCache& other, int ob) const {
    const auto mine = block(b);
    const auto theirs = other.block(ob);
    for (size_t r = 0; r < mine.size(); ++r)
      if (std::memcmp(mine[r].data(), theirs[r].data(), mine[r].size()) != 0) return false;
    return true;
  }
  // The gap bytes after every range region: still zero unless something wrote past a span.
  bool gaps_are_zero() const {
    for (size_t r = 0; r < sizes_.size(); ++r)
      for (size_t i = 0; i < 64; ++i)
        if (mem_[offsets_[r] + sizes_[r] * num_blocks_ + i] != std::byte{0}) return false;
    return true;
  }
  void clear_gaps() {
    for (size_t r = 0; r < sizes_.size(); ++r)
      std::memset(&mem_[offsets_[r] + sizes_[r] * num_blocks_], 0, 64);
  }

 private:
  int num_blocks_;
  std::vector<size_t> sizes_;
  std::vector<size_t> offsets_;  // [num_ranges] start of each range kind's region
  std::vector<std::byte> mem_;
};

// Starts this test binary again, running only `filter`, with `env` added; its output goes to
// `log_path`. Returns the child's pid.
inline pid_t spawn_self(const std::string& filter,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        const std::string& log_path) {
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const pid_t pid =
      tern::testing::spawn_process({"/proc/self/exe", "--gtest_filter=" + filter}, fd, fd, env);
  if (fd >= 0) ::close(fd);
  return pid;
}

using tern::testing::wait_exit_code;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace tern::disagg::testing
