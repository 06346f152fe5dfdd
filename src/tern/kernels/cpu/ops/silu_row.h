// One row of SiLU·up written over an F32x16 policy L (ops/lanes16.h), which each level compiles
// with its own (ops/row_ops.cpp the scalar twin, arch/*/f32x16.cpp the others). Internal
// linkage, so each level's copy keeps its own flags.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tern/kernels/cpu/ops/lanes16.h"

namespace tern::cpu {
namespace {

// out[i] = silu(gate[i]) · up[i], 16 lanes at a time with exp16 (std::exp is a scalar call per
// element: 10 µs of a 3072-wide row against ~1). The last partial vector goes through the same
// lanes, zero-padded, so an element's bits do not depend on where the row ends.
// gate, up, out: [n]
template <class L>
void silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F32x16 g = load16(gate + i);
    store16(out + i, g / (1.0f + exp16<L>(-g)) * load16(up + i));
  }
  if (i == n) return;
  alignas(64) float g_tail[16] = {}, u_tail[16] = {};
  std::copy(gate + i, gate + n, g_tail);
  std::copy(up + i, up + n, u_tail);
  const F32x16 g = load16(g_tail);
  store16(g_tail, g / (1.0f + exp16<L>(-g)) * load16(u_tail));
  std::copy(g_tail, g_tail + (n - i), out + i);
}

}  // namespace
}  // namespace tern::cpu
