// `tern bench throughput` through the built binary on stories260K: lengths are fixed unless
// --random-range-ratio asks for a range (vLLM's default), and bad flags are one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "run_process.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

constexpr const char* kModel = "stories260K/stories260K.gguf";

TEST(BenchThroughputCli, LengthsAreFixedByDefault) {
  TERN_REQUIRE_FIXTURE(kModel);
  auto r = run_tern({"bench", "throughput", "--model", fixture(kModel), "--num-prompts", "3",
                     "--input-len", "32", "--output-len", "16", "--json", "-t", "1",
                     "--kv-cache-memory", "16MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("3 requests, input 32, output 16 tokens"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_tokens"], 3 * 32);
  EXPECT_EQ(j["output_tokens"], 3 * 16);  // ignore_eos: every request runs to its length
  EXPECT_EQ(j["input_len"], 32);
  EXPECT_EQ(j["output_len"], 16);
  EXPECT_EQ(j["random_range_ratio"], 0.0);
}

TEST(BenchThroughputCli, RangeRatioDrawsLengthsFromTheRange) {
  TERN_REQUIRE_FIXTURE(kModel);
  // [floor(32·0.5), ceil(32·1.5)] = [16, 48] and [8, 24].
  auto r = run_tern({"bench", "throughput", "--model", fixture(kModel), "--num-prompts", "8",
                     "--input-len", "32", "--output-len", "16", "--random-range-ratio", "0.5",
                     "--json", "-t", "1", "--kv-cache-memory", "16MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("8 requests, input 16-48, output 8-24 tokens"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const int64_t prompt = j["prompt_tokens"], output = j["output_tokens"];
  EXPECT_GE(prompt, 8 * 16);
  EXPECT_LE(prompt, 8 * 48);
  EXPECT_GE(output, 8 * 8);
  EXPECT_LE(output, 8 * 24);
  // The lengths of seed 0 are drawn, not all 32 (a run that ignored the ratio gives 8 · 32).
  EXPECT_NE(prompt, 8 * 32);
}

TEST(BenchThroughputCli, BadFlagsAreOneLineErrors) {
  TERN_REQUIRE_FIXTURE(kModel);
  const std::vector<std::vector<std::string>> cases = {
      {"--random-range-ratio", "1"},
      {"--random-range-ratio", "-0.1"},
      {"--input-len", "0"},
      {"--num-prompts", "0"},
  };
  for (const auto& extra : cases) {
    std::vector<std::string> args = {"bench", "throughput", "--model", fixture(kModel)};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << extra[0] << " " << extra[1] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("tern: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// A request longer than max_model_len would be cut short by the engine: fewer tokens than
// asked, reported as a success. It is refused before the run instead.
TEST(BenchThroughputCli, RequestsOverMaxModelLenAreRefused) {
  TERN_REQUIRE_FIXTURE(kModel);
  auto r = run_tern({"bench", "throughput", "--model", fixture(kModel), "--num-prompts", "2",
                     "--input-len", "100", "--output-len", "100", "--max-model-len", "150",
                     "--kv-cache-memory", "16MiB", "-t", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "tern: --input-len 100 and --output-len 100 make requests of up to 200 tokens, over "
            "max_model_len 150 (see --max-model-len)\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace tern
