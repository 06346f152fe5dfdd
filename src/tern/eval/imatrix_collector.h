// Computing an importance matrix (llama-imatrix's method): the calibration tokens cut into
// windows of `ctx` tokens, each window's first token replaced by BOS where the model uses one,
// each window one forward from position 0, and every matrix input of every token summed
// squared (the model's ActivationObserver).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "tern/models/language_model.h"
#include "tern/quant/importance_matrix.h"

namespace tern {

struct ImatrixOptions {
  int64_t ctx = 512;
  int64_t max_chunks = -1;      // -1: every whole window of the text
  std::optional<int32_t> bos;   // replaces each window's first token when set
  bool process_output = false;  // also output.weight (llama-imatrix --process-output)
  bool keep_outer = false;      // also each input's Σ x xᵀ, for GPTQ (ImportanceMatrix)
  // After each window: windows done, windows in all.
  std::function<void(int64_t, int64_t)> on_chunk;
};

// Throws tern::Error when the tokens make no whole window (ctx < 2 or fewer than ctx tokens).
ImportanceMatrix compute_importance_matrix(LanguageModel& decoder, std::span<const int32_t> tokens,
                                           const ImatrixOptions& options);

}  // namespace tern
