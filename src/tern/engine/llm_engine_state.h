// The engine's per-request state (what LLMEngine's private Request and Completion hold), shared
// by the files that implement LLMEngine. Internal to src/tern/engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tern/engine/llm_engine.h"
#include "tern/engine/output_text.h"

namespace tern {

// `id` is one of `ids` (EOS and stop-token lists: a few entries).
inline bool contains_token(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

struct LLMEngine::Completion {
  Sequence seq;
  Request* request = nullptr;
  int32_t index = 0;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<CompletionText> text;
  std::vector<SampledToken> logprobs;
  double cumulative_logprob = 0.0;
  std::optional<std::string> finish_reason;
  std::variant<std::monostate, int32_t, std::string> stop_reason;
  SpecSequenceState spec;
};

struct LLMEngine::Request {
  std::string id;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<std::unique_ptr<Completion>> completions;  // one until the prompt is prefilled
  bool forked = false;
  int32_t num_finished = 0;
  RequestMetrics metrics;
  disagg::KvTransferParams kv;
  std::optional<disagg::RemoteBlocks> held_kv;  // a prefill for a decode instance: its lease

  bool finished() const {
    return num_finished == static_cast<int32_t>(completions.size()) && (forked || params.n == 1);
  }
};

}  // namespace tern
