// tern bench suite's config: the defaults, every key read, and each kind of mistake named.
#include "tern/bench/suite/suite_config.h"

#include <gtest/gtest.h>

#include <string>

#include "tern/core/error.h"

namespace tern::bench {
namespace {

using nlohmann::json;

std::string error_of(const json& doc) {
  try {
    parse_suite_config(doc, "/base");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SuiteConfig, DefaultsAreTheMatrixOfTheResultsPage) {
  const SuiteConfig c = parse_suite_config(json::object(), "/base");
  EXPECT_TRUE(c.model.empty());
  EXPECT_EQ(c.weights.types,
            (std::vector<std::string>{"f16", "q8_0", "q4_k_m", "q4_0", "gptq", "awq"}));
  EXPECT_EQ(c.speculative.methods, (std::vector<std::string>{"draft", "draft-k4", "ngram"}));
  EXPECT_EQ(c.kv_cache.dtypes, (std::vector<std::string>{"f16", "int8", "fp8_e4m3"}));
  EXPECT_EQ(c.mixed_load.setups, (std::vector<std::string>{"whole", "chunked", "pd"}));
  EXPECT_EQ(c.serving.concurrency, (std::vector<int>{1, 4, 16}));
  ASSERT_EQ(c.shapes.configs.size(), 3u);
  EXPECT_EQ(c.shapes.configs[2].filename(), "qwen3-4b");
  for (bool on : {c.weights.enabled, c.speculative.enabled, c.kv_cache.enabled,
                  c.mixed_load.enabled, c.serving.enabled, c.shapes.enabled})
    EXPECT_TRUE(on);
}

TEST(SuiteConfig, ReadsEveryKindOfKeyAndResolvesPathsFromTheConfigsFolder) {
  const json doc = json::parse(R"({
    "model": "models/m.gguf", "draft": "/abs/d.gguf", "prompt": "Hi", "threads": 3,
    "llama_cpp": "../llama.cpp/build/bin",
    "weights": {"types": ["q4_0", "gptq"], "group_size": 64, "prompt_tokens": 32,
                "decode_tokens": 8, "reps": 1},
    "speculative": {"type": "q8_0", "methods": ["ngram"], "decode_tokens": 16, "runs": 2},
    "kv_cache": {"dtypes": ["int8"], "context": 100},
    "mixed_load": {"setups": ["pd"], "request_rate": 0.5, "long_num_prompts": 0},
    "serving": {"concurrency": [2, 8], "output_len": 4},
    "shapes": false
  })");
  const SuiteConfig c = parse_suite_config(doc, "/base");
  EXPECT_EQ(c.model, "/base/models/m.gguf");
  EXPECT_EQ(c.draft, "/abs/d.gguf");
  EXPECT_EQ(c.llama_cpp, "/base/../llama.cpp/build/bin");
  EXPECT_EQ(c.prompt, "Hi");
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.weights.types, (std::vector<std::string>{"q4_0", "gptq"}));
  EXPECT_EQ(c.weights.group_size, 64);
  EXPECT_EQ(c.weights.reps, 1);
  EXPECT_EQ(c.speculative.type, "q8_0");
  EXPECT_EQ(c.speculative.runs, 2);
  EXPECT_EQ(c.kv_cache.context, 100);
  EXPECT_EQ(c.kv_cache.reps, 2);  // left at its default
  EXPECT_EQ(c.mixed_load.setups, (std::vector<std::string>{"pd"}));
  EXPECT_DOUBLE_EQ(c.mixed_load.request_rate, 0.5);
  EXPECT_EQ(c.mixed_load.long_num_prompts, 0);
  EXPECT_EQ(c.serving.concurrency, (std::vector<int>{2, 8}));
  EXPECT_FALSE(c.shapes.enabled);
  EXPECT_TRUE(c.serving.enabled);

  // What results.json records of the run reads back as the same config.
  const SuiteConfig again = parse_suite_config(json(suite_config_json(c)), "");
  EXPECT_EQ(again.model, c.model);
  EXPECT_EQ(again.weights.types, c.weights.types);
  EXPECT_EQ(again.serving.concurrency, c.serving.concurrency);
  EXPECT_FALSE(again.shapes.enabled);
}

TEST(SuiteConfig, MistakesAreErrorsThatNameTheKey) {
  EXPECT_EQ(error_of(json::array()), "config: expected a JSON object");
  EXPECT_EQ(error_of({{"modle", "x"}}), "config: unknown key 'modle' (did you mean 'model'?)");
  EXPECT_EQ(error_of({{"weights", {{"reps", 0}}}}), "config.weights.reps: 0 is outside [1, 100]");
  EXPECT_EQ(error_of({{"weights", {{"reps", "3"}}}}), "config.weights.reps: expected an integer");
  EXPECT_EQ(error_of({{"weights", {{"types", {"q4_0", "q3_x"}}}}}),
            "config.weights.types: unknown weight type 'q3_x' (tern quantize's GGUF types, gptq "
            "or awq)");
  EXPECT_EQ(error_of({{"speculative", {{"type", "gptq"}}}}),
            "config.speculative.type: unknown weight type 'gptq' (tern quantize's GGUF types)");
  EXPECT_EQ(error_of({{"weights", {{"group_size", 96}}}}),
            "config.weights.group_size: 96 is not 32, 64 or 128");
  EXPECT_EQ(error_of({{"speculative", {{"methods", {"eagle"}}}}}),
            "config.speculative.methods: unknown 'eagle' (one of draft, draft-k4, ngram)");
  EXPECT_EQ(error_of({{"mixed_load", {{"setups", {"chunk"}}}}}),
            "config.mixed_load.setups: unknown 'chunk' (one of whole, chunked, pd) (did you mean "
            "'chunked'?)");
  EXPECT_NE(error_of({{"kv_cache", {{"dtypes", {"q8_0"}}}}})
                .find("config.kv_cache.dtypes: unknown KV-cache dtype 'q8_0'"),
            std::string::npos);
  EXPECT_EQ(error_of({{"mixed_load", {{"request_rate", 0}}}}),
            "config.mixed_load.request_rate: must be greater than 0.000000");
  EXPECT_EQ(error_of({{"serving", {{"concurrency", json::array()}}}}),
            "config.serving.concurrency: expected a list of integers");
  EXPECT_EQ(error_of({{"serving", {{"concurrency", {1, -4}}}}}),
            "config.serving.concurrency: every entry must be an integer in [1, 4096]");
  EXPECT_EQ(error_of({{"shapes", "off"}}),
            "config.shapes: expected an object, or false to skip it");
  EXPECT_EQ(error_of({{"shapes", {{"config", {"a"}}}}}),
            "config.shapes: unknown key 'config' (did you mean 'configs'?)");
  EXPECT_EQ(error_of({{"model", 3}}), "config.model: expected a path (a string)");
}

}  // namespace
}  // namespace tern::bench
