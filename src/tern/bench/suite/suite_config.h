// The experiment matrix of `tern bench suite`: which model, which weight types, which
// techniques, at what sizes. Every key of the JSON config is optional; what it leaves out is the
// default matrix (the one docs/RESULTS.md shows). A section set to false is not run.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tern::bench {

// Weight types at batch 1: size, decode and prefill speed, time to first token, % of the
// bandwidth ceiling. Types are `tern quantize`'s GGUF types, plus "gptq" and "awq" (4-bit
// checkpoint folders quantized from an importance matrix of the model's own text).
struct WeightsSection {
  bool enabled = true;
  std::vector<std::string> types{"f16", "q8_0", "q4_k_m", "q4_0", "gptq", "awq"};
  // Of gptq and awq: inputs per group (32, 64 or 128). 64, not the usual 128: it must divide
  // every matrix's inputs, and the widened stories260K's attention output has 64.
  int group_size = 64;
  int prompt_tokens = 256;  // prefill (and TTFT) of one prompt this long
  int decode_tokens = 64;
  int reps = 3;    // measured runs inside one bench-model / llama-bench (their mean)
  int rounds = 3;  // the engines alternate this many times; the row is their median
};

// Speculative decoding on one quantized target: plain decoding, then each method, the runs
// alternating, medians over `runs`.
struct SpeculativeSection {
  bool enabled = true;
  std::string type = "q4_0";
  std::vector<std::string> methods{"draft", "draft-k4", "ngram"};  // draft: adaptive K ≤ 8
  int decode_tokens = 256;
  int runs = 3;
};

// Decode with the KV cache at `context` tokens, per KV dtype; and what a GiB of cache holds.
// On a real shape with dummy weights by default: the widened stories260K's heads are 8 wide,
// its cache a few KiB a token, too little for its dtype to show (and too narrow for
// llama.cpp's q8_0 cache blocks).
struct KvCacheSection {
  bool enabled = true;
  std::filesystem::path config;  // a model-config folder (dummy weights); empty: the model
  std::string type = "q4_0";
  std::vector<std::string> dtypes{"f16", "int8", "fp8_e4m3"};
  int context = 2048;
  int decode_tokens = 32;
  int reps = 2;
};

// Short streams at a steady rate while long prompts arrive, through `tern serve` with whole
// prefill, chunked prefill (tern serve's default: chunks of at most chunk_tokens, steps sized
// to about 200 ms), and a prefill and a decode instance behind `tern router` (P + D).
struct MixedLoadSection {
  bool enabled = true;
  std::string type = "q4_0";
  std::vector<std::string> setups{"whole", "chunked", "pd"};
  int chunk_tokens = 256;  // chunked: --max-num-batched-tokens
  int num_prompts = 40;
  double request_rate = 1.0;
  int input_len = 64;
  int output_len = 48;
  int long_num_prompts = 3;
  int long_input_len = 1500;
  int long_output_len = 8;
  double long_request_rate = 0.1;
};

// `tern bench serve` against one `tern serve` at each concurrency (all requests at once).
struct ServingSection {
  bool enabled = true;
  std::string type = "q4_0";
  std::vector<int> concurrency{1, 4, 16};
  int prompts_per_concurrency = 2;  // num_prompts = this × concurrency (at least 4)
  int input_len = 128;
  int output_len = 64;
};

// Real model shapes with dummy weights (a folder with config.json each, read as --load-format
// dummy), at batch 1: the same figures as the weights section.
struct ShapesSection {
  bool enabled = true;
  std::vector<std::filesystem::path> configs;  // default: Qwen3 0.6B, 1.7B, 4B of the fixtures
  std::filesystem::path tokenizer;             // default: the fixtures' qwen-tokenizer
  std::vector<std::string> types{"q4_0", "q4_k_m"};
  int prompt_tokens = 128;
  int decode_tokens = 32;
  int reps = 1;
  int rounds = 3;
};

struct SuiteConfig {
  std::filesystem::path model;  // F16/F32/BF16 GGUF that every weight type is made from
  std::filesystem::path draft;  // GGUF of the draft model (same vocabulary); empty: no draft rows
  std::string prompt = "Once upon a time";  // of the speculative rows
  int threads = 0;                          // 0: all cores
  // --device of every engine command (plan, bench-model, generate, serve), "vulkan" or
  // "vulkan:N"; empty: tern's default, the CPU. llama.cpp's rows then run with -ngl 99.
  std::string device;
  std::filesystem::path llama_cpp;     // llama.cpp's build/bin (empty: not compared)
  std::filesystem::path ik_llama_cpp;  // ik_llama.cpp's build/bin
  WeightsSection weights;
  SpeculativeSection speculative;
  KvCacheSection kv_cache;
  MixedLoadSection mixed_load;
  ServingSection serving;
  ShapesSection shapes;
};

// Reads a config document. Relative paths are taken from `base_dir` (the config file's
// folder). An unknown key, a value of the wrong type or out of range, an unknown weight type,
// method, setup or KV dtype is an error that names it.
SuiteConfig parse_suite_config(const nlohmann::json& doc, const std::filesystem::path& base_dir);

// The default matrix, with the shapes' configs and tokenizer under `fixtures`.
SuiteConfig default_suite_config(const std::filesystem::path& fixtures);

// The fixtures folder: $TERN_FIXTURES, else ../shared/fixtures.
std::filesystem::path fixtures_dir();

// The config as JSON (what results.json records of the run).
nlohmann::ordered_json suite_config_json(const SuiteConfig& config);

}  // namespace tern::bench
