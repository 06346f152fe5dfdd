// `tern generate` speculates with either proposer through the built binary: the greedy output
// is plain decoding's, the acceptance is reported in --json and on stderr, and a bad speculative
// config is a one-line error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fixtures.h"
#include "run_process.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

nlohmann::json last_json(const std::string& out) {
  const size_t end = out.find_last_not_of('\n');
  const size_t start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1));
}

TEST(SpeculativeCli, GenerateSpeculatesWithEitherProposer) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const std::vector<std::string> base = {"generate",         "--model", model, "--prompt",
                                         "Once upon a time", "-n",      "48",  "--json",
                                         "--threads",        "2"};
  const auto plain = run_tern(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::json want = last_json(plain.out);

  std::vector<std::string> draft = base;
  for (const char* a : {"--speculative-model", model.c_str(), "--num-speculative-tokens", "4"})
    draft.push_back(a);
  std::vector<std::string> ngram = base;
  for (
      const char* a :
      {"--speculative-config",
       R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":2,"prompt_lookup_min":1,"adaptive":false})"})
    ngram.push_back(a);
  std::vector<std::string> quantized = base;
  const std::string config =
      R"({"model":")" + model +
      R"(","num_speculative_tokens":4,"weight_type":"q8_0","adaptive":false})";
  for (const char* a : {"--speculative-config", config.c_str()}) quantized.push_back(a);
  // The short form is adaptive, and stories260K drafting for itself costs as much as the
  // target, so it may well never draft; the fixed-K forms draft every step.
  for (const auto& [args, min_drafts] :
       {std::pair{draft, 0}, std::pair{ngram, 1}, std::pair{quantized, 1}}) {
    const auto r = run_tern(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json got = last_json(r.out);
    EXPECT_EQ(got["token_ids"], want["token_ids"]) << r.err;
    ASSERT_TRUE(got.contains("speculative")) << r.out;
    EXPECT_GE(got["speculative"]["num_drafts"].get<int>(), min_drafts);
    EXPECT_NE(r.err.find("speculative decoding: acceptance rate"), std::string::npos) << r.err;
  }
  const auto q = run_tern(quantized);
  EXPECT_NE(q.err.find("draft: "), std::string::npos) << q.err;  // the draft's description
  EXPECT_GT(last_json(q.out)["speculative"]["acceptance_rate"].get<double>(), 0.5);
}

TEST(SpeculativeCli, TheTargetAsItsOwnDraftIsAWarningAndItsIdlenessExplained) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const auto r =
      run_tern({"generate", "--model", model, "--prompt", "Once upon a time", "-n", "24", "--json",
                "--speculative-model", model, "--num-speculative-tokens", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: the draft model has the target's own weights"), std::string::npos)
      << r.err;
  // Whether the measured costs let a probe through is the host's timing; when nothing was
  // drafted, the summary says why in the policy's terms.
  if (last_json(r.out)["speculative"]["num_drafts"].get<int>() == 0) {
    EXPECT_NE(r.err.find("no drafts: adaptive drafting found no plan faster than plain decoding"),
              std::string::npos)
        << r.err;
  }
  // A draft of other weights is no warning.
  const auto q =
      run_tern({"generate", "--model", model, "--prompt", "Once", "-n", "4", "--speculative-config",
                R"({"model":")" + model + R"(","num_speculative_tokens":2,"weight_type":"q8_0"})"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.err.find("warning:"), std::string::npos) << q.err;
}

// generate's start-up says what it does before it does it, and how long that took: the draft's
// load, and the forwards timed for the adaptive draft length (the draft's only with a draft).
TEST(SpeculativeCli, GenerateSaysItLoadsAndTimesTheDraft) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const auto r = run_tern({"generate", "--model", model, "--prompt", "Once", "-n", "4",
                           "--speculative-model", model, "--num-speculative-tokens", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t draft = r.err.find("loading draft " + model);
  ASSERT_NE(draft, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("loaded in", draft), std::string::npos) << r.err;
  const size_t timing = r.err.find(
      "timing the target's and the draft's forwards of 1 to 5, 10, 20 and 40 tokens, to choose "
      "how many tokens to draft\n");
  ASSERT_NE(timing, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("timed in", timing), std::string::npos) << r.err;

  const auto ngram =
      run_tern({"generate", "--model", model, "--prompt", "Once", "-n", "4", "--speculative-config",
                R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":2})"});
  ASSERT_EQ(ngram.exit_code, 0) << ngram.err;
  EXPECT_NE(ngram.err.find("timing the target's forwards of 1 to 4, 8, 16 and 32 tokens"),
            std::string::npos)
      << ngram.err;
}

TEST(SpeculativeCli, BadSpeculativeFlagsAreOneLineErrors) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--speculative-config", R"({"method":"eagle","model":"x","num_speculative_tokens":2})"},
       "eagle"},
      {{"--speculative-config", R"({"method":"ngram","num_speculative_tokens":2,"tree":1})"},
       "'tree'"},
      {{"--num-speculative-tokens", "3"}, "--speculative-model"},
      {{"--speculative-model", model}, "needs --num-speculative-tokens N"},
      {{"--speculative-model", model, "--num-speculative-tokens", "0"},
       "needs --num-speculative-tokens N"},
      {{"--speculative-config", R"({"model":")" + model + R"("})"},
       "'num_speculative_tokens' is missing"},
      {{"--speculative-config", R"({"method":"ngram","num_speculative_tokens":0})"},
       "'num_speculative_tokens' must be >= 1, got 0"},
      {{"--speculative-model", model, "--speculative-config",
        R"({"method":"ngram","num_speculative_tokens":2})"},
       "not both"},
      {{"--speculative-model", "/nonexistent/draft.gguf", "--num-speculative-tokens", "2"},
       "/nonexistent/draft.gguf"},
      {{"--speculative-model", fixture("llama-2-tiny-random/llama-2-tiny-random.gguf"),
        "--num-speculative-tokens", "2"},
       "vocabulary differs"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = {"generate", "--model", model, "--prompt", "x", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    // The error is one line, the last (after "loading …", the start-up's progress line).
    const size_t error_line = r.err.rfind("tern: ");
    ASSERT_NE(error_line, std::string::npos) << r.err;
    EXPECT_TRUE(error_line == 0 || r.err[error_line - 1] == '\n') << r.err;
    EXPECT_EQ(r.err.find('\n', error_line), r.err.size() - 1) << "one line: " << r.err;
  }
}

}  // namespace
}  // namespace tern
