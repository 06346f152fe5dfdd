// A request's constraint on its output, as the request gave it: SamplingParams carries it and
// structured_outputs.h compiles it, so it lives here, below both.
#pragma once

#include <cstdint>
#include <string>

namespace tern {

// A constraint on the output's text: what the request asked for, compiled by the engine (cached
// by kind and text).
struct StructuredOutputSpec {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kNone;
  std::string text;   // kJsonSchema: the schema's JSON; kRegex; kGrammar: GBNF; kChoice: a JSON
                      // list of strings; kJsonObject: empty
  std::string field;  // the request field it came from ("response_format"), for messages
  // A reasoning model's think tags (a chat request on a server with --reasoning-parser): the
  // constraint waits until reasoning has ended, as vLLM's structured outputs do. Reasoning has
  // ended in the prompt when its last think tag is the end tag; otherwise the constraint starts
  // after the model writes think_end_token. -1: no reasoning, constrained from the first token.
  int32_t think_start_token = -1;
  int32_t think_end_token = -1;
  bool enabled() const { return kind != Kind::kNone; }
};

}  // namespace tern
