// Shared by the speculative-decoding tests: stories260K as the target, drafts that agree with
// it more or less (itself, requantized copies, a copy with noise in its weights), and engine
// configs that speculate.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "engine/engine_test_util.h"
#include "tern/core/half.h"
#include "tern/engine/llm.h"
#include "tern/models/weight_loader.h"

namespace tern::testing {

// stories260K with its matrices requantized (F32 → Q8_0 agrees almost always, Q4_0 less).
inline LoadedModel stories260k_as(DType dtype) {
  LoadedModel m = stories260k();
  m.weights = quantize_weights(m.weights, dtype);
  m.description = "stories260K as " + std::string(dtype_name(dtype));
  return m;
}

// stories260K whose layer matrices get Gaussian noise of `noise` times their own rms: a draft
// whose distributions differ visibly from the target's.
inline LoadedModel noisy_stories260k(double noise, uint32_t seed = 7) {
  LoadedModel m = stories260k();
  m.weights = quantize_weights(m.weights, DType::F32);  // owned f32 copies
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (LayerWeights& l : m.weights.layers)
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      const size_t n = static_cast<size_t>(w->rows * w->cols);
      std::span<float> copy = m.weights.own_floats(n);
      std::memcpy(copy.data(), w->data, n * sizeof(float));
      double sum = 0.0;
      for (float v : copy) sum += static_cast<double>(v) * v;
      const double scale = noise * std::sqrt(sum / static_cast<double>(n));
      for (float& v : copy) v += static_cast<float>(scale * normal(rng));
      w->data = reinterpret_cast<const std::byte*>(copy.data());
      w->packed = nullptr;
    }
  m.description = "noisy stories260K";
  return m;
}

inline EngineConfig speculative_engine(SpeculativeMethod method, int32_t k, bool adaptive,
                                       int64_t budget = 64, bool chunked = true,
                                       bool prefix = true) {
  EngineConfig c = small_engine(budget, chunked, prefix);
  c.speculative.method = method;
  c.speculative.num_speculative_tokens = k;
  c.speculative.adaptive = adaptive;
  if (method == SpeculativeMethod::kDraftModel) c.speculative.model = "draft";
  if (method == SpeculativeMethod::kNgram) {
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 3;
  }
  return c;
}

}  // namespace tern::testing
