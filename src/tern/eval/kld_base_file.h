// The reference of a KL-divergence run (`tern perplexity --kl-divergence-base FILE`): the base
// model's windows and, for each scored position, its log-probabilities over the whole
// vocabulary, exact as f32 (llama.cpp stores them as 16-bit steps; exact rows make a model
// against itself come out at KLD 0).
//
// Layout, little-endian:
//   char  magic[8] = "TERNKLD\0"
//   u32   version = 1
//   u32   vocab_size, ctx, num_windows
//   i32   bos                          (-1: each window starts with the text's own token)
//   i32   tokens[num_windows * ctx]    (the text's tokens, before BOS replaces a window's first)
//   f32   log_probs[num_windows][ctx - 1 - ctx/2][vocab_size]
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>

#include "tern/core/mapped_file.h"
#include "tern/eval/eval_windows.h"

namespace tern {

inline constexpr char kKldBaseMagic[8] = {'T', 'E', 'R', 'N', 'K', 'L', 'D', '\0'};
inline constexpr uint32_t kKldBaseVersion = 1;
inline constexpr size_t kKldBaseHeaderBytes = 8 + 5 * 4;

// Writes a base file window by window, as the base model's forwards produce them.
class KldBaseWriter {
 public:
  // Creates `path` and writes the header and tokens. Throws tern::Error naming the path.
  KldBaseWriter(std::string path, const EvalWindows& windows, int64_t vocab_size);

  // Appends the next window's rows. log_probs: [scored_per_window, vocab_size]
  void write_window(std::span<const float> log_probs);
  // Flushes and closes; throws tern::Error unless every window was written and the disk took it.
  void finish();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t rows_per_window_, vocab_size_, windows_left_;
};

// A base file, mapped and validated: sizes, every token id, bos, and the length of the whole
// (a truncated or overlong file is refused). The log-probability rows are checked as they are
// used (kl_divergence refuses a row that is not a distribution).
class KldBaseFile {
 public:
  // Throws tern::Error naming the file for anything that does not fit the layout.
  explicit KldBaseFile(std::shared_ptr<const MappedFile> file);
  static KldBaseFile open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const EvalWindows& windows() const { return windows_; }
  int64_t vocab_size() const { return vocab_size_; }

  // The base model's log-probabilities at scored position k of window w. [vocab_size]
  std::span<const float> log_probs(int64_t w, int64_t k) const {
    const size_t row = static_cast<size_t>(w * windows_.scored_per_window() + k);
    return {log_probs_ + row * static_cast<size_t>(vocab_size_), static_cast<size_t>(vocab_size_)};
  }

 private:
  std::shared_ptr<const MappedFile> file_;
  EvalWindows windows_;
  int64_t vocab_size_ = 0;
  const float* log_probs_ = nullptr;  // into the mapping
};

}  // namespace tern
