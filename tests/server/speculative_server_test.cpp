// tern serve with speculative decoding: concurrent greedy streams give what the engine gives
// without speculation, token for token, and /metrics counts drafts under vLLM's names.
#include <gtest/gtest.h>

#include <future>

#include "server/server_test_util.h"
#include "spec_decode/spec_test_util.h"

namespace tern::testing {
namespace {

void expect_streams_equal_plain(TestServer& s, const std::string& what) {
  LLM plain(stories260k(), small_engine(64));
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Ben",
                                            "One day, a big",   "The sun was",    "Tom had a red"};
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 40;
  p.ignore_eos = true;
  const auto reference = plain.generate(prompts, p);
  std::vector<std::future<StreamResult>> streams;
  for (const std::string& prompt : prompts)
    streams.push_back(std::async(std::launch::async, [&s, prompt] {
      return stream(s.port(), "/v1/completions",
                    {{"model", "test-model"},
                     {"prompt", prompt},
                     {"max_tokens", 40},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", true}});
    }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const StreamResult r = streams[i].get();
    ASSERT_EQ(r.status, 200) << r.error_body;
    EXPECT_EQ(streamed_texts(r, 1)[0], reference[i].outputs[0].text) << what << ", prompt " << i;
  }
  wait_until_idle(s.port());
  const std::string m = get(s.port(), "/metrics").body;
  const double drafts = metric(m, gauge("tern:spec_decode_num_drafts_total"));
  const double drafted = metric(m, gauge("tern:spec_decode_num_draft_tokens_total"));
  const double accepted = metric(m, gauge("tern:spec_decode_num_accepted_tokens_total"));
  EXPECT_GT(drafts, 0) << what;
  EXPECT_GT(accepted, 0) << what;
  EXPECT_LE(accepted, drafted) << what;
  double per_position = 0;
  for (int i = 0; i < 4; ++i)
    per_position += metric(
        m,
        "tern:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"test-model\",position=\"" +
            std::to_string(i) + "\"}");
  EXPECT_EQ(per_position, accepted) << what;
}

TEST(SpeculativeServer, DraftModelStreamsEqualPlainAndAreCounted) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), speculative_engine(SpeculativeMethod::kDraftModel, 4, false), {},
               stories260k_as(DType::Q4_0));
  expect_streams_equal_plain(s, "draft model");
}

TEST(SpeculativeServer, NgramStreamsEqualPlainAndAreCounted) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), speculative_engine(SpeculativeMethod::kNgram, 4, false));
  expect_streams_equal_plain(s, "ngram");
}

TEST(SpeculativeServer, WithoutSpeculationThereAreNoSpecDecodeMetrics) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), small_engine());
  EXPECT_EQ(get(s.port(), "/metrics").body.find("spec_decode"), std::string::npos);
}

}  // namespace
}  // namespace tern::testing
