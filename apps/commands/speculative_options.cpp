#include "commands/speculative_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/hub/resolve_model.h"
#include "tern/spec_decode/draft_model.h"

namespace tern::cli {

void SpeculativeOptions::add_to(CLI::App* cmd) {
  cmd->add_option(
      "--speculative-config", config_json,
      "Speculative decoding as vLLM's JSON: {\"method\": \"draft_model\", \"model\": D, "
      "\"num_speculative_tokens\": 4} or {\"method\": \"ngram\", "
      "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}; tern adds the draft's "
      "\"dtype\" (as --dtype), \"weight_type\" (as --weight-type) and \"load_format\", and "
      "\"adaptive\" (default true)");
  cmd->add_option("--speculative-model", model,
                  "Draft model (short form of --speculative-config; [ngram]: prompt lookup)");
  cmd->add_option("--num-speculative-tokens", num_speculative_tokens,
                  "Draft tokens per step at most (with --speculative-model)");
  cmd->add_option("--ngram-prompt-lookup-max", prompt_lookup_max,
                  "Longest n-gram looked up (with --speculative-model [ngram])");
  cmd->add_option("--ngram-prompt-lookup-min", prompt_lookup_min,
                  "Shortest n-gram looked up (with --speculative-model [ngram])");
}

SpeculativeConfig SpeculativeOptions::config() const {
  const bool short_form = !model.empty() || num_speculative_tokens != 0 || prompt_lookup_max != 0 ||
                          prompt_lookup_min != 0;
  if (!config_json.empty()) {
    if (short_form)
      throw Error(
          "give --speculative-config or --speculative-model / --num-speculative-tokens, "
          "not both");
    return parse_speculative_config(config_json);
  }
  SpeculativeConfig c;
  c.model = model;
  c.num_speculative_tokens = num_speculative_tokens;
  c.prompt_lookup_max = prompt_lookup_max;
  c.prompt_lookup_min = prompt_lookup_min;
  if ((prompt_lookup_max || prompt_lookup_min) && model != "[ngram]" && model != "ngram")
    throw Error("--ngram-prompt-lookup-max/-min go with --speculative-model [ngram]");
  // Named here by its flag: finalize's message names the JSON key.
  if (!model.empty() && num_speculative_tokens < 1)
    throw Error("--speculative-model " + model +
                " needs --num-speculative-tokens N, the most draft tokens a step verifies "
                "(N >= 1, e.g. 4)");
  finalize_speculative_config(c);
  return c;
}

std::optional<LoadedModel> load_draft(const SpeculativeConfig& spec, const LoadOptions& target) {
  if (spec.method != SpeculativeMethod::kDraftModel) return std::nullopt;
  SpeculativeConfig resolved = spec;
  const bool dummy =
      spec.load_format.empty() ? target.format == LoadFormat::Dummy : spec.load_format == "dummy";
  resolved.model = hub::resolve_model(
      spec.model, {spec.revision, dummy ? hub::RepoFiles::NoWeights : hub::RepoFiles::All});
  // A draft model is read and packed like the target, which can take seconds too.
  return announced_load("draft ", resolved.model, dummy,
                        [&] { return load_draft_model(target, resolved); });
}

void warn_about_draft(const LLMEngine& engine) {
  if (!engine.draft_is_target()) return;
  std::fprintf(stderr,
               "warning: the draft model has the target's own weights: each draft token costs "
               "about a target forward, so drafting cannot speed decoding up (%s); give a "
               "smaller draft model of the same vocabulary\n",
               engine.config().speculative.adaptive
                   ? "adaptive drafting will mostly step aside"
                   : "with \"adaptive\": false every step drafts all the same");
}

std::string speculative_summary(const EngineStats& stats) {
  std::string out = stats.spec.summary();
  if (stats.spec.num_drafts > 0 || stats.generation_tokens == 0) return out;
  if (const std::optional<SpecIdle::Why> why = stats.spec_idle.commonest_since({}))
    out += "; no drafts: " + stats.spec_idle.describe(*why);
  return out;
}

}  // namespace tern::cli
