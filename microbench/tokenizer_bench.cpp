// Byte-level BPE throughput (MB/s of UTF-8 input) on a few megabytes of mixed English, Chinese,
// code and emoji text, generated here from built-in snippets, with the fixture tokenizers.
// Tokenizers come from $TERN_FIXTURES (default ../shared/fixtures from the current directory).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tern/tokenizer/byte_level_bpe.h"
#include "tern/tokenizer/hf_tokenizer_files.h"

namespace {

constexpr const char* kSnippets[] = {
    "The quick brown fox jumps over the lazy dog. ",
    "In 2024, inference engines served 1,234,567 requests per day at 99.9% uptime. ",
    "She said: \"It's not what we'd planned, but we'll manage.\" ",
    "Tokenizers split text into pieces before merging byte pairs by rank.\n",
    "\xE4\xBB\x8A\xE5\xA4\xA9\xE5\xA4\xA9\xE6\xB0\x94\xE5\xBE\x88\xE5\xA5\xBD\xEF\xBC\x8C"
    "\xE6\x88\x91\xE4\xBB\xAC\xE5\x8E\xBB\xE5\x85\xAC\xE5\x9B\xAD\xE6\x95\xA3\xE6\xAD\xA5"
    "\xE5\x90\xA7\xE3\x80\x82",  // 今天天气很好，我们去公园散步吧。
    "\xE5\xA4\xA7\xE8\xAF\xAD\xE8\xA8\x80\xE6\xA8\xA1\xE5\x9E\x8B\xE7\x9A\x84\xE6\x8E\xA8"
    "\xE7\x90\x86\xE9\x80\x9F\xE5\xBA\xA6\xE5\xBE\x88\xE9\x87\x8D\xE8\xA6\x81\xE3\x80\x82\n",
    // 大语言模型的推理速度很重要。
    "for (int i = 0; i < n; ++i) {\n    sum += values[i] * weights[i];\n}\n",
    "def tokenize(text: str) -> list[int]:\n\treturn [vocab[t] for t in text.split()]\n",
    "    if (ptr == nullptr) return -EINVAL;  // 0x7fff_ffff\n",
    "\xF0\x9F\x9A\x80 launch \xF0\x9F\x98\x80\xF0\x9F\x8E\x89 party \xE2\x9C\x85 done "
    "\xF0\x9F\xA6\x99\n",  // 🚀 😀🎉 ✅ 🦙
    "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x84pfel \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE ",
};

// About `bytes` of text: snippets picked by a fixed linear congruential sequence.
std::string mixed_text(size_t bytes) {
  std::string text;
  text.reserve(bytes + 256);
  uint64_t state = 42;
  constexpr size_t kCount = sizeof(kSnippets) / sizeof(kSnippets[0]);
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += kSnippets[(state >> 33) % kCount];
  }
  return text;
}

struct Loaded {
  tern::HfTokenizerFiles files;
  std::unique_ptr<tern::ByteLevelBpe> bpe;
};

// Loads a fixture folder once; nullptr (and a message) when it is not there.
const Loaded* load(const std::string& folder, std::string& error) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[folder];
  if (slot) return slot.get();
  const char* env = std::getenv("TERN_FIXTURES");
  const std::filesystem::path root = env != nullptr && *env != '\0' ? env : "../shared/fixtures";
  const std::filesystem::path dir = root / folder;
  if (!std::filesystem::is_directory(dir)) {
    error = "fixture folder " + dir.string() + " missing (set TERN_FIXTURES)";
    return nullptr;
  }
  slot = std::make_unique<Loaded>();
  slot->files = tern::load_hf_tokenizer_files(dir.string());
  slot->bpe = std::make_unique<tern::ByteLevelBpe>(slot->files.vocab, slot->files.merges,
                                                   slot->files.byte_level);
  return slot.get();
}

void encode_bench(benchmark::State& state, const std::string& folder) {
  std::string error;
  const Loaded* tokenizer = load(folder, error);
  if (tokenizer == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  static const std::string text = mixed_text(4 << 20);
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (auto _ : state) {
    ids.clear();
    tokenizer->bpe->encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}

void BM_QwenEncode(benchmark::State& state) { encode_bench(state, "qwen-tokenizer"); }
void BM_Llama3Encode(benchmark::State& state) { encode_bench(state, "llama3-tokenizer"); }

BENCHMARK(BM_QwenEncode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Llama3Encode)->Unit(benchmark::kMillisecond);

}  // namespace
