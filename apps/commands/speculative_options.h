// The speculative-decoding flags of `tern generate`, `tern serve` and `tern bench throughput`:
// vLLM's --speculative-config JSON and its older short form (--speculative-model,
// --num-speculative-tokens, --ngram-prompt-lookup-max/-min), and the draft's loading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tern/engine/llm_engine.h"
#include "tern/models/model_loader.h"
#include "tern/spec_decode/speculative_config.h"

namespace CLI {
class App;
}

namespace tern::cli {

struct SpeculativeOptions {
  std::string config_json;
  std::string model;
  int32_t num_speculative_tokens = 0;
  int32_t prompt_lookup_max = 0;
  int32_t prompt_lookup_min = 0;

  void add_to(CLI::App* cmd);
  // The finalized config; tern::Error for a malformed one or the long and short forms mixed.
  SpeculativeConfig config() const;
};

// The draft model `spec` names, resolved through the Hugging Face cache (downloading what it
// lacks) and loaded the way `target` was; nullopt for a method without a model.
std::optional<LoadedModel> load_draft(const SpeculativeConfig& spec, const LoadOptions& target);

// A warning line on stderr when the engine's draft model is the target itself: it drafts
// nothing (adaptive) or slows every step (fixed K), and nothing else would say so.
void warn_about_draft(const LLMEngine& engine);

// "acceptance rate … (N verifies)", and when nothing was drafted, why.
std::string speculative_summary(const EngineStats& stats);

}  // namespace tern::cli
