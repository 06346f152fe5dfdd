// The weights of a llama / qwen2 / qwen3 decoder and of their mixtures of experts, as views:
// matrices stay in their file's element type and block layout (GGUF and safetensors mmapped, never
// copied); only small vectors stored as F16/BF16 (norms, biases) are widened to f32 once at load. A
// backend is made for them, so they sit below backend/; models/weight_loader.h makes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "tern/quant/quant_recipe.h"
#include "tern/weights/weight_matrix.h"

namespace tern {

class MappedFile;

// How q and k pair their elements for RoPE. llama.cpp's converter permutes the q/k rows of
// llama models so that adjacent elements (2i, 2i+1) pair up (llama.cpp "NORM", Meta's
// original layout); Hugging Face checkpoints and qwen GGUFs pair element i with i + d/2
// ("NEOX", transformers' rotate_half).
enum class RopeLayout { Interleaved, Neox };
std::string_view rope_layout_name(RopeLayout layout);

// Qwen2-MoE's shared expert: a SwiGLU every token runs beside its chosen experts, its output
// scaled by sigmoid(x · gate_weight) (ffn_*_shexp and ffn_gate_inp_shexp in GGUF,
// mlp.shared_expert.* and mlp.shared_expert_gate in Hugging Face's checkpoints).
struct SharedExpert {
  WeightMatrix gate, up;               // [shared_ff, hidden]
  WeightMatrix down;                   // [hidden, shared_ff]
  std::span<const float> gate_weight;  // [hidden]
};

// A sparse layer's MLP (ModelConfig::num_experts): the router and each expert's SwiGLU. An
// expert's matrices are views into the file's stacked tensors (GGUF's ffn_*_exps, [n_experts,
// rows, cols]) or its own tensors (Hugging Face's mlp.experts.N.*).
struct MixtureOfExperts {
  WeightMatrix router;                 // [n_experts, hidden]: ffn_gate_inp, mlp.gate
  std::vector<WeightMatrix> gate, up;  // per expert [moe_ff, hidden]
  std::vector<WeightMatrix> down;      // per expert [hidden, moe_ff]
  int64_t top_k = 0;                   // experts chosen per token
  bool normalize_top_k = false;        // the chosen weights renormalised to sum 1
  std::optional<SharedExpert> shared;  // qwen2moe's
  // gpt-oss's (ModelConfig::expert_bias), else empty: the router's bias [n_experts] and the
  // experts' biases stacked, expert e's at [e · rows, (e + 1) · rows): gate and up [n_experts ·
  // moe_ff], down [n_experts · hidden].
  std::span<const float> router_bias, gate_bias, up_bias, down_bias;
  // ModelConfig::swiglu_limit: 0 for silu(gate) · up, else gpt-oss's clamped activation.
  float swiglu_limit = 0;

  int64_t num_experts() const { return static_cast<int64_t>(gate.size()); }
};

// The experts' matrices `parts` as one [n · rows, cols] matrix when they lie back to back in
// memory, as a GGUF file's stacked tensor does (and what make_dummy_weights and
// quantize_weights make); nullopt when they do not, or differ in type or shape.
std::optional<WeightMatrix> stacked_experts(std::span<const WeightMatrix> parts);
// The experts' matrices as one [n · rows, cols] matrix: stacked_experts' view when they lie back
// to back, else their bytes copied back to back into `storage` (which must outlive the view).
WeightMatrix gather_experts(std::span<const WeightMatrix> parts, std::vector<std::byte>& storage);
// `n` experts' views into `stacked`, [n · rows, cols]: expert e's rows are e·rows … (e+1)·rows-1.
std::vector<WeightMatrix> split_experts(const WeightMatrix& stacked, int64_t n);

struct LayerWeights {
  std::span<const float> attn_norm;   // [hidden]
  WeightMatrix wq;                    // [q_dim, hidden]
  WeightMatrix wk;                    // [kv_dim, hidden]
  WeightMatrix wv;                    // [kv_dim, hidden]
  WeightMatrix wo;                    // [hidden, q_dim]
  std::span<const float> bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim]; empty without attention_bias
  std::span<const float> bo;          // [hidden]; empty without attention_out_bias
  std::span<const float> q_norm, k_norm;  // [head_dim] each; qwen3 (qk_norm) only
  std::span<const float> attn_sinks;      // [num_heads]: gpt-oss's softmax sinks, or empty
  std::span<const float> ffn_norm;        // [hidden]
  // Gemma 3's norms of the attention's and the MLP's outputs before the residual adds them
  // ([hidden] each; empty without ModelConfig::post_norms).
  std::span<const float> attn_post_norm, ffn_post_norm;
  WeightMatrix w_gate;                          // [ffn, hidden]
  WeightMatrix w_up;                            // [ffn, hidden]
  WeightMatrix w_down;                          // [hidden, ffn]
  std::span<const float> b_gate, b_up, b_down;  // empty without mlp_bias
  // q, k and v stacked ([q_dim + 2 kv_dim, hidden]), and gate and up ([2 ffn, hidden]), where
  // pack_for_kernels could lay their packed copies back to back: one matmul where there were
  // three (two), as vLLM's QKVParallelLinear and MergedColumnParallelLinear. Only `packed` is
  // set (the parts' own `packed` point into it); empty() otherwise.
  WeightMatrix wqkv_packed, w_gate_up_packed;
  // A sparse layer's experts, in place of w_gate, w_up and w_down (which are then empty).
  std::optional<MixtureOfExperts> moe;

  // fn(m) for every matrix of the layer: attention, then the MLP's (dense, or router, experts
  // and shared expert). Not the stacked `*_packed` views, which alias their parts.
  template <typename Fn>
  void for_each_matrix(Fn&& fn) const {
    for (const WeightMatrix* m : {&wq, &wk, &wv, &wo}) fn(*m);
    if (!moe) {
      for (const WeightMatrix* m : {&w_gate, &w_up, &w_down}) fn(*m);
      return;
    }
    fn(moe->router);
    for (size_t e = 0; e < moe->gate.size(); ++e)
      for (const WeightMatrix* m : {&moe->gate[e], &moe->up[e], &moe->down[e]}) fn(*m);
    if (const std::optional<SharedExpert>& s = moe->shared)
      for (const WeightMatrix* m : {&s->gate, &s->up, &s->down}) fn(*m);
  }
  template <typename Fn>
  void for_each_matrix(Fn&& fn) {
    std::as_const(*this).for_each_matrix(
        [&](const WeightMatrix& m) { fn(const_cast<WeightMatrix&>(m)); });
  }
};

class ModelWeights {
 public:
  WeightMatrix token_embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::span<const float> output_norm;  // [hidden]
  WeightMatrix lm_head;                // [vocab, hidden]; the embedding itself when tied
  bool tied_embeddings = false;
  RopeLayout rope_layout = RopeLayout::Neox;
  // GGUF llama3-scaled models: per-frequency divisors from `rope_freqs.weight` [head_dim / 2],
  // used instead of the config's scaling. Empty otherwise.
  std::span<const float> rope_freq_factors;
  // What the matrices were made as, for `general.file_type` when they are saved: the recipe's
  // (dummy, requantized) or the file's (GGUF). Unset: save_gguf names it after the matrices.
  std::optional<FileType> file_type;

  // The f32 embedding row of `token` into out [hidden] (dequantized when the table is
  // quantized). No checks: the caller has validated the id.
  void embed(int32_t token, float* out) const;

  // Storage the views point into; moving a ModelWeights keeps every pointer valid.
  std::span<float> own_floats(size_t n);
  std::span<std::byte> own_bytes(size_t n);  // 64-byte aligned
  void keep_alive(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }
  // keep_alive for a file the views point into, remembered so that pages nothing reads any
  // more can leave the resident memory (drop_file_pages).
  void keep_mapping(std::shared_ptr<const MappedFile> file);
  // The bytes of `m` in a kept file stop counting as resident (MappedFile::drop_resident).
  void drop_file_pages(const WeightMatrix& m) const;

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  std::vector<std::unique_ptr<std::byte[], AlignedFree>> owned_;
  std::vector<std::shared_ptr<const void>> owners_;
  std::vector<std::shared_ptr<const MappedFile>> mappings_;
};

}  // namespace tern
