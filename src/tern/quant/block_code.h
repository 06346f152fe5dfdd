// One block of a quantized type as the weight quantizers choose it: the stored scales (and
// mins, sub-block scales) and the integer quants, kept apart until packed, so that a caller
// can fit a block's scales and then choose its quants itself (GPTQ, gptq.h) as well as take
// the quants the fit gives (weight_quantizer.h). Every element decodes as step · level(q) +
// offset (BlockFormat), its step and offset given by the block's scales.
#pragma once

#include <cstdint>

#include "tern/core/dtype.h"

namespace tern::quant {

struct BlockCode {
  // The f16 scale (the K types' super-block scale; the affine groups' s); MXFP4's exponent e.
  uint16_t d16 = 0;
  uint16_t m16 = 0;  // Q4_1 / Q5_1's f16 offset, the K types' f16 dmin
  // Sub-block scales: Q4_K / Q5_K's 8 6-bit ones, Q6_K's 16 int8 ones, Q3_K's 16 6-bit signed
  // ones, Q2_K's 16 4-bit ones, IQ4_XS's 8 6-bit signed ones.
  int ls[16] = {};
  int lm[16] = {};  // sub-block mins: Q4_K / Q5_K's 8 6-bit ones, Q2_K's 16 4-bit ones
  float bias = 0;   // the affine groups' offset b (x = s · q + b): −s · z, or MLX's f16 bias
  // The quants, in [qmin, qmax] (no storage bias; the IQ4 types' and MXFP4's level indices).
  int q[256] = {};
};

// What the checkpoint format an affine group is written to lets its scale s (always f16) and
// offset b be:
//   ZeroPoint        b = −s · z, z an integer in [0, qmax] (AWQ, GPTQ's gptq_v2);
//   ZeroPointFromOne z in [1, qmax] (GPTQ's v1 checkpoints store z − 1 in `bits` bits, so a
//                    zero of 0 cannot be written);
//   SymmetricZero    z = (qmax + 1) / 2 (GPTQ's sym: the codes centred on the middle one);
//   HalfBias         b any f16 value (MLX: w = s · q + b, the bias stored as f16).
// The other types ignore it.
enum class AffineRule { ZeroPoint, ZeroPointFromOne, SymmetricZero, HalfBias };

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (blocks of 32), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
// (blocks of 256), the affine groups INT4_G* / INT8_G* (one group a block, s · q + b); elems 0 for
// every other type. The functions below take only these types.
struct BlockFormat {
  int elems = 0;
  int qmin = 0, qmax = 0;
  // The value quant q stands for: levels[q] (the IQ4 types' non-uniform kIq4Levels, MXFP4's
  // kMxfp4Levels), or q itself when null. An element decodes as step · level(q) + offset.
  const int8_t* levels = nullptr;

  float level(int q) const { return static_cast<float>(levels != nullptr ? levels[q] : q); }
  // The quant in [qmin, qmax] whose step · level + offset is nearest x.
  int nearest(float x, float step, float offset) const;
};
BlockFormat block_format(DType dtype);
bool has_block_code(DType dtype);

// x, w: [elems]; w ≥ 0, not all 0. The scales minimising Σ w (x − x̂)² (block_fit.h's
// searches) within `rule`, and the quants rounded to nearest under them.
void fit_block(DType dtype, const float* x, const float* w, BlockCode* code,
               AffineRule rule = AffineRule::ZeroPoint);
// step, offset: [elems], element e decoding as step[e] · q[e] + offset[e].
void block_grid(DType dtype, const BlockCode& code, float* step, float* offset);
// Writes the block in ggml's layout (dtype_bytes(dtype, elems) bytes).
void pack_block(DType dtype, const BlockCode& code, void* y);

}  // namespace tern::quant
