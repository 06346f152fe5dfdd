// The token mask against a brute force (each token's bytes through the automaton from the
// text so far), the end ids, and the sampler's use of it.
#include "tern/structured/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "shared_tokenizer.h"
#include "tern/sampling/sampler.h"
#include "tern/structured/gbnf.h"
#include "tern/structured/json_schema.h"
#include "tern/structured/structured_outputs.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::structured {
namespace {

// Short strings over a JSON-ish alphabet, some multi-byte and some byte fragments of UTF-8.
std::vector<std::string> synthetic_vocab() {
  std::vector<std::string> v = {"", "<eos>"};  // 0: never allowed (a special), 1: the end
  const std::string alphabet = "{}[]\":, ab1-.e\\u";
  for (char a : alphabet) v.push_back(std::string(1, a));
  for (char a : alphabet)
    for (char b : alphabet) v.push_back(std::string{a, b});
  for (const char* s : {"\"a\"", "true", "tru", "null", "\xc3", "\xa9", "\xc3\xa9", "\":", "\"}",
                        "  ", "\n", "{\"", "1}", "ee", "\"ab\": "})
    v.push_back(s);
  v.push_back("\":");  // a duplicate: both ids allowed together
  return v;
}

TEST(StructuredTokenMask, EqualsBruteForceOnRandomWalks) {
  const std::vector<std::string> vocab = synthetic_vocab();
  std::vector<std::string> bytes = vocab;
  bytes[1].clear();  // the end id has no bytes
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{1});
  const nlohmann::json schema = nlohmann::json::parse(R"({"type": "object", "properties": {
      "a": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
      "b": {"type": "string", "maxLength": 3}}, "required": ["a"]})");
  auto compiled = std::make_shared<CompiledConstraint>(flatten(compile_json_schema(schema)), trie);
  Automaton reference(flatten(compile_json_schema(schema)));
  std::mt19937 rng(3);
  std::vector<uint64_t> mask(compiled->mask_words());
  int checked_states = 0, finished = 0;
  for (int walk = 0; walk < 40; ++walk) {
    std::string text;
    int32_t state = compiled->start();
    for (int step = 0; step < 40; ++step) {
      compiled->fill_mask(state, mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
        const bool bit = (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
        bool want = false;
        if (id == 1)
          want = reference.matches(text);
        else if (!bytes[static_cast<size_t>(id)].empty())
          want = reference.accepts_prefix(text + bytes[static_cast<size_t>(id)]);
        ASSERT_EQ(bit, want) << "after '" << text << "', token '" << vocab[static_cast<size_t>(id)]
                             << "'";
        if (bit) allowed.push_back(id);
      }
      ++checked_states;
      ASSERT_FALSE(allowed.empty()) << text;
      const int32_t token = allowed[rng() % allowed.size()];
      if (token == 1) {
        ++finished;
        break;
      }
      text += bytes[static_cast<size_t>(token)];
      state = compiled->advance(state, token);
      ASSERT_GE(state, 0);
    }
  }
  EXPECT_GT(checked_states, 200);
  // The cached masks answer the same: a second pass over the start state.
  std::vector<uint64_t> again(compiled->mask_words());
  compiled->fill_mask(compiled->start(), again);
  compiled->fill_mask(compiled->start(), mask);
  EXPECT_EQ(again, mask);
  EXPECT_EQ(compiled->advance(compiled->start(), 0), Automaton::kDead);
  EXPECT_EQ(compiled->advance(compiled->start(), 99999), Automaton::kDead);
}

TEST(StructuredTokenMask, SamplerMasksAndRollsBack) {
  const std::vector<std::string> bytes = {"", "a", "b", "ab", "c"};
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{0});
  auto compiled =
      std::make_shared<CompiledConstraint>(flatten(parse_gbnf(R"(root ::= "ab" "c"?)")), trie);
  SamplingParams p;
  p.temperature = 1.0f;
  Sampler sampler(p, 1, {}, {});
  sampler.set_constraint(std::make_unique<ConstraintState>(compiled, 16));
  // The model prefers "c" and "b" by far; only "a" and "ab" are possible first.
  const std::vector<float> logits = {0.0f, -5.0f, 9.0f, -5.0f, 9.0f};
  std::vector<float> probs(5);
  sampler.probabilities(logits, probs);
  EXPECT_EQ(probs[2], 0.0f);
  EXPECT_EQ(probs[4], 0.0f);
  EXPECT_EQ(probs[0], 0.0f);  // the end: not yet
  EXPECT_NEAR(probs[1] + probs[3], 1.0f, 1e-6);
  EXPECT_EQ(sampler.greedy_token(logits), 1);  // ties: the lower id
  sampler.record(3);                           // "ab"
  sampler.probabilities(logits, probs);
  EXPECT_GT(probs[4], 0.99f);  // "c" or the end
  EXPECT_GT(probs[0], 0.0f);
  EXPECT_FALSE(sampler.constraint_finished());
  sampler.record(4);
  EXPECT_TRUE(sampler.constraint_finished());
  sampler.forget(4);
  sampler.forget(3);
  sampler.probabilities(logits, probs);
  EXPECT_EQ(probs[4], 0.0f);
  for (int i = 0; i < 50; ++i) {
    const SampledToken t = sampler.sample(logits);
    ASSERT_TRUE(t.token == 1 || t.token == 3) << t.token;
    sampler.forget(t.token);
  }
}

// A reasoning model's constraint sleeps until the end of thinking (token 5 here), then
// applies; taking the end token back puts it to sleep again.
TEST(StructuredTokenMask, WaitsForTheEndOfReasoning) {
  const std::vector<std::string> bytes = {"", "a", "b", "ab", "c", ""};
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{0});
  auto compiled =
      std::make_shared<CompiledConstraint>(flatten(parse_gbnf(R"(root ::= "ab" "c"?)")), trie);
  ConstraintState state(compiled, 16, /*wait_for=*/5);
  const std::vector<float> logits = {0.0f, -5.0f, 9.0f, -5.0f, 9.0f, 1.0f};
  std::vector<float> row = logits;
  state.apply(row);
  EXPECT_EQ(row, logits);  // asleep: nothing masked, the end allowed
  EXPECT_EQ(state.state(), ConstraintState::kWaiting);
  for (int32_t thought : {2, 4, 0, 2}) state.advance(thought);  // any text while thinking
  EXPECT_FALSE(state.finished());
  EXPECT_FALSE(state.accepting());
  state.advance(5);  // </think>
  EXPECT_EQ(state.state(), compiled->start());
  row = logits;
  state.apply(row);
  EXPECT_TRUE(std::isinf(row[2]) && std::isinf(row[4]) && std::isinf(row[5]) && std::isinf(row[0]));
  EXPECT_EQ(row[1], -5.0f);
  state.advance(3);
  state.advance(4);
  EXPECT_TRUE(state.finished());
  EXPECT_TRUE(state.finished_after(7));
  EXPECT_FALSE(state.finished_after(4));  // still thinking then
  for (int i = 0; i < 3; ++i) state.rollback();
  EXPECT_EQ(state.state(), ConstraintState::kWaiting);
  row = logits;
  state.apply(row);
  EXPECT_EQ(row, logits);
}

// Where reasoning has ended decides where a constraint starts: the prompt's last think tag.
TEST(StructuredTokenMask, ThePromptsLastThinkTagDecidesWhereTheConstraintStarts) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  const std::vector<int32_t> open = tok.encode("<think>", false, true),
                             close = tok.encode("</think>", false, true);
  ASSERT_EQ(open.size(), 1u);
  ASSERT_EQ(close.size(), 1u);
  StructuredOutputs so(tok, tok.eos_ids());
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonObject, "", "response_format"};
  const std::vector<int32_t> words = tok.encode("hello there", false);
  auto starts_awake = [&](const std::vector<int32_t>& prompt) {
    return so.start(spec, 8, prompt)->state() != ConstraintState::kWaiting;
  };
  EXPECT_TRUE(starts_awake(words));  // no reasoning parser: from the first token
  spec.think_start_token = open[0];
  spec.think_end_token = close[0];
  EXPECT_FALSE(starts_awake(words));  // the model thinks first
  EXPECT_TRUE(
      starts_awake({words[0], open[0], words[1], close[0], words[0]}));  // enable_thinking false
  EXPECT_FALSE(starts_awake({close[0], words[1], open[0]}));  // a template that opened <think>
}

TEST(StructuredTokenMask, QwenVocabularyTrie) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  StructuredOutputs so(tok, tok.eos_ids());
  auto trie = so.trie();
  EXPECT_EQ(trie->vocab_size(), tok.vocab_size());
  EXPECT_GT(trie->num_nodes(), 150000u);
  auto compiled = so.compile({StructuredOutputSpec::Kind::kJsonObject, "", "response_format"});
  EXPECT_EQ(compiled, so.compile({StructuredOutputSpec::Kind::kJsonObject, "", "x"}));  // cached
  std::vector<uint64_t> mask(compiled->mask_words());
  compiled->fill_mask(compiled->start(), mask);
  // At the start: one space at most, then "{".
  size_t allowed = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1)) continue;
    ++allowed;
    const std::string& b = tok.token_bytes(id);
    ASSERT_FALSE(tok.is_special(id));
    const size_t first = b.find_first_not_of(" \t\n");
    ASSERT_TRUE(first == std::string::npos || b[first] == '{') << b;
  }
  EXPECT_GT(allowed, 2u);  // "{", " {", "{\"" and the like
  const std::vector<int32_t> ids = tok.encode("{\"a\": [1, \"x\"]}", false);
  int32_t s = compiled->start();
  for (int32_t id : ids) s = compiled->advance(s, id);
  EXPECT_TRUE(compiled->finished(s));
  compiled->fill_mask(s, mask);
  for (int32_t id : tok.eos_ids())
    EXPECT_TRUE((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1);
}

}  // namespace
}  // namespace tern::structured
