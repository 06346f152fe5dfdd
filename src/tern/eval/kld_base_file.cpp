// KldBaseWriter / KldBaseFile: the base model's log-probabilities, written once, mapped and
// checked when a quantized model is compared with them.
#include "tern/eval/kld_base_file.h"

#include <bit>
#include <cstring>
#include <limits>

#include "tern/core/error.h"

namespace tern {
namespace {

static_assert(std::endian::native == std::endian::little, "the base file is little-endian");

uint32_t read_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

KldBaseWriter::KldBaseWriter(std::string path, const EvalWindows& windows, int64_t vocab_size)
    : path_(std::move(path)),
      out_(path_, std::ios::binary | std::ios::trunc),
      rows_per_window_(windows.scored_per_window()),
      vocab_size_(vocab_size),
      windows_left_(windows.num_windows()) {
  if (!out_) throw Error(path_ + ": cannot create the KL-divergence base file");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (vocab_size < 1 || vocab_size > kMax || windows.ctx > kMax || windows.num_windows() > kMax)
    throw Error(path_ + ": vocabulary, context or window count too large for the file's header");
  const uint32_t header[5] = {
      kKldBaseVersion, static_cast<uint32_t>(vocab_size), static_cast<uint32_t>(windows.ctx),
      static_cast<uint32_t>(windows.num_windows()), static_cast<uint32_t>(windows.bos)};
  out_.write(kKldBaseMagic, sizeof kKldBaseMagic);
  out_.write(reinterpret_cast<const char*>(header), sizeof header);
  out_.write(reinterpret_cast<const char*>(windows.tokens.data()),
             static_cast<std::streamsize>(windows.tokens.size() * sizeof(int32_t)));
  if (!out_) throw Error(path_ + ": write failed");
}

void KldBaseWriter::write_window(std::span<const float> log_probs) {
  if (windows_left_ <= 0) throw Error(path_ + ": more windows written than the header promises");
  if (static_cast<int64_t>(log_probs.size()) != rows_per_window_ * vocab_size_)
    throw Error(path_ + ": a window of " + std::to_string(log_probs.size()) +
                " log-probabilities, expected " + std::to_string(rows_per_window_ * vocab_size_));
  out_.write(reinterpret_cast<const char*>(log_probs.data()),
             static_cast<std::streamsize>(log_probs.size_bytes()));
  if (!out_) throw Error(path_ + ": write failed");
  --windows_left_;
}

void KldBaseWriter::finish() {
  if (windows_left_ != 0)
    throw Error(path_ + ": " + std::to_string(windows_left_) + " windows were never written");
  out_.close();
  if (!out_) throw Error(path_ + ": write failed");
}

KldBaseFile::KldBaseFile(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {
  const std::string& name = file_->path();
  const std::byte* data = file_->data();
  const uint64_t size = file_->size();
  if (size < kKldBaseHeaderBytes)
    throw Error(name + ": " + std::to_string(size) +
                " bytes is too short for a KL-divergence base file's " +
                std::to_string(kKldBaseHeaderBytes) + "-byte header");
  if (std::memcmp(data, kKldBaseMagic, sizeof kKldBaseMagic) != 0)
    throw Error(name + ": not a tern KL-divergence base file (it does not start with \"TERNKLD\")");
  const uint32_t version = read_u32(data + 8);
  if (version != kKldBaseVersion)
    throw Error(name + ": KL-divergence base file version " + std::to_string(version) +
                ", tern reads " + std::to_string(kKldBaseVersion));
  const uint32_t vocab = read_u32(data + 12), ctx = read_u32(data + 16),
                 num_windows = read_u32(data + 20);
  const int32_t bos = static_cast<int32_t>(read_u32(data + 24));
  constexpr uint32_t kMax = std::numeric_limits<int32_t>::max();
  if (vocab < 1 || vocab > kMax)
    throw Error(name + ": vocabulary size " + std::to_string(vocab) + " is out of range");
  if (ctx < kMinEvalContext || ctx > kMax)
    throw Error(name + ": context " + std::to_string(ctx) + " is out of range (at least " +
                std::to_string(kMinEvalContext) + ")");
  if (num_windows < 1 || num_windows > kMax)
    throw Error(name + ": window count " + std::to_string(num_windows) + " is out of range");
  if (bos < -1 || bos >= static_cast<int32_t>(vocab))
    throw Error(name + ": BOS id " + std::to_string(bos) + " is outside the vocabulary of " +
                std::to_string(vocab));

  // Sizes in u64 with overflow checks: each factor is below 2^31, their products need not fit.
  const uint64_t scored = ctx - 1 - ctx / 2;
  uint64_t tokens = 0, rows = 0, floats = 0, token_bytes = 0, float_bytes = 0, expected = 0;
  if (__builtin_mul_overflow(uint64_t{num_windows}, uint64_t{ctx}, &tokens) ||
      __builtin_mul_overflow(tokens, uint64_t{4}, &token_bytes) ||
      __builtin_mul_overflow(uint64_t{num_windows}, scored, &rows) ||
      __builtin_mul_overflow(rows, uint64_t{vocab}, &floats) ||
      __builtin_mul_overflow(floats, uint64_t{4}, &float_bytes) ||
      __builtin_add_overflow(uint64_t{kKldBaseHeaderBytes} + token_bytes, float_bytes, &expected))
    throw Error(name + ": the header's sizes (" + std::to_string(num_windows) + " windows of " +
                std::to_string(ctx) + " tokens, vocabulary " + std::to_string(vocab) +
                ") overflow");
  if (size < expected)
    throw Error(name + ": truncated: " + std::to_string(size) + " bytes, the header promises " +
                std::to_string(expected) + " (" + std::to_string(num_windows) + " windows of " +
                std::to_string(ctx) + " tokens, vocabulary " + std::to_string(vocab) + ")");
  if (size > expected)
    throw Error(name + ": " + std::to_string(size - expected) +
                " bytes after the last log-probability row");
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0)
    throw Error(name + ": the mapping is not aligned for f32 rows");

  windows_.ctx = ctx;
  windows_.bos = bos;
  windows_.tokens.resize(tokens);
  std::memcpy(windows_.tokens.data(), data + kKldBaseHeaderBytes, token_bytes);
  for (size_t i = 0; i < windows_.tokens.size(); ++i)
    if (windows_.tokens[i] < 0 || windows_.tokens[i] >= static_cast<int32_t>(vocab))
      throw Error(name + ": token " + std::to_string(i) + " (id " +
                  std::to_string(windows_.tokens[i]) + ") is outside the vocabulary of " +
                  std::to_string(vocab));
  vocab_size_ = vocab;
  log_probs_ = reinterpret_cast<const float*>(data + kKldBaseHeaderBytes + token_bytes);
}

KldBaseFile KldBaseFile::open(const std::string& path) {
  return KldBaseFile(std::make_shared<const MappedFile>(path));
}

}  // namespace tern
