// The benchmark datasets' shapes: lengths in range, seeds reproduce, prefixes shared, ShareGPT
// parsed and filtered as vLLM does; and the arrival schedule.
#include "tern/bench/datasets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "fixtures.h"
#include "tern/bench/arrivals.h"
#include "tern/core/error.h"

namespace tern::bench {
namespace {

constexpr const char* kTokenizer = "qwen-tokenizer";

const Tokenizer& qwen() {
  static const Tokenizer tok = Tokenizer::load(testing::fixture(kTokenizer));
  return tok;
}

TEST(BenchRandomDataset, LengthsInRangeAndTextMatchesItsCount) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  RandomDatasetOptions o;
  o.num_prompts = 24;
  o.input_len = 64;
  o.output_len = 16;
  o.range_ratio = 0.25;
  o.seed = 7;
  const auto requests = random_dataset(qwen(), o);
  ASSERT_EQ(requests.size(), 24u);
  std::map<int64_t, int> distinct_inputs;
  for (const SampleRequest& r : requests) {
    EXPECT_GE(r.prompt_len, 48);  // floor(64 · 0.75); Qwen adds no special tokens
    EXPECT_LE(r.prompt_len, 80);  // ceil(64 · 1.25)
    EXPECT_GE(r.expected_output_len, 12);
    EXPECT_LE(r.expected_output_len, 20);
    EXPECT_EQ(static_cast<int64_t>(qwen().encode(r.prompt, false).size()), r.prompt_len);
    ++distinct_inputs[r.prompt_len];
  }
  EXPECT_GT(distinct_inputs.size(), 3u) << "the lengths should vary with range ratio 0.25";
}

TEST(BenchRandomDataset, SeedsReproduceAndDiffer) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  RandomDatasetOptions o;
  o.num_prompts = 4;
  o.input_len = 32;
  o.output_len = 8;
  o.prefix_len = 5;
  const auto a = random_dataset(qwen(), o);
  const auto b = random_dataset(qwen(), o);
  o.seed = 1;
  const auto c = random_dataset(qwen(), o);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].prompt_len, 37);  // fixed length: prefix 5 + 32
    EXPECT_EQ(a[i].expected_output_len, 8);
  }
  EXPECT_NE(a[0].prompt, c[0].prompt);
}

TEST(BenchRandomDataset, RejectsBadOptions) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  RandomDatasetOptions o;
  o.num_prompts = 2;
  o.range_ratio = 1.0;
  EXPECT_THROW(random_dataset(qwen(), o), Error);
  o.range_ratio = 0;
  o.input_len = 0;
  EXPECT_THROW(random_dataset(qwen(), o), Error);
  o.input_len = 10;
  o.num_prompts = 0;
  EXPECT_THROW(random_dataset(qwen(), o), Error);
}

TEST(BenchPrefixRepetition, PromptsShareTheirPrefixes) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  PrefixRepetitionOptions o;
  o.num_prompts = 12;
  o.num_prefixes = 4;
  o.prefix_len = 32;
  o.suffix_len = 16;
  o.output_len = 5;
  const auto requests = prefix_repetition_dataset(qwen(), o);
  ASSERT_EQ(requests.size(), 12u);
  // 32 random tokens decode to well over 24 bytes, so the first 24 bytes are the prefix's.
  std::map<std::string, int> groups;
  std::map<std::string, int> whole;
  for (const SampleRequest& r : requests) {
    EXPECT_EQ(r.prompt_len, 48);
    EXPECT_EQ(r.expected_output_len, 5);
    ++groups[r.prompt.substr(0, 24)];
    ++whole[r.prompt];
  }
  EXPECT_EQ(groups.size(), 4u);
  for (const auto& [prefix, count] : groups) EXPECT_EQ(count, 3) << prefix;
  EXPECT_EQ(whole.size(), 12u) << "suffixes differ";
  o.num_prompts = 3;  // fewer prompts than prefixes
  EXPECT_THROW(prefix_repetition_dataset(qwen(), o), Error);
}

// Six conversations: one with a single turn (dropped), one whose prompt is under 4 tokens
// (dropped), one whose reply is under 4 tokens (dropped unless the output length is given), and
// three good ones.
const char* kShareGpt = R"([
  {"id": "one-turn", "conversations": [{"from": "human", "value": "Only a question without any answer here."}]},
  {"id": "short-prompt", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello, how can I help you today, my friend?"}]},
  {"id": "short-reply", "conversations": [{"from": "human", "value": "Say yes or no, nothing else please."}, {"from": "gpt", "value": "Yes"}]},
  {"id": "a", "conversations": [{"from": "human", "value": "What is the capital city of France?"}, {"from": "gpt", "value": "The capital city of France is Paris."}]},
  {"id": "b", "conversations": [{"from": "human", "value": "Write one sentence about the sea."}, {"from": "gpt", "value": "The sea is wide, deep and always moving."}, {"from": "human", "value": "More"}]},
  {"id": "c", "conversations": [{"from": "human", "value": "Count from one to five in words."}, {"from": "gpt", "value": "One, two, three, four, five."}]},
  {"no-conversations": true}
])";

TEST(BenchShareGpt, FirstTurnIsThePromptAndTheReplySetsTheLength) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  ShareGptOptions o;
  o.num_prompts = 3;
  const auto requests = sharegpt_dataset_from_text(qwen(), kShareGpt, "test.json", o);
  ASSERT_EQ(requests.size(), 3u);
  std::map<std::string, int64_t> outputs;
  for (const SampleRequest& r : requests) {
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>(qwen().encode(r.prompt).size()));
    outputs[r.prompt] = r.expected_output_len;
  }
  ASSERT_EQ(outputs.count("What is the capital city of France?"), 1u);
  EXPECT_EQ(outputs["What is the capital city of France?"],
            static_cast<int64_t>(qwen().encode("The capital city of France is Paris.").size()));
  EXPECT_EQ(outputs.count("Write one sentence about the sea."), 1u);
  EXPECT_EQ(outputs.count("Count from one to five in words."), 1u);
}

TEST(BenchShareGpt, OutputLenOverridesAndKeepsShortReplies) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  ShareGptOptions o;
  o.num_prompts = 4;
  o.output_len = 9;
  const auto requests = sharegpt_dataset_from_text(qwen(), kShareGpt, "test.json", o);
  ASSERT_EQ(requests.size(), 4u);
  bool has_short_reply = false;
  for (const SampleRequest& r : requests) {
    EXPECT_EQ(r.expected_output_len, 9);
    has_short_reply |= r.prompt == "Say yes or no, nothing else please.";
  }
  EXPECT_TRUE(has_short_reply);
}

TEST(BenchShareGpt, OversamplesAndReproduces) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  ShareGptOptions o;
  o.num_prompts = 10;  // only 3 pass the filters: repeated up to 10
  o.seed = 3;
  const auto a = sharegpt_dataset_from_text(qwen(), kShareGpt, "test.json", o);
  const auto b = sharegpt_dataset_from_text(qwen(), kShareGpt, "test.json", o);
  ASSERT_EQ(a.size(), 10u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
}

TEST(BenchShareGpt, BadFilesAreClearErrors) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  ShareGptOptions o;
  o.num_prompts = 2;
  EXPECT_THROW(sharegpt_dataset_from_text(qwen(), "[{", "bad.json", o), Error);
  EXPECT_THROW(sharegpt_dataset_from_text(qwen(), "{\"a\":1}", "obj.json", o), Error);
  EXPECT_THROW(sharegpt_dataset_from_text(qwen(), "[]", "empty.json", o), Error);
  EXPECT_THROW(sharegpt_dataset_from_text(
                   qwen(), R"([{"conversations":[{"value":1},{"value":"x"}]}])", "types.json", o),
               Error);
  o.path = "/nonexistent/sharegpt.json";
  EXPECT_THROW(sharegpt_dataset(qwen(), o), Error);
}

TEST(BenchArrivals, InfiniteRateSendsAllAtOnce) {
  for (double t : arrival_times(5, INFINITY, 1.0, 0)) EXPECT_EQ(t, 0);
}

TEST(BenchArrivals, PoissonScheduleEndsAtCountOverRate) {
  const auto a = arrival_times(100, 10.0, 1.0, 42);
  ASSERT_EQ(a.size(), 100u);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  EXPECT_NEAR(a.back(), 10.0, 1e-9);
  EXPECT_EQ(a, arrival_times(100, 10.0, 1.0, 42));
  EXPECT_NE(a, arrival_times(100, 10.0, 1.0, 43));
  const auto even = arrival_times(4, 2.0, INFINITY, 0);  // evenly spaced
  EXPECT_NEAR(even[0], 0.5, 1e-12);
  EXPECT_NEAR(even[3], 2.0, 1e-12);
  EXPECT_THROW(arrival_times(3, 0.0, 1.0, 0), Error);
  EXPECT_THROW(arrival_times(3, 1.0, 0.0, 0), Error);
}

}  // namespace
}  // namespace tern::bench
