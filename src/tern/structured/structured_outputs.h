// Constrained decoding as the engine and the server see it: request fields → a spec, a spec →
// a grammar, and per engine a compile cache over the tokenizer's vocabulary.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tern/core/error.h"
#include "tern/structured/structured_output_spec.h"
#include "tern/structured/token_mask.h"

namespace tern {
class Tokenizer;
}

namespace tern::structured {

// A request field's constraint is wrong: the server answers 400 with param = field().
class ConstraintFieldError : public Error {
 public:
  ConstraintFieldError(std::string field, const std::string& message)
      : Error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Reads the constraint fields of a chat or completions body: response_format ({"type": "text"
// | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}}), vLLM's
// guided_json, guided_regex, guided_choice, guided_grammar and structured_outputs {json, regex,
// choice, grammar, json_object}, llama.cpp's grammar and json_schema. More than one, a wrong
// shape, or a constraint that does not compile: ConstraintFieldError naming the field.
StructuredOutputSpec structured_output_from_request(const nlohmann::json& body);

// The grammar a spec stands for. Throws tern::Error.
Grammar grammar_of(const StructuredOutputSpec& spec);

// The compiled constraints of one engine (one tokenizer): the vocabulary trie, built on the
// first constrained request, and the last kCacheSize constraints by their kind and text.
class StructuredOutputs {
 public:
  static constexpr size_t kCacheSize = 64;

  // eos_ids: the tokens that end a sequence (allowed where the grammar accepts).
  StructuredOutputs(const Tokenizer& tokenizer, std::vector<int32_t> eos_ids);

  // Throws tern::Error when the spec does not compile.
  std::shared_ptr<CompiledConstraint> compile(const StructuredOutputSpec& spec);
  // A sequence's state for `spec` after `prompt`: waiting for the end of reasoning when the
  // spec's think_end_token is set and the prompt has not ended reasoning.
  std::unique_ptr<ConstraintState> start(const StructuredOutputSpec& spec, size_t max_tokens,
                                         std::span<const int32_t> prompt);
  std::shared_ptr<const TokenTrie> trie();

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
  std::mutex mutex_;
  std::shared_ptr<const TokenTrie> trie_;
  // Most recent first.
  std::list<std::pair<std::string, std::shared_ptr<CompiledConstraint>>> cache_;
};

// The token byte strings a trie needs from a tokenizer: special tokens empty.
std::vector<std::string> grammar_token_bytes(const Tokenizer& tokenizer);

}  // namespace tern::structured
