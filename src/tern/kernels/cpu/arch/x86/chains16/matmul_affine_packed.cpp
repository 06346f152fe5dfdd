// The AVX-512 levels' matmuls of tern's affine groups (INT4_G*, INT8_G*): every token count as
// passes of chains16/q_packed.h's VNNI dots on weights packed in groups of 16 rows, each
// element bit for bit generic/vec_dot_affine.cpp's arithmetic (which is in the 16-chain form,
// so the scalar dot is this level's vec_dot too).
//
// A group of 16 consecutive rows (the last padded with zero rows):
//   qs     [nb][chunks][16 rows][4 bytes]   as Q4_0's (4 bits) or Q8_0's (8 bits) packed qs:
//                                            one 64-byte load, the same 4 bytes of 16 rows
//   scales [ng][2][16 rows] f32             per weight group: the rows' scales, then biases
// nb = k / 32 activation blocks, ng = k / G weight groups; the codes are unsigned already, so
// vpdpbusd takes them as they are and the bias carries the zero point.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/chains16/packed_matmul.h"
#include "tern/kernels/cpu/arch/x86/chains16/q_packed.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// What the dots take from a token's activation block: its scale, and Σ a for the bias.
struct AffineTerm {
  float scale;
  float sum;
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

  static Term term(const BlockQ8_0& a) {
    int32_t sum = 0;
    for (int j = 0; j < kQK; ++j) sum += a.qs[j];
    return {_cvtsh_ss(a.d), static_cast<float>(sum)};
  }
  static int32_t offset(const Term&) { return 0; }
  static Scales scales(const std::byte* group, int64_t nb, int64_t b) {
    const auto* s = reinterpret_cast<const float*>(group + nb * Codes::kQsBytes) +
                    b / kBlocksPerGroup * 2 * kGroupRows;
    return {_mm512_loadu_ps(s), _mm512_loadu_ps(s + kGroupRows)};
  }
  // t = fma(bias, Σ a, scale · isum); chain = fma(t, d, chain): generic/vec_dot_affine.cpp's.
  static __m512 step(__m512 chain, __m512i sums, const Scales& s, const Term& term) {
    const __m512 scaled = _mm512_mul_ps(s.scale, _mm512_cvtepi32_ps(sums));
    const __m512 t = _mm512_fmadd_ps(s.bias, _mm512_set1_ps(term.sum), scaled);
    return _mm512_fmadd_ps(t, _mm512_set1_ps(term.scale), chain);
  }

  static size_t group_bytes(int64_t nb) {
    const int64_t ng = nb / kBlocksPerGroup;
    const auto bytes = static_cast<size_t>(nb * Codes::kQsBytes + ng * 2 * kGroupRows * 4);
    return (bytes + 63) / 64 * 64;
  }
  // Rows [0, n) of a group from the rows of BlockAffine; rows n..15 zero.
  static void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb,
                         std::byte* out) {
    constexpr int kChunks = static_cast<int>(Codes::kQsBytes / 64);
    constexpr int kSubBytes = kChunks * 4;  // a 32-element block's codes in BlockAffine::qs
    const int64_t ng = nb / kBlocksPerGroup;
    std::memset(out, 0, group_bytes(nb));
    auto* qs = reinterpret_cast<uint32_t*>(out);
    auto* scales = reinterpret_cast<float*>(out + nb * Codes::kQsBytes);
    for (int r = 0; r < n; ++r) {
      const auto* row = reinterpret_cast<const B*>(w_data + r * w_stride);
      for (int64_t g = 0; g < ng; ++g) {
        scales[g * 2 * kGroupRows + r] = row[g].scale;
        scales[g * 2 * kGroupRows + kGroupRows + r] = row[g].bias;
        for (int sub = 0; sub < kBlocksPerGroup; ++sub) {
          const int64_t b = g * kBlocksPerGroup + sub;
          for (int c = 0; c < kChunks; ++c)
            std::memcpy(&qs[(b * kChunks + c) * kGroupRows + r], row[g].qs + sub * kSubBytes + 4 * c,
                        4);
        }
      }
    }
  }
};

}  // namespace

GemmTileFn chains16_gemm_affine(DType weight) {
  return with_affine_block<GemmTileFn>(weight,
                                       []<class B>() -> GemmTileFn { return gemm<AffineLayout<B>>; });
}

const PackedKernels* chains16_packed_affine(DType weight) {
  return with_affine_block<const PackedKernels*>(
      weight, []<class B>() -> const PackedKernels* { return &kPacked<AffineLayout<B>>; });
}

}  // namespace tern::cpu
