// What the CPU backend allocates for a decoder besides the weights and the KV cache, as a
// function of the batch: CpuBackend::reserve grows the decoder's activations and its own scratch
// to exactly these sizes, and CpuDevice::working_bytes (what `tern plan` counts as the engine's
// working memory) adds them up, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <span>

#include "tern/formats/model_config.h"
#include "tern/weights/weight_matrix.h"

namespace tern {

// Elements (f32) of each activation buffer of a forward of T tokens and R logit rows.
struct DecoderBufferSizes {
  int64_t x = 0;           // [T, hidden]: the residual stream
  int64_t xn = 0;          // [T, hidden]: normed input of a block
  int64_t q = 0;           // [T, n_heads, head_dim]
  int64_t k = 0;           // [T, n_kv_heads, head_dim]
  int64_t v = 0;           // [T, n_kv_heads, head_dim]
  int64_t attn = 0;        // [T, n_heads, head_dim]
  int64_t out = 0;         // [T, hidden]
  int64_t gate = 0;        // [T, intermediate] (0 when every layer is sparse)
  int64_t up = 0;          // [T, intermediate] (0 when every layer is sparse)
  int64_t fused = 0;       // [T, max(q_dim + 2 kv_dim, 2 intermediate)], only with fused matrices
  int64_t cos_sin = 0;     // [T, head_dim], twice with a local RoPE (ModelConfig::local_rope)
  int64_t final_rows = 0;  // [R, hidden]
  // A mixture of experts' (none for a dense model), over the step's T · k routes (a token's
  // choices) grouped by expert:
  int64_t router = 0;       // [T, n_experts]: router logits, then probabilities
  int64_t expert_rows = 0;  // [T · k, hidden]: each expert's tokens gathered, then its output
  int64_t expert_ff = 0;    // 2 × [T · k, moe_intermediate]: the experts' gate and up (or
                            // 2 × [T, shared_intermediate], the shared expert's, if larger)
  int64_t routes = 0;       // 4 × [T · k] + 2 n_experts + 1 (f32 and int32): choices, grouping

  int64_t floats() const {
    return x + xn + q + k + v + attn + out + gate + up + fused + cos_sin + final_rows + router +
           expert_rows + expert_ff + routes;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(floats()) * sizeof(float); }
};

// `fused`: some layer's q/k/v or gate/up were packed back to back (packs_back_to_back), whose
// one matmul writes a buffer of its own.
DecoderBufferSizes decoder_buffer_sizes(const ModelConfig& config, int64_t num_tokens,
                                        int64_t num_logit_rows, bool fused);

// Whether pack_for_kernels lays `parts` (q, k, v or gate, up) back to back as one matrix: the
// best ISA reads their type in a packed layout, they share type and width, and each is whole
// groups of the layout's rows.
bool packs_back_to_back(std::span<const MatrixShape> parts);

// How many matmul workspaces a decoder of `config` keeps: one, and with experts one per team
// member besides (cpu::max_team_threads(): a step runs experts side by side, each quantizing its
// own input).
int64_t decoder_workspace_count(const ModelConfig& config);

// The matmul workspace (cpu::Workspace) a forward of T tokens and R logit rows needs: the
// largest activation rows any matrix quantizes its input into (the layers' with T rows,
// lm_head's with R), for the best ISA's kernels. Throws tern::Error for a type without kernels.
uint64_t decoder_workspace_bytes(std::span<const MatrixShape> layer_matrices,
                                 const MatrixShape& lm_head, int64_t num_tokens,
                                 int64_t num_logit_rows);

}  // namespace tern
