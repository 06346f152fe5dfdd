// Writing ModelWeights + ModelConfig (+ a tokenizer) as a GGUF file that llama.cpp loads:
// its architecture keys, tensor names and rope conventions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tern/formats/gguf.h"
#include "tern/formats/model_config.h"
#include "tern/models/weight_loader.h"
#include "tern/quant/quant_recipe.h"

namespace tern {

class Tokenizer;

// Neox → interleaved, per head of `head_dim` rows: row j·d/2 + i moves to 2i + j (the
// permutation llama.cpp's converter applies to llama's q_proj / k_proj).
size_t interleaved_row(size_t r, size_t head_dim);

// `general.file_type` for weights whose matrices are all `dtype` (llama_ftype: 0 all F32,
// 1 F16, 2 Q4_0, 3 Q4_1, 7 Q8_0, 8 Q5_0, 9 Q5_1, 10 Q2_K, 11 Q3_K_S, 14 Q4_K_S, 16 Q5_K_S,
// 18 Q6_K, 25 IQ4_NL, 30 IQ4_XS, 32 BF16, 38 MXFP4_MOE).
// Weights that carry a file type (ModelWeights::file_type, e.g. 15 Q4_K_M) are saved with it.
uint32_t gguf_file_type(DType dtype);

// llama 3's per-frequency RoPE divisors [head_dim / 2] as llama.cpp's converter computes them
// for `rope_freqs.weight`; `config.rope_scaling` must be llama3.
std::vector<float> llama3_rope_freq_factors(const ModelConfig& config);

// Writes `path` (a temporary renamed into place). Llama weights in the neox layout (Hugging
// Face, dummy) have their q/k rows permuted to the interleaved layout llama.cpp expects of
// llama; qwen weights are written as they are. Tied embeddings write no output.weight.
// `tokenizer` may be null (llama.cpp then refuses the file, tern loads it with --tokenizer).
// `carried_metadata` (another GGUF's keys: its tokenizer, chat template, general.* facts) is
// written first, in its order; the keys tern writes replace theirs.
void save_gguf(const std::string& path, const ModelWeights& weights, const ModelConfig& config,
               const Tokenizer* tokenizer, const std::string& model_name = "",
               const std::vector<std::pair<std::string, GgufValue>>& carried_metadata = {});

}  // namespace tern
