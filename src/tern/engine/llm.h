// The offline API (vLLM's LLM class): load a model once, then generate for a list of prompts
// as one batch through the engine, getting every request's final output in input order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/engine/engine_config.h"
#include "tern/engine/llm_engine.h"
#include "tern/engine/request_output.h"
#include "tern/models/language_model.h"
#include "tern/models/model_loader.h"
#include "tern/sampling/sampling_params.h"

namespace tern {

class LLM {
 public:
  // Throws tern::Error when the model or its tokenizer cannot be loaded, or the cache not fit.
  // A draft model that config.speculative names is loaded with the target's load options,
  // its own dtype, revision and load format applied (`model` must then be a local path).
  LLM(const LoadOptions& load, const EngineConfig& config);
  // A model already loaded (it must have a tokenizer); with config.speculative's draft_model
  // method, the draft too (with a tokenizer).
  LLM(LoadedModel model, const EngineConfig& config, std::optional<LoadedModel> draft = {});
  ~LLM();

  // Called after every step with (finished requests, all requests).
  using Progress = std::function<void(int64_t, int64_t)>;

  // Runs all prompts as one batch until each has finished; outputs in input order, each with
  // all its completions (by index) complete. params: one for all, or one per prompt. Throws
  // tern::Error naming the prompt's index when one is rejected (nothing runs then).
  std::vector<RequestOutput> generate(const std::vector<std::vector<int32_t>>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      const Progress& progress = {});
  // Text prompts, tokenized with the model's tokenizer (BOS as it says).
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts,
                                      const SamplingParams& params, const Progress& progress = {});

  LLMEngine& engine() { return *engine_; }
  const LLMEngine& engine() const { return *engine_; }
  const LoadedModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }

 private:
  LoadedModel model_;
  std::unique_ptr<LanguageModel> decoder_;
  std::optional<LoadedModel> draft_;
  std::unique_ptr<LanguageModel> draft_decoder_;
  std::unique_ptr<LLMEngine> engine_;
  int64_t next_id_ = 0;
};

}  // namespace tern
