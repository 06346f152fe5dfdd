// `tern generate --prompts IN.jsonl --output OUT.jsonl`: a file of requests as one batch, the
// results in input order, per-line sampling fields, and errors that name the line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "run_process.h"
#include "tern/engine/llm.h"

namespace tern {
namespace {

using nlohmann::json;
using testing::fixture;
using testing::run_tern;

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(GeneratePrompts, RunsAFileAsOneBatchInInputOrder) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::TempDir dir("prompts");
  const std::string in = dir.file("in.jsonl"), out = dir.file("out.jsonl");
  {
    std::ofstream f(in);
    f << R"({"prompt": "Once upon a time", "max_tokens": 30})" << '\n'
      << R"({"prompt_token_ids": [1, 403, 407], "max_tokens": 5, "ignore_eos": true})" << '\n'
      << '\n'  // blank lines are skipped
      << R"({"prompt": "Lily", "max_tokens": 12, "temperature": 0.9, "seed": 7, "n": 2})" << '\n'
      << R"({"prompt": "Once upon a time", "stop": [" girl"], "max_tokens": 40, "logprobs": 2})"
      << '\n';
  }
  const auto r = run_tern({"generate", "--model", fixture("stories260K/stories260K.gguf"),
                           "--prompts", in, "--output", out, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("4/4 requests"), std::string::npos) << r.err;  // the progress bar's end
  const auto lines = read_lines(out);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    for (const char* key : {"prompt_token_ids", "token_ids", "text", "finish_reason"})
      EXPECT_TRUE(lines[i].contains(key)) << key;
  }
  EXPECT_EQ(lines[1]["prompt_token_ids"], json::array({1, 403, 407}));
  EXPECT_EQ(lines[1]["token_ids"].size(), 5u);
  EXPECT_EQ(lines[1]["finish_reason"], "length");
  EXPECT_EQ(lines[2]["outputs"].size(), 2u);
  EXPECT_EQ(lines[3]["finish_reason"], "stop");
  EXPECT_EQ(lines[3]["stop_reason"], " girl");
  EXPECT_EQ(lines[3]["logprobs"].size(), lines[3]["token_ids"].size());

  // The same requests through the C++ API give the same results.
  LLM llm(testing::stories260k(), testing::small_engine());
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 30;
  const auto api = llm.generate(std::vector<std::string>{"Once upon a time"}, p);
  EXPECT_EQ(lines[0]["token_ids"], json(api[0].outputs[0].token_ids));
  EXPECT_EQ(lines[0]["text"], api[0].outputs[0].text);
}

TEST(GeneratePrompts, ABadLineIsNamedAndNothingRuns) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::TempDir dir("prompts-bad");
  const std::string out = dir.file("out.jsonl");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "a"})"
       "\n"
       R"({"prompt": "b", "max_tokens": "ten"})",
       ":2: 'max_tokens' must be an integer"},
      {R"({"prompt": "a"})"
       "\n{not json",
       ":2: the request body is not valid JSON"},
      {R"({"max_tokens": 3})", ":1: 'prompt' is required"},
      // An integer past what the field takes is "out of range", not "not an integer".
      {R"({"prompt": "a", "max_tokens": 18446744073709551616})",
       ":1: 'max_tokens' is out of range"},
      {R"({"prompt": "a", "max_tokens": 9223372036854775808})", ":1: 'max_tokens' is out of range"},
      {R"({"prompt": "a", "stop_token_ids": [1, 5000]})",
       ":1: token id 5000 in 'stop_token_ids' is outside the vocabulary"},
      {R"({"prompt": "a", "top_p": 0})", ":1: top_p must be in (0, 1]"},
      {R"([1, 2])", ":1: the request body must be a JSON object"},
      {R"({"prompt_token_ids": [1, 99999]})",
       ":1: token id 99999 in 'prompt' is outside the vocabulary"},
      // What the server refuses, the file refuses (it silently ran these before).
      {R"({"prompt": "a", "max_token": 8})",
       ":1: unknown field 'max_token' for /v1/completions (did you mean 'max_tokens'?)"},
      {R"({"prompt": "a", "temprature": 0.5})", ":1: unknown field 'temprature'"},
      {R"({"prompt": "a", "logit_bias": {"5": 10}})", ":1: tern does not support 'logit_bias'"},
      {R"({"prompt": "a", "max_tokens": 100000})",
       ":1: This model's maximum context length is 2048 tokens (the model's). However, you "
       "requested 100002"},
      {R"({"prompt": "a", "stream": true})", ":1: 'stream' is for the server"},
      {R"({"prompt": "a", "prompt_token_ids": [1]})", ":1: give 'prompt' or 'prompt_token_ids'"},
      {R"({"prompt": ["a", "b"]})", ":1: one prompt per line"},
  };
  for (const auto& [text, message] : cases) {
    const std::string in = dir.file("in.jsonl");
    std::ofstream(in) << text << '\n';
    // A cache for 4 sequences, not the default 256: the limits checked are per sequence.
    const auto r = run_tern({"generate", "--model", fixture("stories260K/stories260K.gguf"),
                             "--prompts", in, "--output", out, "--max-num-seqs", "4"});
    EXPECT_EQ(r.exit_code, 1) << text;
    EXPECT_NE(r.err.find(message), std::string::npos) << text << "\n" << r.err;
  }
}

}  // namespace
}  // namespace tern
