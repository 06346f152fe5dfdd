// AVX-512 dot kernels of the float weight types: F32 and F16 widen to f32 and use FMA;
// BF16 uses vdpbf16ps (32 products per instruction, exact bf16 products, f32 sums). Tails are
// masked loads, so no scalar remainder loop.
// GCC 12's own AVX-512 headers fill "undefined" vectors by self-initialisation, which its
// -Wuninitialized flags wherever such an intrinsic is inlined (_mm512_cvtph_ps, the reduces).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

__mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
__mmask32 tail_mask32(int64_t n) { return static_cast<__mmask32>((1ull << n) - 1ull); }

float dot_f32(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(a + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(a + i + 48), acc3);
  }
  for (; i + 16 <= k; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
  if (i < k) {
    const __mmask16 m = tail_mask16(k - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

__m512 load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_fmadd_ps(load_f16(w + i), load_f16(a + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16(w + i + 16), load_f16(a + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_f16(w + i + 32), load_f16(a + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_f16(w + i + 48), load_f16(a + i + 48), acc3);
  }
  for (; i + 16 <= k; i += 16) acc0 = _mm512_fmadd_ps(load_f16(w + i), load_f16(a + i), acc0);
  if (i < k) {
    const __mmask16 m = tail_mask16(k - i);
    acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                           _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

__m512bh load_bf16(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

float dot_bf16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 128 <= k; i += 128) {
    acc0 = _mm512_dpbf16_ps(acc0, load_bf16(w + i), load_bf16(a + i));
    acc1 = _mm512_dpbf16_ps(acc1, load_bf16(w + i + 32), load_bf16(a + i + 32));
    acc2 = _mm512_dpbf16_ps(acc2, load_bf16(w + i + 64), load_bf16(a + i + 64));
    acc3 = _mm512_dpbf16_ps(acc3, load_bf16(w + i + 96), load_bf16(a + i + 96));
  }
  for (; i + 32 <= k; i += 32) acc0 = _mm512_dpbf16_ps(acc0, load_bf16(w + i), load_bf16(a + i));
  if (i < k) {
    const __mmask32 m = tail_mask32(k - i);
    acc1 = _mm512_dpbf16_ps(acc1, reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, w + i)),
                            reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, a + i)));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// ---- GEMM tiles ------------------------------------------------------------------------------
//

// One float weight type as the micro-kernel sees it: kWidth elements per step.
struct F32Kind {
  using Elem = float;
  using Vec = __m512;
  static constexpr int64_t kWidth = 16;
  static Vec load(const Elem* p) { return _mm512_loadu_ps(p); }
  static Vec load_tail(const Elem* p, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask16(n), p); }
  static __m512 step(__m512 acc, Vec w, Vec a) { return _mm512_fmadd_ps(w, a, acc); }
};
struct F16Kind {
  using Elem = uint16_t;
  using Vec = __m512;
  static constexpr int64_t kWidth = 16;
  static Vec load(const Elem* p) { return load_f16(p); }
  static Vec load_tail(const Elem* p, int64_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask16(n), p)); }
  static __m512 step(__m512 acc, Vec w, Vec a) { return _mm512_fmadd_ps(w, a, acc); }
};
struct BF16Kind {
  using Elem = uint16_t;
  using Vec = __m512bh;
  static constexpr int64_t kWidth = 32;
  static Vec load(const Elem* p) { return load_bf16(p); }
  static Vec load_tail(const Elem* p, int64_t n) {
    return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(tail_mask32(n), p));
  }
  static __m512 step(__m512 acc, Vec w, Vec a) { return _mm512_dpbf16_ps(acc, w, a); }
};

// Micro-kernels of R rows x C tokens, each element with its dot_*'s arithmetic: the same four
// accumulators fed the same chunks in the same order, the same tails and final sum. A weight
// chunk is loaded (and widened) once for all the tokens, an activation chunk once for all the
// rows. F16 activations are widened to f32 once per tile (exactly, as the dot widens them):
// widening is what bounds an F16 GEMM (T = 64 on 2048 x 2048: 8.0 -> 5.5 ms). 2 x 3 measured
// fastest (1 x 6, with 24 accumulators, spills).
constexpr int kMicroRows = 2, kMicroTokens = 3;

// WKind: the weights' type; AKind: the activations' as the micro-kernel reads them (F32 for
// F16 weights, the activations widened; else WKind). w: R rows, a: C rows, y: [C, ldy].
template <class WKind, class AKind, int R, int C>
void gemm_micro(const typename WKind::Elem* const* w, const typename AKind::Elem* const* a, int64_t k, float* y,
                size_t ldy) {
  constexpr int64_t kW = WKind::kWidth;
  using Vec = typename WKind::Vec;
  using Kind = WKind;
  __m512 acc[4][R][C];
  for (int q = 0; q < 4; ++q)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[q][r][c] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 4 * kW <= k; i += 4 * kW) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      Vec wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = Kind::load(w[r] + i + q * kW);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const Vec av = AKind::load(a[c] + i + q * kW);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r][c] = Kind::step(acc[q][r][c], wv[r], av);
      }
    }
  }
  for (; i + kW <= k; i += kW) {
    for (int c = 0; c < C; ++c) {
      const Vec av = AKind::load(a[c] + i);
      for (int r = 0; r < R; ++r) acc[0][r][c] = Kind::step(acc[0][r][c], Kind::load(w[r] + i), av);
    }
  }
  if (i < k) {
    for (int c = 0; c < C; ++c) {
      const Vec av = AKind::load_tail(a[c] + i, k - i);
      for (int r = 0; r < R; ++r) acc[1][r][c] = Kind::step(acc[1][r][c], Kind::load_tail(w[r] + i, k - i), av);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = _mm512_reduce_add_ps(
          _mm512_add_ps(_mm512_add_ps(acc[0][r][c], acc[1][r][c]), _mm512_add_ps(acc[2][r][c], acc[3][r][c])));
}

template <class WKind, class AKind>
struct Micro {
  using Fn = void (*)(const typename WKind::Elem* const*, const typename AKind::Elem* const*, int64_t, float*, size_t);
  static constexpr int kRows = kMicroRows, kTokens = kMicroTokens;
  template <int R, size_t... Cs>
  static constexpr std::array<Fn, sizeof...(Cs)> row(std::index_sequence<Cs...>) {
    return {gemm_micro<WKind, AKind, R, static_cast<int>(Cs) + 1>...};
  }
  template <size_t... Rs>
  static constexpr auto table(std::index_sequence<Rs...>) {
    return std::array<std::array<Fn, kTokens>, sizeof...(Rs)>{
        row<static_cast<int>(Rs) + 1>(std::make_index_sequence<kTokens>())...};
  }
  // [R - 1][C - 1]: for every R <= kRows and C <= kTokens (the ragged edges too).
  static constexpr auto kTable = table(std::make_index_sequence<kRows>());
};

template <class Kind>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data, size_t a_stride,
               int64_t tokens, float* y, size_t ldy) {
  // F16 activations are read widened, from a buffer that grows to the largest k seen:
  // [kTokens, k] floats.
  constexpr bool kWiden = std::is_same_v<Kind, F16Kind>;
  using AKind = std::conditional_t<kWiden, F32Kind, Kind>;
  using M = Micro<Kind, AKind>;
  using WElem = typename Kind::Elem;
  using AElem = typename AKind::Elem;
  thread_local std::vector<float> widened;
  if (kWiden && widened.size() < static_cast<size_t>(M::kTokens * k)) widened.resize(static_cast<size_t>(M::kTokens * k));
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: a few activation rows stay in cache while the tile's weight rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += M::kTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(M::kTokens, tokens - c0));
    const AElem* a[M::kTokens];
    for (int c = 0; c < cc; ++c) {
      const auto* row = reinterpret_cast<const WElem*>(abytes + (c0 + c) * a_stride);
      if constexpr (kWiden) {
        float* out = widened.data() + c * k;
        int64_t i = 0;
        for (; i + 16 <= k; i += 16) _mm512_storeu_ps(out + i, load_f16(row + i));
        if (i < k) _mm512_mask_storeu_ps(out + i, tail_mask16(k - i), F16Kind::load_tail(row + i, k - i));
        a[c] = out;
      } else {
        a[c] = row;
      }
    }
    for (int64_t r0 = 0; r0 < rows; r0 += M::kRows) {
      const int rr = static_cast<int>(std::min<int64_t>(M::kRows, rows - r0));
      const WElem* w[M::kRows];
      for (int r = 0; r < rr; ++r) w[r] = reinterpret_cast<const WElem*>(wbytes + (r0 + r) * w_stride);
      M::kTable[rr - 1][cc - 1](w, a, k, y + c0 * ldy + r0, ldy);
    }
  }
}

}  // namespace

VecDotFn avx512_vec_dot_float(DType weight) {
  switch (weight) {
    case DType::F32: return dot_f32;
    case DType::F16: return dot_f16;
    case DType::BF16: return dot_bf16;
    default: return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_float(DType weight) {
  switch (weight) {
    case DType::F32: return gemm_tile<F32Kind>;
    case DType::F16: return gemm_tile<F16Kind>;
    case DType::BF16: return gemm_tile<BF16Kind>;
    default: return nullptr;
  }
}

}  // namespace tern::cpu
