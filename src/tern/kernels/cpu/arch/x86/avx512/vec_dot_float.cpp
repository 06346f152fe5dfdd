// AVX-512 dot kernels of the float weight types: F32 uses FMA; F16 widens its weights to f32
// (its activations are f32) and uses FMA; BF16 uses vdpbf16ps (32 products per instruction,
// exact bf16 products, f32 sums). Tails are masked loads, so no scalar remainder loop.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
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
  for (; i + 16 <= k; i += 16)
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
  if (i < k) {
    const __mmask16 m = tail_mask16(k - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

__m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
__m512 load_f16_tail(const uint16_t* p, int64_t n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask16(n), p));
}

// F16 weights against f32 activations, so only the weights are widened: one conversion per
// FMA (with F16 activations there were two, and the GEMV fell short of the bandwidth). The
// arithmetic, which the GEMM tile below repeats: 16-element chunk j of the row (the last one
// masked when k is not a multiple of 16) goes by one FMA into accumulator j % 2, and the
// result is reduce_add(acc0 + acc1). Two accumulators, not four: a memory-bound GEMV needs no
// more, and they leave the tile's micro-kernel registers for 3 x 4 outputs instead of 2 x 3.
float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const float*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    prefetch_ahead(w + i, 64 * sizeof(uint16_t));
    acc0 = _mm512_fmadd_ps(load_f16(w + i), _mm512_loadu_ps(a + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
    acc0 = _mm512_fmadd_ps(load_f16(w + i + 32), _mm512_loadu_ps(a + i + 32), acc0);
    acc1 = _mm512_fmadd_ps(load_f16(w + i + 48), _mm512_loadu_ps(a + i + 48), acc1);
  }
  if (i + 32 <= k) {
    acc0 = _mm512_fmadd_ps(load_f16(w + i), _mm512_loadu_ps(a + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
    i += 32;
  }
  // At most two chunks left, the last possibly short.
  if (i < k) {
    const int64_t n = std::min<int64_t>(16, k - i);
    acc0 = _mm512_fmadd_ps(load_f16_tail(w + i, n), _mm512_maskz_loadu_ps(tail_mask16(n), a + i),
                           acc0);
  }
  if (i + 16 < k) {
    const int64_t n = k - i - 16;
    acc1 = _mm512_fmadd_ps(load_f16_tail(w + i + 16, n),
                           _mm512_maskz_loadu_ps(tail_mask16(n), a + i + 16), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
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
  static Vec load_tail(const Elem* p, int64_t n) {
    return _mm512_maskz_loadu_ps(tail_mask16(n), p);
  }
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
// chunk is loaded once for all the tokens, an activation chunk once for all the rows. 2 x 3
// measured fastest (1 x 6, with 24 accumulators, spills).
constexpr int kMicroRows = 2, kMicroTokens = 3;

// w: R rows, a: C rows, y: [C, ldy].
template <class Kind, int R, int C>
void gemm_micro(const typename Kind::Elem* const* w, const typename Kind::Elem* const* a, int64_t k,
                float* y, size_t ldy) {
  constexpr int64_t kW = Kind::kWidth;
  using Vec = typename Kind::Vec;
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
        const Vec av = Kind::load(a[c] + i + q * kW);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r][c] = Kind::step(acc[q][r][c], wv[r], av);
      }
    }
  }
  for (; i + kW <= k; i += kW) {
    for (int c = 0; c < C; ++c) {
      const Vec av = Kind::load(a[c] + i);
      for (int r = 0; r < R; ++r) acc[0][r][c] = Kind::step(acc[0][r][c], Kind::load(w[r] + i), av);
    }
  }
  if (i < k) {
    for (int c = 0; c < C; ++c) {
      const Vec av = Kind::load_tail(a[c] + i, k - i);
      for (int r = 0; r < R; ++r)
        acc[1][r][c] = Kind::step(acc[1][r][c], Kind::load_tail(w[r] + i, k - i), av);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(
          _mm512_add_ps(acc[0][r][c], acc[1][r][c]), _mm512_add_ps(acc[2][r][c], acc[3][r][c])));
}

// A family of micro-kernels: Policy::WElem / AElem (the weight and activation elements),
// kRows x kTokens (the largest kernel) and Policy::run<R, C>. Table: one per R <= kRows and
// C <= kTokens (the ragged edges too), indexed [R - 1][C - 1].
template <class Policy>
struct MicroTable {
  using Fn = void (*)(const typename Policy::WElem* const*, const typename Policy::AElem* const*,
                      int64_t, float*, size_t);
  template <int R, size_t... Cs>
  static constexpr std::array<Fn, sizeof...(Cs)> row(std::index_sequence<Cs...>) {
    return {Policy::template run<R, static_cast<int>(Cs) + 1>...};
  }
  template <size_t... Rs>
  static constexpr auto table(std::index_sequence<Rs...>) {
    return std::array<std::array<Fn, Policy::kTokens>, sizeof...(Rs)>{
        row<static_cast<int>(Rs) + 1>(std::make_index_sequence<Policy::kTokens>())...};
  }
  static constexpr auto kTable = table(std::make_index_sequence<Policy::kRows>());
};

// A tile through one family of micro-kernels. w: [rows, w_stride bytes], a: [tokens,
// a_stride bytes], y: [tokens, ldy].
template <class Policy>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  using WElem = typename Policy::WElem;
  using AElem = typename Policy::AElem;
  constexpr int kRows = Policy::kRows, kTokens = Policy::kTokens;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: a few activation rows stay in cache while the tile's weight rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kTokens, tokens - c0));
    const AElem* a[kTokens];
    for (int c = 0; c < cc; ++c)
      a[c] = reinterpret_cast<const AElem*>(abytes + (c0 + c) * a_stride);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int rr = static_cast<int>(std::min<int64_t>(kRows, rows - r0));
      const WElem* w[kRows];
      for (int r = 0; r < rr; ++r)
        w[r] = reinterpret_cast<const WElem*>(wbytes + (r0 + r) * w_stride);
      MicroTable<Policy>::kTable[rr - 1][cc - 1](w, a, k, y + c0 * ldy + r0, ldy);
    }
  }
}

// F32 and BF16: weights and activations of one type.
template <class Kind>
struct SameTypeMicro {
  using WElem = typename Kind::Elem;
  using AElem = typename Kind::Elem;
  static constexpr int kRows = kMicroRows, kTokens = kMicroTokens;
  template <int R, int C>
  static void run(const WElem* const* w, const AElem* const* a, int64_t k, float* y, size_t ldy) {
    gemm_micro<Kind, R, C>(w, a, k, y, ldy);
  }
};

// w: R rows, a: C rows, y: [C, ldy]; each element exactly dot_f16. Its two accumulators per
// output leave registers for 3 rows x 4 tokens (24 accumulators), so each widened weight chunk
// feeds 4 FMAs and each activation chunk 3. 3 x 4 measured faster than 2 x 6 at K = 2048 and
// 6144 (4 tokens' f32 rows stay in L1) and alike at K = 1024; 1 x 12 twice as slow.
template <int R, int C>
void gemm_micro_f16(const uint16_t* const* w, const float* const* a, int64_t k, float* y,
                    size_t ldy) {
  __m512 acc[2][R][C];
  for (int q = 0; q < 2; ++q)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[q][r][c] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      __m512 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = load_f16(w[r] + i + 16 * q);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 av = _mm512_loadu_ps(a[c] + i + 16 * q);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r][c] = _mm512_fmadd_ps(wv[r], av, acc[q][r][c]);
      }
    }
  }
  // At most two chunks left, the last possibly short: as dot_f16.
  for (int q = 0; q < 2 && i + 16 * q < k; ++q) {
    const int64_t at = i + 16 * q, n = std::min<int64_t>(16, k - at);
    const __mmask16 m = tail_mask16(n);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_f16_tail(w[r] + at, n);
    for (int c = 0; c < C; ++c) {
      const __m512 av = _mm512_maskz_loadu_ps(m, a[c] + at);
      for (int r = 0; r < R; ++r) acc[q][r][c] = _mm512_fmadd_ps(wv[r], av, acc[q][r][c]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r][c], acc[1][r][c]));
}

struct F16Micro {
  using WElem = uint16_t;
  using AElem = float;
  static constexpr int kRows = 3, kTokens = 4;
  template <int R, int C>
  static void run(const WElem* const* w, const AElem* const* a, int64_t k, float* y, size_t ldy) {
    gemm_micro_f16<R, C>(w, a, k, y, ldy);
  }
};

// The GEMV's streams side by side (VecDotRowsFn): each row exactly dot_f16 — accumulator j % 2
// takes 16-element chunk j, the last chunk masked — with one activation load for all the rows.
// Each stream prefetched into L2: without it the four rows read no faster than one at a time
// (Qwen3-1.7B F16 decode 6.1 tok/s, with it 7.0-7.4, where one row at a time gave 6.1-6.4).
void dot_f16_rows(int64_t k, const void* const* w_rows, const void* a_row, float* out) {
  constexpr int R = kVecDotRows;
  const uint16_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = static_cast<const uint16_t*>(w_rows[r]);
  const auto* a = static_cast<const float*>(a_row);
  __m512 acc[2][R];
  for (int q = 0; q < 2; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    for (int r = 0; r < R; ++r) prefetch_stream_ahead(w[r] + i);  // 64 bytes: this step's
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      const __m512 av = _mm512_loadu_ps(a + i + 16 * q);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[q][r] = _mm512_fmadd_ps(load_f16(w[r] + i + 16 * q), av, acc[q][r]);
    }
  }
  for (int q = 0; q < 2 && i + 16 * q < k;
       ++q) {  // at most two chunks left, the last possibly short
    const int64_t at = i + 16 * q, n = std::min<int64_t>(16, k - at);
    const __m512 av = _mm512_maskz_loadu_ps(tail_mask16(n), a + at);
    for (int r = 0; r < R; ++r)
      acc[q][r] = _mm512_fmadd_ps(load_f16_tail(w[r] + at, n), av, acc[q][r]);
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]));
}

}  // namespace

VecDotRowsFn avx512_vec_dot_rows_float(DType weight) {
  return weight == DType::F16 ? dot_f16_rows : nullptr;
}

VecDotFn avx512_vec_dot_float(DType weight) {
  switch (weight) {
    case DType::F32:
      return dot_f32;
    case DType::F16:
      return dot_f16;
    case DType::BF16:
      return dot_bf16;
    default:
      return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_float(DType weight) {
  switch (weight) {
    case DType::F32:
      return gemm_tile<SameTypeMicro<F32Kind>>;
    case DType::F16:
      return gemm_tile<F16Micro>;
    case DType::BF16:
      return gemm_tile<SameTypeMicro<BF16Kind>>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
