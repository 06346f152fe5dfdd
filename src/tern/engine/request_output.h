// What the engine reports about a request after a step: per completion the new tokens and text
// of this step (what a stream sends), and at its end the whole of it (what a response holds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tern/disagg/kv_transfer_params.h"
#include "tern/sampling/sampler.h"

namespace tern {

struct CompletionOutput {
  int32_t index = 0;  // 0 … n-1

  // New this step.
  std::vector<int32_t> new_token_ids;
  std::string new_text;  // text that can no longer change (stop-string prefixes are held)
  std::vector<SampledToken> new_logprobs;  // one per new token, when logprobs were asked for

  // The whole completion; filled in the output that finishes it.
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<SampledToken> logprobs;
  double cumulative_logprob = 0.0;  // of the sampled tokens (when logprobs were asked for)

  // Set when it finished: "stop" (EOS, a stop token id or string), "length" (max_tokens or
  // max_model_len) or "abort".
  std::optional<std::string> finish_reason;
  // What stopped it, vLLM's stop_reason: a stop string, a stop token id, or nothing (EOS).
  std::variant<std::monostate, int32_t, std::string> stop_reason;

  bool finished() const { return finish_reason.has_value(); }
};

// Timestamps in seconds of the engine's steady clock, for the server's latency metrics.
struct RequestMetrics {
  double arrival_time = 0.0;
  double first_scheduled_time = -1.0;
  double first_token_time = -1.0;
  double last_token_time = -1.0;
  double finished_time = -1.0;
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens served by the prefix cache
  int64_t num_generation_tokens = 0;
  // A decode instance's pull of the prompt's KV from its prefill instance (-1: none).
  double kv_transfer_seconds = -1.0;
  uint64_t kv_transfer_bytes = 0;
};

struct RequestOutput {
  std::string request_id;
  std::vector<CompletionOutput> outputs;  // the completions with news this step
  bool finished = false;                  // every completion has finished
  RequestMetrics metrics;
  // A prefill instance's answer to do_remote_decode, in the output that finishes the request:
  // where its prompt's blocks are held for a decode instance.
  std::optional<disagg::RemoteBlocks> kv_transfer_params;
  // The request failed (finished "abort"), e.g. its KV could not be pulled: the cause, for an
  // error response rather than a normal end.
  std::optional<std::string> error;
};

}  // namespace tern
