// The sizes behind CpuBackend::reserve, and the fusion rule pack_for_kernels follows.
#include "tern/backend/cpu/cpu_working_memory.h"

#include <algorithm>

#include "tern/kernels/cpu/matmul.h"
#include "tern/kernels/cpu/thread_team.h"

namespace tern {

DecoderBufferSizes decoder_buffer_sizes(const ModelConfig& c, int64_t t, int64_t r, bool fused) {
  DecoderBufferSizes s;
  s.x = t * c.hidden_size;
  s.xn = t * c.hidden_size;
  s.q = t * c.q_dim();
  s.k = t * c.kv_dim();
  s.v = t * c.kv_dim();
  s.attn = t * c.q_dim();
  s.out = t * c.hidden_size;
  const int64_t ff = c.dense_intermediate_size();
  s.gate = t * ff;
  s.up = t * ff;
  if (fused) s.fused = t * std::max(c.q_dim() + 2 * c.kv_dim(), 2 * ff);
  s.cos_sin = t * c.head_dim * (c.rope_local_theta > 0 ? 2 : 1);  // Gemma's local table after
  s.final_rows = r * c.hidden_size;
  if (c.num_experts > 0) {
    const int64_t routes = t * c.num_experts_per_tok;
    s.router = t * c.num_experts;
    s.expert_rows = routes * c.hidden_size;
    // The shared expert's gate and up use the same buffers before the routed experts do.
    s.expert_ff =
        2 * std::max(routes * c.moe_intermediate_size, t * c.shared_expert_intermediate_size);
    s.routes = 4 * routes + 2 * c.num_experts + 1;
  }
  return s;
}

int64_t decoder_workspace_count(const ModelConfig& c) {
  return c.num_experts > 0 ? 1 + cpu::max_team_threads() : 1;
}

bool packs_back_to_back(std::span<const MatrixShape> parts) {
  if (parts.empty()) return false;
  const MatrixShape& first = parts.front();
  const int64_t group = cpu::packed_row_group(first.dtype);
  if (group == 0) return false;
  return std::all_of(parts.begin(), parts.end(), [&](const MatrixShape& m) {
    return m.dtype == first.dtype && m.cols == first.cols && m.rows % group == 0;
  });
}

uint64_t decoder_workspace_bytes(std::span<const MatrixShape> layer_matrices,
                                 const MatrixShape& lm_head, int64_t t, int64_t r) {
  size_t most = 0;
  for (const MatrixShape& m : layer_matrices)
    most = std::max(most, cpu::activation_bytes(m.dtype, t, m.cols));
  if (r > 0) most = std::max(most, cpu::activation_bytes(lm_head.dtype, r, lm_head.cols));
  // cpu::Workspace hands out whole 64-byte lines, at least one.
  return std::max<uint64_t>(64, (most + 63) / 64 * 64);
}

}  // namespace tern
