// make_plan end to end on the fixture configs: the totals, the "does not fit" advice (each
// suggestion fits and the next step past it does not), the decode ceilings by hand, and the
// device table.
#include "tern/plan/plan.h"

#include <gtest/gtest.h>

#include "plan/plan_test_util.h"
#include "tern/core/error.h"
#include "tern/plan/decode_ceiling.h"
#include "tern/plan/known_devices.h"
#include "tern/plan/plan_report.h"

namespace tern::plan {
namespace {

using testing::fixture_plan_model;

constexpr uint64_t kGiB = uint64_t{1} << 30;

PlanOptions options(const char* dtype, uint64_t memory, int64_t len, int64_t seqs) {
  PlanOptions o;
  o.recipe = parse_weight_recipe(dtype);
  o.device_memory = memory;
  o.device_memory_source = "test";
  o.max_model_len = len;
  o.max_num_seqs = seqs;
  o.bandwidth = 936e9;
  o.bandwidth_source = "test";
  return o;
}

const Suggestion* find_suggestion(const Plan& p, const std::string& flag) {
  for (const Suggestion& s : p.suggestions)
    if (s.flags.size() == 1 && s.flags[0].first == flag) return &s;
  return nullptr;
}

PlanOptions with(PlanOptions o, const Suggestion& s) {
  for (const auto& [flag, value] : s.flags) {
    if (flag == "--weight-type") o.recipe = parse_weight_recipe(value);
    if (flag == "--kv-cache-dtype") o.kv_cache_dtype = parse_kv_cache_dtype(value);
    if (flag == "--max-model-len") o.max_model_len = std::stoll(value);
    if (flag == "--max-num-seqs") o.max_num_seqs = std::stoll(value);
  }
  return o;
}

TEST(Plan, Qwen3_8bAtF16AndQ4_0On936GBps) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const PlanModel m = fixture_plan_model("qwen3-8b");
  // Read per token (weights/weight_plan_test): F16 15,137,427,456 bytes, Q4_0 4,258,287,616.
  const Plan f16 = make_plan(m, options("f16", 24 * kGiB, 4096, 1));
  EXPECT_EQ(f16.ceiling.weight_bytes, 15'137'427'456ull);
  EXPECT_NEAR(f16.ceiling.tokens_per_s(0), 936e9 / 15'137'427'456.0, 1e-9);  // 61.8
  EXPECT_NEAR(f16.ceiling.tokens_per_s(0), 61.83, 0.01);
  // At 4096 tokens of context each token also reads 4096 · 147,456 bytes of KV (f16).
  EXPECT_NEAR(f16.ceiling.tokens_per_s(4096), 936e9 / (15'137'427'456.0 + 4096.0 * 147456), 1e-9);
  const Plan q4 = make_plan(m, options("q4_0", 24 * kGiB, 4096, 1));
  EXPECT_NEAR(q4.ceiling.tokens_per_s(0), 936e9 / 4'258'287'616.0, 1e-9);  // 219.8
  EXPECT_NEAR(q4.ceiling.tokens_per_s(0), 219.81, 0.01);
  // Two sequences share a step's weight reads.
  EXPECT_NEAR(q4.ceiling.tokens_per_s(4096, 2), 2 * 936e9 / (4'258'287'616.0 + 2 * 4096.0 * 147456),
              1e-9);

  // The total: weights + 256 blocks of f16 KV (+ padding) + the working memory.
  EXPECT_EQ(f16.memory.weights, 16'382'087'168ull);
  EXPECT_EQ(f16.memory.kv_cache, 256ull * 16 * 147456 + 2 * 36 * 64);
  EXPECT_EQ(f16.memory.working, f16.working.total());
  EXPECT_EQ(f16.memory.repacked, 0u);
  EXPECT_EQ(f16.memory.total(), f16.memory.weights + f16.memory.kv_cache + f16.memory.working);
  EXPECT_TRUE(f16.fits);  // 15.26 GiB + 0.56 GiB + working in 24 GiB
  EXPECT_TRUE(f16.suggestions.empty());
  ASSERT_EQ(f16.kv.size(), 5u);
  EXPECT_EQ(f16.chosen_kv.dtype, KvDtype::F16);
  // The RTX 3090 row: 24 GiB, 936 GB/s; the M2 Max's 400 GB/s.
  ASSERT_EQ(f16.devices.size(), 6u);
  EXPECT_EQ(f16.devices[0].name, "RTX 3090");
  EXPECT_TRUE(f16.devices[0].fits);
  EXPECT_NEAR(f16.devices[0].tokens_per_s, 61.83, 0.01);
  EXPECT_EQ(f16.devices[5].name, "Apple M2 Max");
  EXPECT_NEAR(f16.devices[5].tokens_per_s, 400e9 / 15'137'427'456.0, 1e-9);
}

TEST(Plan, WhenItDoesNotFitEachSuggestionFitsAndTheNextStepDoesNot) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const PlanModel m = fixture_plan_model("qwen3-8b");
  // F16 Qwen3-8B, one sequence of 40960 tokens (5.63 GiB of f16 KV) in 16 GiB: the weights
  // alone are 15.26 GiB.
  const PlanOptions o = options("f16", 16 * kGiB, 40960, 1);
  const Plan p = make_plan(m, o);
  EXPECT_FALSE(p.fits);
  // Q8_0 (8.16 GiB) leaves room for the whole context; fp8 KV (2.86 GiB) does not.
  const Suggestion* dtype = find_suggestion(p, "--weight-type");
  ASSERT_NE(dtype, nullptr);
  EXPECT_EQ(dtype->flags[0].second, "q8_0");
  EXPECT_EQ(find_suggestion(p, "--kv-cache-dtype"), nullptr);
  EXPECT_EQ(find_suggestion(p, "--max-num-seqs"), nullptr);  // one already
  // The longest context that fits, in whole blocks: what is left after weights and working
  // memory, over 16 tokens' KV, less the padding.
  const Suggestion* len = find_suggestion(p, "--max-model-len");
  ASSERT_NE(len, nullptr);
  const uint64_t left = 16 * kGiB - p.memory.weights - p.memory.working - 2 * 36 * 64;
  const int64_t blocks = static_cast<int64_t>(left / (16 * 147456));
  EXPECT_EQ(len->flags[0].second, std::to_string(blocks * 16));
  for (const Suggestion& s : p.suggestions) {
    const Plan fixed = make_plan(m, with(o, s));
    EXPECT_TRUE(fixed.fits) << s.flags[0].first;
    EXPECT_EQ(fixed.memory.total(), s.total_bytes);
  }
  PlanOptions longer = o;
  longer.max_model_len = blocks * 16 + 16;
  EXPECT_FALSE(make_plan(m, longer).fits);
}

TEST(Plan, FewerSequencesAndAQuantizedCacheAreSuggested) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-4b"));
  const PlanModel m = fixture_plan_model("qwen3-4b");
  // Qwen3-4B Q4_K_M (about 2.3 GiB), 8 sequences of 32768 tokens at f16 (147,456 bytes a token:
  // 4.5 GiB each, 36 GiB) in 24 GiB.
  const PlanOptions o = options("q4_k_m", 24 * kGiB, 32768, 8);
  const Plan p = make_plan(m, o);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(find_suggestion(p, "--weight-type"), nullptr);  // smaller weights cannot make up 12 GiB
  const Suggestion* kv = find_suggestion(p, "--kv-cache-dtype");
  ASSERT_NE(kv, nullptr);  // 8-bit KV: 18.3 GiB
  EXPECT_EQ(kv->flags[0].second, "fp8");
  const Suggestion* seqs = find_suggestion(p, "--max-num-seqs");
  ASSERT_NE(seqs, nullptr);
  const int64_t n = std::stoll(seqs->flags[0].second);
  EXPECT_TRUE(make_plan(m, with(o, *seqs)).fits);
  PlanOptions more = o;
  more.max_num_seqs = n + 1;
  EXPECT_FALSE(make_plan(m, more).fits);
  EXPECT_EQ(n, 4);  // 5 × 4.5 GiB = 22.5 GiB + 2.3 GiB of weights is over 24 GiB
}

TEST(Plan, NoSingleChangeFitsThenAllTogether) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const PlanModel m = fixture_plan_model("qwen3-8b");
  // 6 GiB: Q4_0 weights (4.29 GiB) leave room for 22K tokens of fp8 KV in one sequence.
  const PlanOptions o = options("f16", 6 * kGiB, 40960, 4);
  const Plan p = make_plan(m, o);
  EXPECT_FALSE(p.fits);
  ASSERT_EQ(p.suggestions.size(), 1u);
  const Suggestion& s = p.suggestions[0];
  ASSERT_EQ(s.flags.size(), 4u);
  EXPECT_EQ(s.flags[0], (std::pair<std::string, std::string>{"--weight-type", "q4_0"}));
  EXPECT_EQ(s.flags[1], (std::pair<std::string, std::string>{"--kv-cache-dtype", "fp8"}));
  EXPECT_EQ(s.flags[2], (std::pair<std::string, std::string>{"--max-num-seqs", "1"}));
  EXPECT_EQ(s.flags[3].first, "--max-model-len");
  EXPECT_TRUE(make_plan(m, with(o, s)).fits);
  // And a machine too small even for Q4_0 weights gets no advice.
  EXPECT_TRUE(make_plan(m, options("f16", 2 * kGiB, 4096, 1)).suggestions.empty());
}

TEST(Plan, TiedModelsCountTheirRepackedHeadAndSettingsAreChecked) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-0.6b"));
  const PlanModel m = fixture_plan_model("qwen3-0.6b");
  const Plan p = make_plan(m, options("q8_0", 64 * kGiB, 0, 1));
  EXPECT_EQ(p.options.max_model_len, 40960);  // the model's
  EXPECT_EQ(p.memory.repacked, p.weights.repacked_bytes(find_device("cpu")));
  PlanOptions bad = options("q8_0", 64 * kGiB, 0, 0);
  EXPECT_THROW(make_plan(m, bad), Error);
  bad = options("q8_0", 64 * kGiB, -1, 1);
  EXPECT_THROW(make_plan(m, bad), Error);
}

TEST(DecodeCeiling, BandwidthsParseWithAPerSecondUnit) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("936GB/s"), 936e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.2TB/s"), 1.2e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 GiB/s"), 400.0 * kGiB);
  EXPECT_DOUBLE_EQ(parse_bandwidth("5e9/s"), 5e9);
  for (const char* bad : {"936GB", "936", "fast/s", "/s", "", "-3GB/s", "936GB/h"})
    EXPECT_THROW(parse_bandwidth(bad), Error) << bad;
  EXPECT_EQ(format_bandwidth(936e9), "936.0 GB/s");
  EXPECT_EQ(format_bandwidth(3.35e12), "3.35 TB/s");
}

TEST(KnownDevices, TheIssuesTable) {
  const auto devices = known_devices();
  ASSERT_EQ(devices.size(), 6u);
  EXPECT_EQ(devices[0].name, "RTX 3090");
  EXPECT_DOUBLE_EQ(devices[0].bandwidth, 936e9);
  EXPECT_EQ(devices[0].memory, 24 * kGiB);
  EXPECT_DOUBLE_EQ(devices[3].bandwidth, 3350e9);    // H100 SXM
  EXPECT_EQ(devices[4].memory, 141'000'000'000ull);  // H200
  EXPECT_EQ(devices[5].name, "Apple M2 Max");
}

TEST(PlanReport, TextAndJsonCarryTheFigures) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const Plan p = make_plan(fixture_plan_model("qwen3-8b"), options("f16", 16 * kGiB, 40960, 1));
  const std::string text = format_plan(p);
  EXPECT_NE(text.find("16,380,854,272"), std::string::npos) << text;  // F16 bytes
  EXPECT_NE(text.find("does not fit"), std::string::npos);
  EXPECT_NE(text.find("--weight-type q8_0"), std::string::npos);
  EXPECT_NE(text.find("<- --kv-cache-dtype"), std::string::npos);
  const auto j = plan_json(p);
  EXPECT_EQ(j["weights"]["bytes"], 16'382'087'168ull);
  EXPECT_EQ(j["kv_cache"]["bytes_per_token"], 147456);
  EXPECT_EQ(j["memory"]["fits"], false);
  EXPECT_EQ(j["memory"]["suggestions"][0]["flags"]["--weight-type"], "q8_0");
  EXPECT_EQ(j["devices"].size(), 6u);
  EXPECT_EQ(grouped(1234567), "1,234,567");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.50 GiB");
}

// vLLM refuses a context past the model's unless told RoPE scaling is in use; so does tern.
TEST(Plan, AContextLongerThanTheModelsIsRefused) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const PlanModel m = fixture_plan_model("qwen3-8b");
  try {
    make_plan(m, options("q4_0", 24 * kGiB, 100000, 1));
    FAIL() << "a 100000-token plan of a 40960-token model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the model's context of 40960 tokens"),
              std::string::npos)
        << e.what();
  }
  ::setenv("TERN_ALLOW_LONG_MAX_MODEL_LEN", "1", 1);
  EXPECT_EQ(make_plan(m, options("q4_0", 24 * kGiB, 100000, 1)).options.max_model_len, 100000);
  ::unsetenv("TERN_ALLOW_LONG_MAX_MODEL_LEN");
}

}  // namespace
}  // namespace tern::plan
