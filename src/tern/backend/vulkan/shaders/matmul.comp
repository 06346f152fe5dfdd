#version 450
// y[t, row] = x[t, :] · w[row, :] (+ bias[row]) for one weight type (WEIGHT_F32, _F16, _BF16,
// _Q8_0, _Q4_0, _Q4_K, _Q5_K, _Q6_K, chosen at build time), one workgroup per weight row and group of up to 8
// tokens. Invocation i takes the row's blocks (or elements) i, i + 64, ..., accumulating every
// token's sum in registers, and a fixed tree adds the 64 partial sums: a token's output is the
// same sum in the same order whatever the step's other tokens, so the kernel is batch
// invariant, and a weight row is read once per 8 tokens.
//
// Weight layouts, as vulkan_weights.cpp uploads them (row-major rows of `cols` elements):
//   F32: floats; F16, BF16: two to a word, element e of the matrix in word e / 2;
//   Q8_0, Q4_0: the blocks' f16 scales apart from their quants (`scales`: one per block, two to
//   a word; `w`: 8 words of int8 (Q8_0) or 4 words of nibbles (Q4_0) per block), so that every
//   read is an aligned word; Q4_K, Q5_K: ggml's super-blocks as they are (144 and 176 bytes,
//   whole words); Q6_K: its super-blocks' f16 d in `scales`, the other 208 bytes in `w`.
#include "common.glsl"
layout(local_size_x = 64) in;
#define TOKENS 8u
layout(push_constant) uniform Push {
  Words w; Words scales; Floats x; Floats y; Floats bias;
  uint rows; uint cols; uint t; uint has_bias;
} p;
shared float partial[TOKENS][64];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u;
  if (row >= p.rows) return;
  const uint tok0 = gl_WorkGroupID.y * TOKENS;
  const uint ntok = min(TOKENS, p.t - tok0);
  const uint lid = gl_LocalInvocationID.x;
  float acc[TOKENS];
  for (uint i = 0u; i < TOKENS; ++i) acc[i] = 0.0;

#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q8_0) || defined(WEIGHT_Q4_K) || \
    defined(WEIGHT_Q5_K) || defined(WEIGHT_Q6_K)
  // Units of 32 elements: a block of Q4_0/Q8_0, a sub-block of the K types. A unit's sum is
  // a · Σ₀..₁₅ q·x + b · Σ₁₆..₃₁ q·x − m · Σ x, with its integer quants q and its scales.
  const uint units = p.cols / 32u;
  for (uint u = lid; u < units; u += 64u) {
    const uint g = row * units + u;
    float q[32];
    float a, b, m = 0.0;
#if defined(WEIGHT_Q4_0)
    a = half_at(p.scales, g);
    b = a;
    for (uint i = 0u; i < 4u; ++i) {
      const uint word = p.w.v[g * 4u + i];
      for (uint j = 0u; j < 4u; ++j) {
        const uint byte = (word >> (8u * j)) & 0xFFu;
        q[4u * i + j] = float(int(byte & 0xFu) - 8);
        q[16u + 4u * i + j] = float(int(byte >> 4) - 8);
      }
    }
#elif defined(WEIGHT_Q8_0)
    a = half_at(p.scales, g);
    b = a;
    for (uint i = 0u; i < 8u; ++i) {
      const int word = int(p.w.v[g * 8u + i]);
      for (uint j = 0u; j < 4u; ++j) q[4u * i + j] = float(bitfieldExtract(word, int(8u * j), 8));
    }
#elif defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
    // ggml's super-block of 8 sub-blocks: f16 d and dmin, 12 bytes of 6-bit scales and mins,
    // (Q5_K: 32 bytes of fifth bits,) 128 bytes of nibbles.
#if defined(WEIGHT_Q4_K)
    const uint base = (g / 8u) * 36u;
    const uint qs = base + 4u;
#else
    const uint base = (g / 8u) * 44u;
    const uint qs = base + 12u;
#endif
    const uint j = g % 8u;
    const vec2 dm = unpackHalf2x16(p.w.v[base]);
    uint sc, mn;
    if (j < 4u) {
      sc = byte_at(p.w, base + 1u, j) & 63u;
      mn = byte_at(p.w, base + 1u, j + 4u) & 63u;
    } else {
      sc = (byte_at(p.w, base + 1u, j + 4u) & 0xFu) | ((byte_at(p.w, base + 1u, j - 4u) >> 6) << 4);
      mn = (byte_at(p.w, base + 1u, j + 4u) >> 4) | ((byte_at(p.w, base + 1u, j) >> 6) << 4);
    }
    a = dm.x * float(sc);
    b = a;
    m = dm.y * float(mn);
    const uint shift = 4u * (j % 2u);
    for (uint l = 0u; l < 32u; ++l) {
      uint v = (byte_at(p.w, qs, 32u * (j / 2u) + l) >> shift) & 0xFu;
#if defined(WEIGHT_Q5_K)
      v |= ((byte_at(p.w, base + 4u, l) >> j) & 1u) << 4;
#endif
      q[l] = float(v);
    }
#elif defined(WEIGHT_Q6_K)
    // ggml's super-block without its f16 d (in `scales`): 128 bytes of low nibbles, 64 of high
    // bit pairs, 16 int8 scales of 16 elements each. Unit j is elements 32 j .. 32 j + 31.
    const uint base = (g / 8u) * 52u;
    const uint j = g % 8u;
    const uint h = j / 4u, k = j % 4u;
    const float d = half_at(p.scales, g / 8u);
    a = d * float(bitfieldExtract(int(byte_at(p.w, base + 48u, 8u * h + 2u * k)), 0, 8));
    b = d * float(bitfieldExtract(int(byte_at(p.w, base + 48u, 8u * h + 2u * k + 1u)), 0, 8));
    for (uint l = 0u; l < 32u; ++l) {
      const uint lo = (byte_at(p.w, base, 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1))) & 0xFu;
      const uint hi = (byte_at(p.w, base + 32u, 32u * h + l) >> (2u * k)) & 3u;
      q[l] = float(int(lo | (hi << 4)) - 32);
    }
#endif
    for (uint tt = 0u; tt < TOKENS; ++tt) {
      if (tt >= ntok) break;
      const uint xb = (tok0 + tt) * p.cols + u * 32u;
      float sa = 0.0, sb = 0.0, sx = 0.0;
      for (uint i = 0u; i < 16u; ++i) sa += q[i] * p.x.v[xb + i];
      for (uint i = 16u; i < 32u; ++i) sb += q[i] * p.x.v[xb + i];
      if (m != 0.0)
        for (uint i = 0u; i < 32u; ++i) sx += p.x.v[xb + i];
      acc[tt] += a * sa + b * sb - m * sx;
    }
  }
#else
  for (uint k = lid; k < p.cols; k += 64u) {
    const uint e = row * p.cols + k;
#if defined(WEIGHT_F32)
    const float wv = uintBitsToFloat(p.w.v[e]);
#elif defined(WEIGHT_F16)
    const float wv = half_at(p.w, e);
#elif defined(WEIGHT_BF16)
    const float wv = uintBitsToFloat(((p.w.v[e >> 1] >> (16u * (e & 1u))) & 0xFFFFu) << 16);
#endif
    for (uint tt = 0u; tt < TOKENS; ++tt) {
      if (tt >= ntok) break;
      acc[tt] += wv * p.x.v[(tok0 + tt) * p.cols + k];
    }
  }
#endif

  for (uint tt = 0u; tt < TOKENS; ++tt) partial[tt][lid] = acc[tt];
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lid < w)
      for (uint tt = 0u; tt < TOKENS; ++tt) partial[tt][lid] += partial[tt][lid + w];
    barrier();
  }
  if (lid < ntok) {
    const float b = p.has_bias != 0u ? p.bias.v[row] : 0.0;
    p.y.v[(tok0 + lid) * p.rows + row] = partial[lid][0] + b;
  }
}
