// The 16-chain arithmetic, written in plain C++: what the AVX-512 levels compute (avx512/:
// vec_dot_q4_0_q8_0.cpp, vec_dot_k.cpp, vec_dot_float.cpp) and the ARM levels (arch/arm/)
// reproduce, so that a model gives the same bits on an AVX-512 x86 machine and on any ARM one.
// Nothing dispatches to these; the tests hold every kernel of these types to them, bit for bit.
//
// The integer types: exact integer sums per block (the scalar reference's, generic/vec_dot.cpp),
// then 16 float chains, block b feeding chain b % 16 by one fused multiply-add, the chains
// summed in a fixed tree:
//   Q4_0, Q8_0: chain = fma(isum_b, f16(w.d) · f16(a.d), chain)
//   Q4_K, Q5_K: chain = fma(S1_b, f16(d) · a.d, chain); chain = fma(−S2_b, f16(dmin) · a.d, chain)
//   Q6_K:       chain = fma(S_b, f16(d) · a.d, chain)
// The float types: chunks of the row into 16-lane accumulators by fused multiply-adds, zeros
// past the end of the row, the accumulators added lane by lane and the lanes summed in
// the same tree (each file's comment below says which chunk feeds which accumulator).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/k_scales.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kLanes = 16;

struct Lanes {
  float v[kLanes] = {};
  // The fixed tree: lane j + lane j + 8, then + 4, + 2, + 1.
  float sum() const {
    float s[kLanes];
    for (int j = 0; j < kLanes; ++j) s[j] = v[j];
    for (int width = kLanes / 2; width >= 1; width /= 2)
      for (int j = 0; j < width; ++j) s[j] = s[j] + s[j + width];
    return s[0];
  }
};

int32_t block_isum(const BlockQ4_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK / 2; ++j)
    sum += ((w.qs[j] & 0xf) - 8) * a.qs[j] + ((w.qs[j] >> 4) - 8) * a.qs[j + kQK / 2];
  return sum;
}
int32_t block_isum(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK; ++j) sum += w.qs[j] * a.qs[j];
  return sum;
}

template <class W>
float dot_q(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const W*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  Lanes chains;
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float scale = f16_to_f32(w[b].d) * f16_to_f32(a[b].d);
    float& chain = chains.v[b % kLanes];
    chain = std::fma(static_cast<float>(block_isum(w[b], a[b])), scale, chain);
  }
  return chains.sum();
}

// S1 = Σ_j sc_j Σ_l q·a over the 8 sub-blocks of 32, S2 = Σ_j m_j (bsum_2j + bsum_2j+1).
template <class Block>
void k_affine_sums(const Block& w, const BlockQ8_K& a, int32_t* s1, int32_t* s2) {
  *s1 = *s2 = 0;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_k_scale_min(w.scales, j, &sc, &m);
    const uint8_t* qs = w.qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      int q = (qs[l] >> shift) & 0xf;
      if constexpr (std::is_same_v<Block, BlockQ5_K>) q |= ((w.qh[l] >> j) & 1) << 4;
      dot += q * a.qs[32 * j + l];
    }
    *s1 += sc * dot;
    *s2 += m * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
}

template <class Block>
float dot_k_affine(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  Lanes chains;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int32_t s1, s2;
    k_affine_sums(w[b], a[b], &s1, &s2);
    float& chain = chains.v[b % kLanes];
    chain = std::fma(static_cast<float>(s1), f16_to_f32(w[b].d) * a[b].d, chain);
    chain = std::fma(-static_cast<float>(s2), f16_to_f32(w[b].dmin) * a[b].d, chain);
  }
  return chains.sum();
}

int32_t q6_k_sum(const BlockQ6_K& w, const BlockQ8_K& a) {
  int32_t sum = 0;
  for (int s = 0; s < 16; ++s) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const int e = 16 * s + l;  // element index in the super-block
      const int h = e / 128, g = (e % 128) / 32, r = e % 32;
      const uint8_t ql = w.ql[64 * h + 32 * (g % 2) + r];
      const int q = ((g < 2 ? ql & 0xf : ql >> 4) | ((w.qh[32 * h + r] >> (2 * g)) & 3) << 4) - 32;
      dot += q * a.qs[e];
    }
    sum += w.scales[s] * dot;
  }
  return sum;
}

float dot_q6_k(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  Lanes chains;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    float& chain = chains.v[b % kLanes];
    chain = std::fma(static_cast<float>(q6_k_sum(w[b], a[b])), f16_to_f32(w[b].d) * a[b].d, chain);
  }
  return chains.sum();
}

// The 16-element chunk starting at i into acc (elements past k count as zeros).
template <class Load>
void fma_chunk(Lanes& acc, int64_t i, int64_t k, const float* a, Load weight) {
  for (int l = 0; l < kLanes; ++l) {
    const bool in = i + l < k;
    acc.v[l] = std::fma(in ? weight(i + l) : 0.0f, in ? a[i + l] : 0.0f, acc.v[l]);
  }
}

Lanes add(const Lanes& x, const Lanes& y) {
  Lanes s;
  for (int l = 0; l < kLanes; ++l) s.v[l] = x.v[l] + y.v[l];
  return s;
}

// F32: four accumulators; while 64 elements remain, chunk c of them feeds accumulator c; then
// whole chunks feed accumulator 0 and the short last one accumulator 1; the result is the tree
// of (acc0 + acc1) + (acc2 + acc3).
float dot_f32(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  auto weight = [w](int64_t i) { return w[i]; };
  Lanes acc[4];
  int64_t i = 0;
  for (; i + 64 <= k; i += 64)
    for (int c = 0; c < 4; ++c) fma_chunk(acc[c], i + 16 * c, k, a, weight);
  for (; i + 16 <= k; i += 16) fma_chunk(acc[0], i, k, a, weight);
  if (i < k) fma_chunk(acc[1], i, k, a, weight);
  return add(add(acc[0], acc[1]), add(acc[2], acc[3])).sum();
}

// BF16 (both sides bf16; vdpbf16ps's arithmetic): lane l of an accumulator takes elements
// 2l and 2l + 1 of a 32-element chunk, the odd one's product first, then the even one's, each
// by a fused multiply-add (a product of two bf16 values is exact in f32, so this is its exact
// product added with one rounding). While 128 elements remain, chunk c of them feeds
// accumulator c; then whole chunks feed accumulator 0 and the short last one (zeros past the
// end) accumulator 1; the tree of (acc0 + acc1) + (acc2 + acc3). vdpbf16ps also flushes
// subnormal inputs and results to zero, which this does not: the two differ only where a
// product or a partial sum falls below 2^-126.
void fma_bf16_chunk(Lanes& acc, const uint16_t* w, const uint16_t* a, int64_t i, int64_t k) {
  auto at = [k, i](const uint16_t* x, int64_t e) {
    return i + e < k ? bf16_to_f32(x[i + e]) : 0.0f;
  };
  for (int l = 0; l < kLanes; ++l) {
    acc.v[l] = std::fma(at(w, 2 * l + 1), at(a, 2 * l + 1), acc.v[l]);
    acc.v[l] = std::fma(at(w, 2 * l), at(a, 2 * l), acc.v[l]);
  }
}

float dot_bf16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  Lanes acc[4];
  int64_t i = 0;
  for (; i + 128 <= k; i += 128)
    for (int c = 0; c < 4; ++c) fma_bf16_chunk(acc[c], w, a, i + 32 * c, k);
  for (; i + 32 <= k; i += 32) fma_bf16_chunk(acc[0], w, a, i, k);
  if (i < k) fma_bf16_chunk(acc[1], w, a, i, k);
  return add(add(acc[0], acc[1]), add(acc[2], acc[3])).sum();
}

// F16 (weights widened, exactly): two accumulators, chunk j of the row feeding accumulator
// j % 2, the last chunk possibly short; the result is the tree of acc0 + acc1.
float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const float*>(va);
  auto weight = [w](int64_t i) { return f16_to_f32(w[i]); };
  Lanes acc[2];
  for (int64_t i = 0, j = 0; i < k; i += 16, ++j) fma_chunk(acc[j % 2], i, k, a, weight);
  return add(acc[0], acc[1]).sum();
}

}  // namespace

VecDotFn lanes16_vec_dot(DType weight) {
  switch (weight) {
    case DType::F32:
      return dot_f32;
    case DType::F16:
      return dot_f16;
    case DType::BF16:
      return dot_bf16;
    case DType::Q4_0:
      return dot_q<BlockQ4_0>;
    case DType::Q8_0:
      return dot_q<BlockQ8_0>;
    case DType::Q4_K:
      return dot_k_affine<BlockQ4_K>;
    case DType::Q5_K:
      return dot_k_affine<BlockQ5_K>;
    case DType::Q6_K:
      return dot_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
