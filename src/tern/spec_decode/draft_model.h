// Loading a draft model for speculative decoding, and the check that it speaks the target's
// vocabulary.
#pragma once

#include <cstdint>

#include "tern/models/model_loader.h"
#include "tern/spec_decode/speculative_config.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// Loads the draft that `spec` names (spec.model a local path: a GGUF, a folder, or a config for
// dummy weights) the way the target was loaded, with the draft's own dtype and load format
// ("" keeps the target's). Its tokenizer is its own; a draft without one (dummy weights from a
// config) takes the target's --tokenizer. Throws tern::Error as load_model does.
LoadedModel load_draft_model(const LoadOptions& target, const SpeculativeConfig& spec);

// A draft must speak the target's vocabulary: the same token string at every id of the
// tokenizers, and model rows (embedding, lm_head) that differ at most in padding past them.
// Throws tern::Error naming the first id that differs.
void check_draft_vocabulary(const Tokenizer& target, int64_t target_rows, const Tokenizer& draft,
                            int64_t draft_rows);

}  // namespace tern
