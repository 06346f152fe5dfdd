// What a request asks of generation, field by field with the OpenAI / vLLM names and meanings,
// so the server maps a request body onto it one to one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/structured/structured_output_spec.h"

namespace tern {

struct SamplingParams {
  int32_t n = 1;  // completions per prompt; they share the prompt's KV blocks

  // Logits processing, in vLLM's order: penalties, then temperature, min_p, top_k, top_p.
  float presence_penalty = 0.0f;    // [-2, 2]: minus this once for every token already output
  float frequency_penalty = 0.0f;   // [-2, 2]: minus this times the token's output count
  float repetition_penalty = 1.0f;  // > 0: logits of tokens in prompt or output divided (>0) or
                                    // multiplied (<0) by it; 1 = off
  float temperature = 1.0f;         // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;               // (0, 1]: smallest set whose probability reaches p
  int32_t top_k = 0;                // keep the k most likely; 0 or -1: all
  float min_p = 0.0f;               // [0, 1]: drop tokens below min_p × the top probability
  std::optional<uint64_t> seed;     // per-request RNG; none: the engine's own seed sequence

  // Ending.
  int32_t max_tokens = 16;              // >= 1: generated tokens at most
  int32_t min_tokens = 0;               // EOS and stop_token_ids are impossible before this many
  std::vector<std::string> stop;        // stop strings, matched in the detokenized output
  std::vector<int32_t> stop_token_ids;  // stop on these ids too (kept in token_ids)
  bool ignore_eos = false;              // do not stop at the tokenizer's EOS ids
  bool include_stop_str_in_output = false;

  // Output.
  std::optional<int32_t> logprobs;  // none: no logprobs; k >= 0: the sampled token's logprob and
                                    // the k most likely (vLLM: of the raw model logits)
  bool skip_special_tokens = true;  // in the detokenized text

  // Constrained decoding: the output is a sentence of this grammar (masked logits).
  StructuredOutputSpec structured;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws tern::Error naming the first field out of its range (as a 400 message would).
  void validate() const;
};

}  // namespace tern
