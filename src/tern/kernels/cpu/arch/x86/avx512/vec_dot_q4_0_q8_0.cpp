// The AVX-512 levels' arithmetic for Q4_0 and Q8_0 weights (Q8_0 activations), the one AMX
// tiles can produce, and its GEMV on the file's rows (VNNI); the matmuls on packed weights and on
// AMX tiles that give exactly its values are in avx512/q_packed.h (on AMX tiles: amx/gemm_q.cpp).
//
// AMX multiplies 16 × 16 int8 matrices into exact int32 sums. To use it and stay batch
// invariant, this level defines each output element by integers first:
//   isum_b  = Σ over block b's 32 elements of w · a        (exact, w = q - 8 for Q4_0)
//   scale_b = f16(w_b.d) · f16(a_b.d)                       (one rounding)
//   chain_j = fma(isum_b, scale_b, chain_j) for the blocks b ≡ j (mod 16) in ascending order,
//             from +0 (16 chains, j = 0..15)
//   y       = the 16 chains summed in a fixed tree: j + (j + 8), then + 4, + 2, + 1.
// The GEMV here keeps the 16 chains in the 16 lanes of one register (a row's blocks come 16
// at a time); the packed kernels keep 16 chains per token, vectorised over 16 rows. Both do
// the same float operations on the same values, so every element is bit for bit the same
// whether its token ran alone or in a batch, on any number of threads.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/avx512_common.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// ---- the GEMV --------------------------------------------------------------------------------

// Blocks w[0], w[1] against a[0], a[1]: 8 int32 lanes per block, each the exact sum of 4
// products (block 0 in lanes 0-7).
inline __m512i pair_dot(const BlockQ4_0* w, const BlockQ8_0* a) {
  const __m512i qs = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load128(w[0].qs)), 0xFF00,
                                                 load128(w[1].qs));
  // Low nibbles are elements 0-15, high nibbles 16-31: shift the second copy of each qs down.
  const __m512i q = _mm512_and_si512(
      _mm512_srlv_epi64(qs, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
  const __m512i av = load2x256(a[0].qs, a[1].qs);
  // Σ (q - 8) a = Σ q a - Σ 8 a; vpdpbusd takes the unsigned q and the signed a.
  return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, av),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), av));
}
inline __m512i pair_dot(const BlockQ8_0* w, const BlockQ8_0* a) {
  // Both signed: (a + 128) is unsigned, and 128 · Σ w comes off.
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i wv = load2x256(w[0].qs, w[1].qs);
  const __m512i av = _mm512_xor_si512(load2x256(a[0].qs, a[1].qs), flip);
  return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), av, wv),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wv));
}
inline int32_t block_dot(const BlockQ4_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK / 2; ++j)
    sum += ((w.qs[j] & 0x0F) - 8) * a.qs[j] + ((w.qs[j] >> 4) - 8) * a.qs[j + kQK / 2];
  return sum;
}
inline int32_t block_dot(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK; ++j) sum += w.qs[j] * a.qs[j];
  return sum;
}

// The f16 at the start of each of n < 16 blocks `kStride` bytes apart, as floats (0 past n).
template <int kStride>
inline __m512 first_halves(const void* blocks, int n) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  alignas(32) uint16_t h[16] = {};
  for (int i = 0; i < n; ++i) std::memcpy(&h[i], p + i * kStride, sizeof(uint16_t));
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// The blocks b .. nb-1 after the last group of 16, into chains 0 .. nb-b-1.
template <class W>
inline __m512 add_tail(__m512 chains, const W* w, const BlockQ8_0* a, int64_t b, int64_t nb) {
  const int rest = static_cast<int>(nb - b);
  if (rest == 0) return chains;
  alignas(64) int32_t sums[kChains] = {};
  for (int j = 0; j < rest; ++j) sums[j] = block_dot(w[b + j], a[b + j]);
  const __m512 scale = _mm512_mul_ps(first_halves<sizeof(W)>(w + b, rest),
                                     first_halves<sizeof(BlockQ8_0)>(a + b, rest));
  return _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums)), scale, chains,
                               static_cast<__mmask16>((1u << rest) - 1));
}

template <class W>
float vec_dot(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const W*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  __m512 chains = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + kChains <= nb; b += kChains) {
    prefetch_ahead(w + b, kChains * sizeof(W));
    __m512i d[8];
    for (int p = 0; p < 8; ++p) d[p] = pair_dot(w + b + 2 * p, a + b + 2 * p);
    const __m512 scale =
        _mm512_mul_ps(first_halves16<sizeof(W)>(w + b), first_halves16<sizeof(BlockQ8_0)>(a + b));
    chains = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums16(d)), scale, chains);
  }
  return sum_chains(add_tail(chains, w, a, b, nb));
}

}  // namespace

VecDotFn chains16_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return vec_dot<BlockQ4_0>;
    case DType::Q8_0:
      return vec_dot<BlockQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
