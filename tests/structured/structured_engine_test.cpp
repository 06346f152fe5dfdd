// Constrained decoding through the engine: at temperature 1 over many seeds every output parses
// and satisfies its schema (by the tests' own validator; or regex, choice, grammar), on
// stories260K and on a Qwen3 shape with random weights and the real Qwen vocabulary, where only
// the mask keeps the text in the grammar; free requests batched with constrained ones are
// unchanged; speculation keeps it.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "engine/engine_test_util.h"
#include "schema_validator.h"
#include "shared_tokenizer.h"
#include "spec_decode/spec_test_util.h"
#include "tern/structured/automaton.h"
#include "tern/structured/gbnf.h"
#include "tern/structured/json_schema.h"
#include "tern/structured/structured_outputs.h"

namespace tern::testing {
namespace {

using nlohmann::json;
using Kind = StructuredOutputSpec::Kind;

// Bounded everywhere, so that even random weights finish within max_tokens.
const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer"},
    "role": {"enum": ["admin", "user", null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
    "address": {"$ref": "#/$defs/address"},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "address"],
  "additionalProperties": false,
  "$defs": {"address": {"type": "object", "properties": {
    "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    "score": {"type": ["number", "null"]}}, "required": ["zip"]}}
})";

// The keywords beyond types and properties (issue 31): numeric bounds across digit counts and
// on both sides of zero, tuples, formats, lengths and patterned keys; bounded likewise.
const char* kBoundsSchema = R"({
  "type": "object",
  "properties": {
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "delta": {"type": "integer", "exclusiveMinimum": -15, "maximum": 20},
    "big": {"type": "integer", "minimum": 7, "maximum": 1234},
    "low": {"type": "integer", "maximum": -5},
    "score": {"type": "number", "minimum": 1.1, "exclusiveMaximum": 3},
    "temp": {"type": "number", "exclusiveMinimum": -0.5, "maximum": 0.25},
    "point": {"type": "array", "prefixItems": [{"type": "number", "minimum": -90, "maximum": 90},
              {"type": "number", "minimum": -180, "maximum": 180}], "minItems": 2},
    "contact": {"type": "array", "items": [{"type": "string", "format": "email"}],
                "additionalItems": {"type": "integer", "minimum": 1, "maximum": 9}, "maxItems": 3},
    "born": {"type": "string", "format": "date"},
    "code": {"type": "string", "minLength": 2, "maxLength": 4},
    "labels": {"type": "object", "patternProperties": {"^x-[a-z]{1,3}$": {"type": "integer", "minimum": 0, "maximum": 9}}}
  },
  "required": ["age", "delta", "big", "low", "score", "temp", "point", "contact", "born", "code", "labels"],
  "additionalProperties": false
})";

// kBoundsSchema, without its patterned keys where the model is trained on text: stories260K
// follows a value with a comma far more often than with a '}', and an object of patterned keys
// has no bound on its members (maxProperties is refused).
json bounds_schema(bool patterned_keys) {
  json s = json::parse(kBoundsSchema);
  if (!patterned_keys) {
    s["properties"].erase("labels");
    json& required = s["required"];
    required.erase(std::find(required.begin(), required.end(), json("labels")));
  }
  return s;
}

SamplingParams constrained(Kind kind, const std::string& text, uint64_t seed, int max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.structured = {kind, text, "test"};
  return p;
}

// Runs `seeds` requests of the spec and checks every output against `check`.
template <typename Check>
void run_seeds(LLM& llm, const std::vector<int32_t>& prompt, Kind kind, const std::string& text,
               int seeds, int max_tokens, Check check) {
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(seeds), prompt);
  std::vector<SamplingParams> params;
  for (int s = 0; s < seeds; ++s)
    params.push_back(constrained(kind, text, 1000 + static_cast<uint64_t>(s), max_tokens));
  const std::vector<RequestOutput> out = llm.generate(prompts, params);
  ASSERT_EQ(out.size(), prompts.size());
  for (int s = 0; s < seeds; ++s) {
    const CompletionOutput& o = out[static_cast<size_t>(s)].outputs[0];
    EXPECT_EQ(o.finish_reason, "stop") << "seed " << s << ": " << o.text;
    check(o.text, s);
  }
}

void check_schema_outputs(LLM& llm, const std::vector<int32_t>& prompt, int seeds, int max_tokens,
                          const json& schema = json::parse(kPersonSchema)) {
  run_seeds(llm, prompt, Kind::kJsonSchema, schema.dump(), seeds, max_tokens,
            [&](const std::string& text, int s) {
              json v;
              try {
                v = json::parse(text);
              } catch (const json::exception& e) {
                ADD_FAILURE() << "seed " << s << " does not parse: " << text << " (" << e.what()
                              << ")";
                return;
              }
              EXPECT_EQ(schema_violation(v, schema, schema), "") << "seed " << s << ": " << text;
            });
}

TEST(StructuredEngine, SchemaOutputsValidateOnStories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(stories260k(), small_engine(256));
  const std::vector<int32_t> prompt = llm.tokenizer().encode("Once upon a time");
  check_schema_outputs(llm, prompt, 24, 400);
  // json_object: any object. Its strings are unbounded and stories260K writes stories into
  // them, so a completion may hit max_tokens: then it must be a prefix of an object.
  structured::Automaton object(structured::flatten(structured::json_object_grammar()));
  std::vector<std::vector<int32_t>> prompts(12, prompt);
  std::vector<SamplingParams> params;
  for (int s = 0; s < 12; ++s)
    params.push_back(constrained(Kind::kJsonObject, "", 50 + static_cast<uint64_t>(s), 120));
  for (const RequestOutput& r : llm.generate(prompts, params)) {
    const CompletionOutput& o = r.outputs[0];
    if (o.finish_reason == "stop") {
      EXPECT_TRUE(json::accept(o.text) && json::parse(o.text).is_object()) << o.text;
    } else {
      EXPECT_TRUE(object.accepts_prefix(o.text)) << o.text;
      EXPECT_FALSE(json::accept(o.text)) << o.text;
    }
  }
}

TEST(StructuredEngine, BoundsTuplesFormatsAndPatternedKeysValidateOnStories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(stories260k(), small_engine(256));
  check_schema_outputs(llm, llm.tokenizer().encode("Once upon a time"), 16, 500,
                       bounds_schema(false));
}

TEST(StructuredEngine, RegexChoiceAndGrammarOnStories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(stories260k(), small_engine(256));
  const std::vector<int32_t> prompt = llm.tokenizer().encode("Once upon a time");
  const std::string pattern = R"([A-Z][a-z]{1,6} (is|was) [0-9]{1,3}\.)";
  run_seeds(llm, prompt, Kind::kRegex, pattern, 12, 64, [&](const std::string& text, int s) {
    EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << "seed " << s << ": " << text;
  });
  run_seeds(llm, prompt, Kind::kChoice, R"(["happy", "sad", "a big dog"])", 12, 16,
            [](const std::string& text, int s) {
              EXPECT_TRUE(text == "happy" || text == "sad" || text == "a big dog")
                  << s << ": " << text;
            });
  const std::string list = "root ::= item{1,3}\nitem ::= \"- \" [a-z ]{1,10} \"\\n\"";
  structured::Automaton reference(structured::flatten(structured::parse_gbnf(list)));
  run_seeds(llm, prompt, Kind::kGrammar, list, 12, 64, [&](const std::string& text, int s) {
    EXPECT_TRUE(reference.matches(text)) << "seed " << s << ": " << text;
  });
}

// Qwen3-0.6B's vocabulary and tokenizer with a tiny random body: the distribution is noise over
// 151,936 tokens, so every token of the output is the mask's doing.
LoadedModel random_qwen3_full_vocab() {
  LoadedModel m;
  m.device = &find_device("cpu");
  m.config = shrunk_config("model-configs/qwen3-0.6b", {{"num_hidden_layers", 1},
                                                        {"hidden_size", 64},
                                                        {"intermediate_size", 128},
                                                        {"num_attention_heads", 2},
                                                        {"num_key_value_heads", 1},
                                                        {"head_dim", 32}});
  m.weights = make_dummy_weights(m.config, DType::Q8_0, 5);
  m.tokenizer = testing::shared_tokenizer("qwen-tokenizer");
  m.description = "random qwen3 body, full vocabulary";
  return m;
}

TEST(StructuredEngine, SchemaOutputsValidateOnRandomQwen3WithTheRealVocabulary) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  LLM llm(random_qwen3_full_vocab(), small_engine(256));
  ASSERT_EQ(llm.model().config.vocab_size, 151936);
  const std::vector<int32_t> prompt = llm.tokenizer().encode("Give me a person as JSON:", false);
  check_schema_outputs(llm, prompt, 16, 400);
  check_schema_outputs(llm, prompt, 12, 500, bounds_schema(true));
  const std::string pattern = R"(\d{4}-\d{2}-\d{2}|none)";
  run_seeds(llm, prompt, Kind::kRegex, pattern, 8, 32, [&](const std::string& text, int s) {
    EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << "seed " << s << ": " << text;
  });
}

TEST(StructuredEngine, FreeRequestsInAMixedBatchAreUnchanged) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::vector<std::vector<int32_t>> prompts = random_prompts(6, 12, 512, 9);
  std::vector<SamplingParams> free;
  for (int i = 0; i < 6; ++i) {
    SamplingParams p = i % 2 ? greedy(24) : SamplingParams{};
    if (i % 2 == 0) {
      p.temperature = 0.9f;
      p.seed = static_cast<uint64_t>(i);
      p.max_tokens = 24;
      p.ignore_eos = true;
      p.logprobs = 2;
    }
    free.push_back(p);
  }
  LLM llm(stories260k(), small_engine(64));
  const std::vector<RequestOutput> alone = llm.generate(prompts, free);
  // The same free requests interleaved with constrained ones.
  std::vector<std::vector<int32_t>> mixed_prompts;
  std::vector<SamplingParams> mixed;
  for (size_t i = 0; i < prompts.size(); ++i) {
    mixed_prompts.push_back(prompts[i]);
    mixed.push_back(free[i]);
    mixed_prompts.push_back(prompts[i]);
    mixed.push_back(constrained(Kind::kJsonSchema, json::parse(kPersonSchema).dump(), i, 300));
  }
  const std::vector<RequestOutput> out = llm.generate(mixed_prompts, mixed);
  std::vector<RequestOutput> free_out;
  for (size_t i = 0; i < out.size(); i += 2) free_out.push_back(out[i]);
  expect_same_outputs(alone, free_out, "free requests beside constrained ones");
  for (size_t i = 1; i < out.size(); i += 2)
    EXPECT_TRUE(json::accept(out[i].outputs[0].text)) << out[i].outputs[0].text;
}

TEST(StructuredEngine, SpeculativeDecodingKeepsOutputsValid) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const json schema = json::parse(kPersonSchema);
  for (const SpeculativeMethod method :
       {SpeculativeMethod::kNgram, SpeculativeMethod::kDraftModel}) {
    EngineConfig config = speculative_engine(method, 4, false, 256);
    std::optional<LoadedModel> draft;
    if (method == SpeculativeMethod::kDraftModel) draft = noisy_stories260k(0.3);
    LLM llm(stories260k(), config, std::move(draft));
    const std::vector<int32_t> prompt = llm.tokenizer().encode("Once upon a time");
    for (const bool sampled : {false, true}) {
      std::vector<std::vector<int32_t>> prompts(8, prompt);
      std::vector<SamplingParams> params;
      for (int s = 0; s < 8; ++s) {
        SamplingParams p =
            constrained(Kind::kJsonSchema, schema.dump(), static_cast<uint64_t>(s), 400);
        if (!sampled) p.temperature = 0.0f;
        params.push_back(p);
      }
      const std::vector<RequestOutput> out = llm.generate(prompts, params);
      for (const RequestOutput& r : out) {
        const std::string& text = r.outputs[0].text;
        json v;
        ASSERT_NO_THROW(v = json::parse(text))
            << text << " (" << r.outputs[0].finish_reason.value_or("-") << ", "
            << r.outputs[0].token_ids.size() << " tokens, sampled " << sampled << ")";
        EXPECT_EQ(schema_violation(v, schema, schema), "") << text;
      }
    }
    EXPECT_GT(llm.engine().stats().spec.num_draft_tokens, 0) << "nothing was drafted";
  }
}

}  // namespace
}  // namespace tern::testing
