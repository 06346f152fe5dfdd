// What --speculative-config asks for, in vLLM's SpeculativeConfig names: the method (a draft
// model or n-gram prompt lookup), how many tokens a step may draft, and the method's settings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

enum class SpeculativeMethod { kNone, kDraftModel, kNgram };

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  // draft_model: the draft (GGUF, Hugging Face folder or name; a config for dummy weights).
  std::string model;
  int32_t num_speculative_tokens = 0;  // K at most per sequence and step
  // ngram: the longest suffix of prompt_lookup_max down to prompt_lookup_min tokens that
  // occurred before proposes what followed it. 0: not given (finalize() sets vLLM's defaults).
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // vLLM's: no drafts once this many sequences run (0: never). tern also steps aside by the
  // measured costs (adaptive).
  int32_t disable_by_batch_size = 0;
  // The draft may not draft positions at or past this (0: no limit beyond the engine's).
  int64_t max_model_len = 0;
  // Of a draft model: Hugging Face revision, compute type (--dtype's names: its float
  // matrices' type), weight type (--weight-type's names: the draft can be requantized at load)
  // and load format ("" = the target's --load-format). "auto": the target's --dtype, and for
  // weight_type the target's --weight-type.
  std::string revision = "main";
  std::string dtype = "auto";
  std::string weight_type = "auto";
  std::string load_format;
  // tern: K of each step follows the measured acceptance and the measured costs of draft and
  // verify forwards (num_speculative_tokens is the bound); false drafts K whenever it can.
  bool adaptive = true;

  bool enabled() const { return method != SpeculativeMethod::kNone; }
  // One line for logs: "draft_model D, K <= 4 (adaptive)".
  std::string describe() const;
};

// vLLM's --speculative-config JSON object. An unknown key, a key of the wrong type, or one
// that tern does not act on is a tern::Error naming it. The result is finalized.
SpeculativeConfig parse_speculative_config(std::string_view json);

// After the short flags (--speculative-model, --num-speculative-tokens) are applied: a model
// without a method means draft_model, "[ngram]" or "ngram" as the model means ngram; ngram's
// lookup defaults (vLLM's: both 5, or the one given for both). Throws tern::Error naming what
// is missing or out of range. A config without method or model stays disabled.
void finalize_speculative_config(SpeculativeConfig& config);

}  // namespace tern
