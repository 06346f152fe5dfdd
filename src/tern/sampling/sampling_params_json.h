// Sampling fields of a JSON request by their OpenAI / vLLM names (what `tern generate
// --prompts` lines and the server's request bodies carry), onto SamplingParams.
#pragma once

#include <nlohmann/json.hpp>

#include "tern/sampling/sampling_params.h"

namespace tern {

// Sets every field `body` has: n, temperature, top_p, top_k, min_p, seed, max_tokens,
// min_tokens, stop (string or list), stop_token_ids, ignore_eos, presence_penalty,
// frequency_penalty, repetition_penalty, logprobs (an integer: top logprobs),
// include_stop_str_in_output, skip_special_tokens, and the constraint fields
// (structured::structured_output_from_request). A null value keeps the default, as
// OpenAI clients send them. Other fields are left to the caller. Throws tern::Error naming a
// field of the wrong type; ranges are validate()'s business.
void update_sampling_params(SamplingParams& params, const nlohmann::json& body);

}  // namespace tern
