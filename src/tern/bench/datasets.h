// The prompts of a serving benchmark, built as vLLM's benchmark datasets build them
// (vllm/benchmarks/datasets/: random, sharegpt, prefix_repetition) so runs compare.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tern/tokenizer/tokenizer.h"

namespace tern::bench {

struct SampleRequest {
  std::string prompt;
  int64_t prompt_len = 0;           // tokens of the prompt by the benchmark's tokenizer
  int64_t expected_output_len = 0;  // sent as max_tokens / max_completion_tokens
};

// Seeded draws that give the same prompts for a seed on any platform (std distributions are
// implementation-defined, so integers are drawn by rejection from mt19937_64's bits).
class DatasetRng {
 public:
  explicit DatasetRng(uint64_t seed) : engine_(seed) {}
  int64_t uniform_int(int64_t low, int64_t high);  // inclusive
  template <typename T>
  void shuffle(std::vector<T>& items) {  // Fisher-Yates
    for (size_t i = items.size(); i > 1; --i)
      std::swap(items[i - 1],
                items[static_cast<size_t>(uniform_int(0, static_cast<int64_t>(i) - 1))]);
  }

 private:
  std::mt19937_64 engine_;
};

// Random token ids decoded to text: each request's input length is uniform in
// [floor(L·(1−r)), ceil(L·(1+r))] (L = input_len less the special tokens the tokenizer adds),
// its output length in [max(1, floor(O·(1−r))), ceil(O·(1+r))]; a shared random prefix of
// prefix_len tokens comes first; the rest is a run of consecutive allowed (non-special) ids
// from a random offset. The text is re-encoded and trimmed or extended (up to 10 rounds) so its
// token count is the drawn length.
struct RandomDatasetOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  int64_t prefix_len = 0;
  double range_ratio = 0;
  uint64_t seed = 0;
};
std::vector<SampleRequest> random_dataset(const Tokenizer& tokenizer,
                                          const RandomDatasetOptions& options);

// ShareGPT JSON: a list of {"conversations": [{"from": ..., "value": ...}, ...]}. Entries with
// fewer than two turns are dropped, the rest shuffled by the seed; the first turn is the
// prompt and the second's token count the output length (unless output_len is given). A pair
// is skipped when prompt or output has < 4 tokens (the output check only without output_len),
// the prompt > 1024 or both together > 2048 tokens. When too few remain, random picks of the
// kept ones are repeated up to num_prompts, as vLLM oversamples.
struct ShareGptOptions {
  std::string path;
  int64_t num_prompts = 1000;
  std::optional<int64_t> output_len;
  uint64_t seed = 0;
};
std::vector<SampleRequest> sharegpt_dataset(const Tokenizer& tokenizer,
                                            const ShareGptOptions& options);
// The same from JSON text already read (`name` for error messages).
std::vector<SampleRequest> sharegpt_dataset_from_text(const Tokenizer& tokenizer,
                                                      const std::string& json_text,
                                                      const std::string& name,
                                                      const ShareGptOptions& options);

// num_prefixes random prefixes of prefix_len tokens, each followed by num_prompts/num_prefixes
// random suffixes of suffix_len tokens (prompts = prefix + suffix), shuffled: a workload for
// prefix caching.
struct PrefixRepetitionOptions {
  int64_t num_prompts = 1000;
  int64_t prefix_len = 256;
  int64_t suffix_len = 256;
  int64_t num_prefixes = 10;
  int64_t output_len = 128;
  uint64_t seed = 0;
};
std::vector<SampleRequest> prefix_repetition_dataset(const Tokenizer& tokenizer,
                                                     const PrefixRepetitionOptions& options);

}  // namespace tern::bench
