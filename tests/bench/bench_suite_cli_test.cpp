// `tern bench suite` end to end on stories260K: a tiny matrix through every section (weights,
// speculation, KV dtypes, the mixed load with whole, chunked and P + D, serving), whose
// results.json has every field, and whose page and plots are written; then its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "backend/vulkan_test_util.h"
#include "fixtures.h"
#include "run_process.h"
#include "tern/bench/suite/suite_results.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::fixture;
using testing::run_tern;

class BenchSuiteCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern_suite_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write_config(const json& config) const {
    const fs::path path = dir_ / "suite.json";
    std::ofstream(path) << config.dump(2);
    return path;
  }

  fs::path dir_;
};

// Figures every row of a section must have measured (the others may be null: plain decoding
// has no α, an engine may lack a feature).
const std::map<std::string, std::vector<std::string>> kMeasured = {
    {"weights",
     {"weight_bytes", "decode_tokens_per_s", "ceiling_tokens_per_s", "ceiling_pct",
      "prefill_tokens_per_s", "ttft_ms"}},
    {"speculative", {"decode_tokens_per_s"}},
    {"kv_cache", {"context", "kv_bytes_per_token", "tokens_per_gib", "decode_tokens_per_s"}},
    {"mixed_load",
     {"itl_p50_ms", "itl_p99_ms", "max_itl_ms", "ttft_p50_ms", "long_ttft_mean_ms",
      "long_ttft_max_ms", "failed"}},
    {"serving",
     {"concurrency", "output_tokens_per_s", "requests_per_s", "ttft_p50_ms", "tpot_p50_ms",
      "failed"}},
};

TEST_F(BenchSuiteCli, TinyMatrixWritesEveryField) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const fs::path config = write_config({
      {"model", model},
      {"draft", model},
      {"threads", 1},
      {"weights",
       {{"types", {"f16", "q4_0"}}, {"prompt_tokens", 16}, {"decode_tokens", 4}, {"reps", 1}}},
      {"speculative", {{"decode_tokens", 16}, {"runs", 1}}},
      {"kv_cache",
       {{"config", ""},
        {"dtypes", {"f16", "int8"}},
        {"context", 32},
        {"decode_tokens", 4},
        {"reps", 1}}},
      {"mixed_load",
       {{"num_prompts", 3},
        {"request_rate", 50},
        {"input_len", 8},
        {"output_len", 4},
        {"long_num_prompts", 1},
        {"long_input_len", 100},
        {"long_output_len", 2},
        {"long_request_rate", 50},
        {"chunk_tokens", 32}}},
      {"serving",
       {{"concurrency", {1, 2}},
        {"prompts_per_concurrency", 1},
        {"input_len", 8},
        {"output_len", 4}}},
      {"shapes", false},
  });
  const fs::path out = dir_ / "out";
  const auto r = run_tern({"bench", "suite", "--config", config.string(), "--out", out.string(),
                           "--commit", "test", "--page", (dir_ / "RESULTS.md").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::ifstream in(out / "results.json");
  const json doc = json::parse(in);
  const bench::SuiteResults results = bench::results_from_json(doc);  // every key present
  EXPECT_EQ(results.commit, "test");
  EXPECT_EQ(results.threads, 1);
  EXPECT_GT(results.bandwidth_bytes_per_s, 0);
  EXPECT_GT(results.draft_cost_ratio, 0);
  std::map<std::string, int> rows_of;
  for (const bench::SuiteRow& row : results.rows) {
    ++rows_of[row.section];
    EXPECT_EQ(row.engine, "tern");
    EXPECT_FALSE(row.commands.empty()) << row.name;
    for (const std::string& command : row.commands) EXPECT_EQ(command.rfind("tern ", 0), 0u);
    for (const std::string& key : kMeasured.at(row.section))
      EXPECT_TRUE(row.metrics.at(key).is_number()) << row.section << " " << row.name << " " << key;
  }
  EXPECT_EQ(rows_of["weights"], 2);
  EXPECT_EQ(rows_of["speculative"], 5);  // plain, draft, draft K = 4, n-gram, the draft alone
  EXPECT_EQ(rows_of["kv_cache"], 2);
  EXPECT_EQ(rows_of["mixed_load"], 3);
  EXPECT_EQ(rows_of["serving"], 2);
  // The load other programs put on the machine, around each section that ran.
  std::vector<std::string> watched;
  for (const bench::SectionLoad& l : results.machine_load) watched.push_back(l.section);
  EXPECT_EQ(watched, (std::vector<std::string>{"weights", "speculative", "kv_cache", "mixed_load",
                                               "serving"}));
  // The fixed-K draft always drafts (the adaptive one may stop: here the draft is the target).
  for (const bench::SuiteRow& row : results.rows)
    if (row.section == "speculative" && row.name == "draft model (K = 4)") {
      EXPECT_TRUE(row.metrics.at("acceptance_rate").is_number()) << row.name;
      EXPECT_TRUE(row.metrics.at("mean_acceptance_length").is_number()) << row.name;
    }
  ASSERT_EQ(results.timelines.size(), 3u);
  for (const bench::ItlTimeline& t : results.timelines) {
    EXPECT_FALSE(t.gaps.empty()) << t.setup;
    EXPECT_EQ(t.long_requests.size(), 1u) << t.setup;
  }
  for (const char* file :
       {"results.md", "throughput.svg", "speculation.svg", "itl_timeline.svg", "kv_capacity.svg"})
    EXPECT_TRUE(fs::exists(out / file)) << file;
  // The page elsewhere links the plots relative to itself.
  std::ifstream page(dir_ / "RESULTS.md");
  const std::string md((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("](out/throughput.svg)"), std::string::npos);

  // --render draws the same page again from results.json alone.
  const fs::path again = dir_ / "again";
  const auto rendered = run_tern(
      {"bench", "suite", "--render", (out / "results.json").string(), "--out", again.string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  std::ifstream a(out / "results.md"), b(again / "results.md");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>()),
            std::string((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>()));
}

// --device: every command that runs a model runs it on the device (plan's bandwidth is the
// device's copy), the others (quantize) stay on the CPU, and the page says where it ran.
TEST_F(BenchSuiteCli, OnAVulkanDeviceEveryModelRunsThere) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const fs::path config = write_config({
      {"model", fixture("stories260K/stories260K.gguf")},
      {"threads", 1},
      {"weights",
       {{"types", {"q4_0"}},
        {"prompt_tokens", 16},
        {"decode_tokens", 4},
        {"reps", 1},
        {"rounds", 1}}},
      {"speculative", false},
      {"kv_cache", false},
      {"mixed_load", false},
      {"serving",
       {{"concurrency", {1}}, {"prompts_per_concurrency", 1}, {"input_len", 8}, {"output_len", 4}}},
      {"shapes", false},
  });
  const fs::path out = dir_ / "out";
  const auto r = run_tern({"bench", "suite", "--config", config.string(), "--out", out.string(),
                           "--device", "vulkan", "--commit", "test"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out / "results.json");
  const bench::SuiteResults results = bench::results_from_json(json::parse(in));
  EXPECT_EQ(results.device, "vulkan");
  EXPECT_NE(results.bandwidth_source.find("by a copy on the device"), std::string::npos)
      << results.bandwidth_source;
  ASSERT_EQ(results.rows.size(), 2u);  // q4_0, and serving at concurrency 1
  for (const bench::SuiteRow& row : results.rows) {
    EXPECT_TRUE(
        row.metrics.at(row.section == "weights" ? "decode_tokens_per_s" : "output_tokens_per_s")
            .is_number())
        << row.name;
    for (const std::string& command : row.commands) {
      const bool runs_the_model = command.find("tern plan") == 0 ||
                                  command.find("tern bench-model") == 0 ||
                                  command.find("tern serve") == 0;
      EXPECT_EQ(command.find("--device vulkan") != std::string::npos, runs_the_model) << command;
    }
  }
  std::ifstream page(out / "results.md");
  const std::string md((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("tern's models on `--device vulkan`"), std::string::npos);
}

TEST_F(BenchSuiteCli, ErrorsNameTheProblem) {
  const fs::path config = write_config({{"weights", {{"typse", {"q4_0"}}}}});
  auto r = run_tern({"bench", "suite", "--config", config.string(), "--out", dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find(config.string() + ": config.weights: unknown key 'typse' (did you mean 'types'?)"),
      std::string::npos)
      << r.err;

  r = run_tern({"bench", "suite", "--config", write_config(json::object()).string(), "--out",
                dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the suite needs a model: --model or the config's \"model\""),
            std::string::npos)
      << r.err;

  r = run_tern(
      {"bench", "suite", "--model", (dir_ / "absent.gguf").string(), "--out", dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("absent.gguf: no such model file"), std::string::npos) << r.err;

  r = run_tern({"bench", "suite", "--model", "x.gguf", "--llama-cpp", dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(": no llama-bench there (give the build's bin folder)"), std::string::npos)
      << r.err;

  std::ofstream(dir_ / "bad.json") << "{\"date\": 1}";
  r = run_tern(
      {"bench", "suite", "--render", (dir_ / "bad.json").string(), "--out", (dir_ / "o").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("results: 'date' has the wrong type"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
