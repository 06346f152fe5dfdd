// LLM: add every prompt, step until all have finished, gather the final outputs.
#include "tern/engine/llm.h"

#include <algorithm>
#include <unordered_map>

#include "tern/core/error.h"
#include "tern/spec_decode/speculator.h"

namespace tern {

LLM::LLM(const LoadOptions& load, const EngineConfig& config)
    : LLM(load_model(load), config,
          config.speculative.method == SpeculativeMethod::kDraftModel
              ? std::optional<LoadedModel>(load_draft_model(load, config.speculative))
              : std::nullopt) {}

LLM::LLM(LoadedModel model, const EngineConfig& config, std::optional<LoadedModel> draft)
    : model_(std::move(model)), draft_(std::move(draft)) {
  if (!model_.tokenizer) throw Error("the model has no tokenizer; give one with --tokenizer");
  decoder_ = make_language_model(model_);
  const bool drafting = config.speculative.method == SpeculativeMethod::kDraftModel;
  if (drafting && !draft_) throw Error("speculative decoding: the draft model was not loaded");
  if (drafting && !draft_->tokenizer)
    throw Error("the draft model " + config.speculative.model + " has no tokenizer");
  if (drafting) draft_decoder_ = make_language_model(*draft_);
  engine_ = std::make_unique<LLMEngine>(*decoder_, *model_.tokenizer, config, draft_decoder_.get(),
                                        drafting ? &*draft_->tokenizer : nullptr);
}

LLM::~LLM() = default;

std::vector<RequestOutput> LLM::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const std::vector<SamplingParams>& params,
                                         const Progress& progress) {
  if (params.size() != 1 && params.size() != prompts.size())
    throw Error("generate: " + std::to_string(params.size()) + " sampling parameters for " +
                std::to_string(prompts.size()) + " prompts");
  std::vector<std::string> ids(prompts.size());
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids[i] = "offline-" + std::to_string(next_id_++);
    index_of[ids[i]] = i;
    try {
      engine_->add_request(ids[i], prompts[i], params.size() == 1 ? params[0] : params[i]);
    } catch (const Error& e) {
      for (size_t j = 0; j < i; ++j) engine_->abort_request(ids[j]);
      engine_->step();  // collects the aborts
      throw Error("prompt " + std::to_string(i) + ": " + e.what());
    }
  }
  std::vector<RequestOutput> results(prompts.size());
  int64_t done = 0;
  while (engine_->has_unfinished_requests()) {
    for (RequestOutput& out : engine_->step()) {
      RequestOutput& result = results[index_of.at(out.request_id)];
      result.request_id = out.request_id;
      result.metrics = out.metrics;
      for (CompletionOutput& c : out.outputs)
        if (c.finished()) result.outputs.push_back(std::move(c));
      if (out.finished) {
        result.finished = true;
        std::sort(result.outputs.begin(), result.outputs.end(),
                  [](const auto& a, const auto& b) { return a.index < b.index; });
        ++done;
      }
    }
    if (progress) progress(done, static_cast<int64_t>(prompts.size()));
  }
  return results;
}

std::vector<RequestOutput> LLM::generate(const std::vector<std::string>& prompts,
                                         const SamplingParams& params, const Progress& progress) {
  std::vector<std::vector<int32_t>> tokens;
  tokens.reserve(prompts.size());
  for (const std::string& p : prompts) tokens.push_back(tokenizer().encode(p));
  return generate(tokens, {params}, progress);
}

}  // namespace tern
