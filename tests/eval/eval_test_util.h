// Shared by the perplexity tests: a seeded English text in stories260K's register, the
// independent token-by-token reference, and base files built byte by byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/core/mapped_file.h"
#include "tern/engine/sequence_runner.h"
#include "tern/eval/eval_windows.h"
#include "tern/eval/kld_base_file.h"

namespace tern::testing {

// `sentences` simple story sentences drawn with `seed`: varied enough that the model's
// predictions differ from position to position, in the vocabulary it knows.
inline std::string story_text(int sentences, uint32_t seed = 1) {
  static const char* kSubjects[] = {"Lily",          "Tom", "The little dog", "A big bird", "Mom",
                                    "The happy cat", "Ben", "The old man"};
  static const char* kVerbs[] = {"saw",         "liked",     "found",    "wanted",
                                 "played with", "looked at", "gave Sue", "ran to"};
  static const char* kObjects[] = {"a red ball", "the tall tree", "a shiny stone", "her friend",
                                   "the park",   "a big cake",    "the blue sky",  "a small box"};
  static const char* kEndings[] = {
      ".", " and smiled.", " every day.", " in the garden.", " with a friend.", ". It was fun."};
  std::mt19937 rng(seed);
  auto pick = [&](const auto& list) { return list[rng() % (sizeof(list) / sizeof(list[0]))]; };
  std::string text = "Once upon a time,";
  for (int i = 0; i < sentences; ++i) {
    if (i > 0 && rng() % 5 == 0) text += "\n";
    if (i > 0 && rng() % 4 == 0) text += " One day,";
    // (appended piece by piece: GCC 12 warns falsely about `" " + std::string`)
    for (const char* word : {pick(kSubjects), pick(kVerbs), pick(kObjects)})
      text.append(" ").append(word);
    text += pick(kEndings);
  }
  return text;
}

// The NLL of every scored token of `windows`, one window at a time, token by token through a
// SequenceRunner, with a log-softmax in double of the test's own: what perplexity() must agree
// with. [num_windows * scored_per_window]
inline std::vector<double> reference_nll(Decoder& decoder, const EvalWindows& windows) {
  SequenceRunner runner(decoder, windows.ctx);
  const int64_t vocab = decoder.config().vocab_size;
  std::vector<double> nll;
  for (int64_t w = 0; w < windows.num_windows(); ++w) {
    runner.reset();
    std::span<const int32_t> tokens = windows.window(w);
    for (int64_t j = 0; j + 1 < windows.ctx; ++j) {
      const int32_t fed = j == 0 && windows.bos >= 0 ? windows.bos : tokens[static_cast<size_t>(j)];
      std::span<const float> logits = runner.feed(fed);
      if (j < windows.first_scored()) continue;
      double max = logits[0];
      for (float v : logits) max = std::max<double>(max, v);
      double sum = 0.0;
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[static_cast<size_t>(i)] - max);
      const int32_t next = tokens[static_cast<size_t>(j + 1)];
      nll.push_back(max + std::log(sum) - logits[static_cast<size_t>(next)]);
    }
  }
  return nll;
}

// The bytes of a base file with the given header fields and `tokens`, the log-prob rows all
// `fill` (the caller may overwrite them).
inline std::vector<std::byte> base_file_bytes(uint32_t vocab, uint32_t ctx, uint32_t windows,
                                              int32_t bos, const std::vector<int32_t>& tokens,
                                              float fill) {
  const uint64_t rows = uint64_t{windows} * (ctx - 1 - ctx / 2);
  std::vector<std::byte> bytes(kKldBaseHeaderBytes + tokens.size() * 4 + rows * vocab * 4);
  std::memcpy(bytes.data(), kKldBaseMagic, 8);
  const uint32_t header[5] = {kKldBaseVersion, vocab, ctx, windows, static_cast<uint32_t>(bos)};
  std::memcpy(bytes.data() + 8, header, sizeof header);
  std::memcpy(bytes.data() + kKldBaseHeaderBytes, tokens.data(), tokens.size() * 4);
  float* rows_begin =
      reinterpret_cast<float*>(bytes.data() + kKldBaseHeaderBytes + tokens.size() * 4);
  std::fill(rows_begin, rows_begin + rows * vocab, fill);
  return bytes;
}

inline std::vector<std::byte> file_bytes(const std::string& path) {
  MappedFile f(path);
  return {f.data(), f.data() + f.size()};
}

}  // namespace tern::testing
