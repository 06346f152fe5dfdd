// The AVX-512 levels' matmuls of tern's affine groups (INT4_G*, INT8_G*): every token count as
// passes of avx512/q_packed.h's VNNI dots on weights packed in groups of 16 rows, each
// element bit for bit generic/vec_dot_affine.cpp's arithmetic (which is in the 16-chain form,
// so the scalar dot is this level's vec_dot too).
//
// A group of 16 consecutive rows (the last padded with zero rows) is, per weight group of G
// inputs (k / G of them, one after another):
//   scales [2][16 rows] f32                  the rows' scales, then their biases
//   qs     [G / 32][chunks][16 rows][4 bytes]   as Q4_0's (4 bits) or Q8_0's (8 bits) packed
//                                            qs: one 64-byte load, the same 4 bytes of 16 rows
// so a group streams from one place, scales and codes alike (with the scales apart at the end,
// as Q4_0's, decode of Qwen3-1.7B's shape ran at 0.85× Q4_K's). The codes are unsigned
// already, so vpdpbusd takes them as they are and the bias carries the zero point.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/packed_matmul.h"
#include "tern/kernels/cpu/arch/x86/avx512/q_packed.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// What the dots take from a token's activation block b: its scale, and Σ over the weight group
// of the blocks' d · Σ a (the same for each block of the group), which the group's bias takes.
struct AffineTerm {
  float scale;
  float group_sum;
};

template <class B>
struct AffineLayout : Q8Dots<AffineLayout<B>> {
  static constexpr bool kNibbles = B::kBitsPerCode == 4;
  static constexpr int kBlocksPerGroup = B::kElems / kQK;
  using Codes = BlockCodes<kNibbles, 0>;
  using Term = AffineTerm;
  struct Scales {
    __m512 scale, bias;
  };
  // The rows' Σ over the group's blocks so far of isum · d.
  struct Acc {
    __m512 u = _mm512_setzero_ps();
  };

  static void row_terms(const BlockQ8_0* a, int64_t nb, Term* out) {
    for (int64_t g0 = 0; g0 < nb; g0 += kBlocksPerGroup) {
      float group_sum = 0.0f;
      for (int64_t b = g0; b < g0 + kBlocksPerGroup; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < kQK; ++j) sum += a[b].qs[j];
        group_sum = std::fma(static_cast<float>(sum), _cvtsh_ss(a[b].d), group_sum);
      }
      for (int64_t b = g0; b < g0 + kBlocksPerGroup; ++b) out[b] = {_cvtsh_ss(a[b].d), group_sum};
    }
  }
  static int32_t offset(const Term&) { return 0; }
  static int64_t chain_of(int64_t b) { return b / kBlocksPerGroup % kChains; }
  static constexpr int64_t kScaleBytes = 2 * kGroupRows * sizeof(float);
  static constexpr int64_t kWeightGroupBytes = kScaleBytes + kBlocksPerGroup * Codes::kQsBytes;
  static const std::byte* qs(const std::byte* group, int64_t, int64_t b) {
    return group + b / kBlocksPerGroup * kWeightGroupBytes + kScaleBytes +
           b % kBlocksPerGroup * Codes::kQsBytes;
  }
  static Scales scales(const std::byte* group, int64_t, int64_t b) {
    const std::byte* at = group + b / kBlocksPerGroup * kWeightGroupBytes;
    if (b % kBlocksPerGroup == 0) prefetch_stream_ahead(at), prefetch_stream_ahead(at + 64);
    const auto* s = reinterpret_cast<const float*>(at);
    return {_mm512_loadu_ps(s), _mm512_loadu_ps(s + kGroupRows)};
  }
  // generic/vec_dot_affine.cpp's steps: u = fma(isum, d, u) per block; at the group's last,
  // chain = fma(scale, u, chain), then fma(bias, Σ d · Σ a, chain).
  static __m512 step(__m512 chain, Acc& acc, __m512i sums, const Scales& s, const Term& term,
                     int64_t b) {
    acc.u = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(term.scale), acc.u);
    if (b % kBlocksPerGroup != kBlocksPerGroup - 1) return chain;
    chain = _mm512_fmadd_ps(s.scale, acc.u, chain);
    acc.u = _mm512_setzero_ps();
    return _mm512_fmadd_ps(s.bias, _mm512_set1_ps(term.group_sum), chain);
  }

  static size_t group_bytes(int64_t nb) {
    return static_cast<size_t>(nb / kBlocksPerGroup * kWeightGroupBytes);  // a multiple of 64
  }
  // Rows [0, n) of a group from the rows of BlockAffine; rows n..15 zero.
  static void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb,
                         std::byte* out) {
    constexpr int kChunks = static_cast<int>(Codes::kQsBytes / 64);
    constexpr int kSubBytes = kChunks * 4;  // a 32-element block's codes in BlockAffine::qs
    std::memset(out, 0, group_bytes(nb));
    for (int r = 0; r < n; ++r) {
      const auto* row = reinterpret_cast<const B*>(w_data + r * w_stride);
      for (int64_t g = 0; g < nb / kBlocksPerGroup; ++g) {
        auto* scales = reinterpret_cast<float*>(out + g * kWeightGroupBytes);
        scales[r] = row[g].scale;
        scales[kGroupRows + r] = row[g].bias;
        for (int sub = 0; sub < kBlocksPerGroup; ++sub) {
          auto* qs = reinterpret_cast<uint32_t*>(
              const_cast<std::byte*>(AffineLayout::qs(out, nb, g * kBlocksPerGroup + sub)));
          for (int c = 0; c < kChunks; ++c)
            std::memcpy(&qs[c * kGroupRows + r], row[g].qs + sub * kSubBytes + 4 * c, 4);
        }
      }
    }
  }
};

}  // namespace

GemmTileFn chains16_gemm_affine(DType weight) {
  return with_affine_block<GemmTileFn>(
      weight, []<class B>() -> GemmTileFn { return gemm<AffineLayout<B>>; });
}

const PackedKernels* chains16_packed_affine(DType weight) {
  return with_affine_block<const PackedKernels*>(
      weight, []<class B>() -> const PackedKernels* { return &kPacked<AffineLayout<B>>; });
}

}  // namespace tern::cpu
