// The driver of the 16-chain matmuls on weights packed in groups of 16 rows, every quant type
// alike (avx512/q_packed.h: Q4_0 and Q8_0; matmul_k_packed.cpp: Q4_K and Q5_K;
// matmul_q6_k_packed.cpp: Q6_K): which groups each thread reads, in how many streams, and the
// tokens in parts of kMaxDotTokens. A layout L supplies the rest:
//   L::Act                            the activations' block type (BlockQ8_0, BlockQ8_K)
//   L::kBlockElems                    elements of a weight block, and of an activation block
//   L::Term, L::term(const Act&)      what the dots take from each activation block besides its
//                                     qs, made once per call for every token and block (or
//                                     L::row_terms(row, nb, out), for terms of several blocks)
//   L::group_bytes(nb)                bytes of a group of nb blocks (a multiple of 64)
//   L::pack_group(w, stride, n, nb, out)   rows [0, n) of a group from the file's layout, the
//                                     rest zero
//   L::dots_one_token<kGroups>(groups, nb, DotTokens<L>, y, rows)   one token
//   L::dots<kGroups>(groups, nb, DotTokens<L>, y, ldy, rows)        2..kMaxDotTokens tokens
// Every output element is the value of the 16-chain GEMV on the file's rows
// (vec_dot_q4_0_q8_0.cpp, vec_dot_k.cpp), bit for bit. Internal linkage, so each file compiles its
// own copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

constexpr int kGroupRows = kChains;  // rows of a group = lanes of a register = chains of an element

// A call of the dots takes up to 15 tokens (their chains stay in L1), and more tokens pass over
// each group in parts of 15 while its weights are in cache. One forward of a 1B-parameter Q4_0
// model, 2 threads, ms: 74 / 91 / 107 / 117 / 141 for 17 / 21 / 24 / 26 / 32 tokens (one call:
// 70 for 15, 20 for 1).
constexpr int kMaxDotTokens = 15;

// The tokens of one call of the dots.
template <class L>
struct DotTokens {
  using Act = typename L::Act;
  using Term = typename L::Term;
  const std::byte* a;  // the activation rows
  size_t a_stride;
  int64_t tokens;
  const Term* terms;  // [tokens][nb]
  int64_t nb;

  const Act* act(int64_t t) const { return reinterpret_cast<const Act*>(a + t * a_stride); }
  const Term& term(int64_t t, int64_t b) const { return terms[t * nb + b]; }
  // Tokens t0 .. t0 + kMaxDotTokens - 1 (fewer at the end).
  DotTokens part(int64_t t0) const {
    return {a + t0 * a_stride, a_stride, std::min<int64_t>(kMaxDotTokens, tokens - t0),
            terms + t0 * nb, nb};
  }
};

// The dots' float chains, [token][group][chain]: zeroed for the tokens of a call, and summed
// into the outputs at its end, y[g] + t · ldy the first of token t's rows of group g.
template <int kTokens, int kGroups>
struct GroupChains {
  __m512 c[kTokens][kGroups][kChains];

  void zero(int64_t tokens) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int g = 0; g < kGroups; ++g) std::fill(c[t][g], c[t][g] + kChains, _mm512_setzero_ps());
  }
  void store(int64_t tokens, float* const* y, size_t ldy, const int* rows) {
    for (int g = 0; g < kGroups; ++g) {
      const auto live = static_cast<__mmask16>((1u << rows[g]) - 1);
      for (int64_t t = 0; t < tokens; ++t)
        _mm512_mask_storeu_ps(y[g] + t * ldy, live, sum_chains16(c[t][g]));
    }
  }
};

// A thread reads its groups as kStreams streams in step (read_in_streams). Measured on a
// decode-shaped pass over Qwen3-1.7B's matrices (2 threads, alternating in one process): one
// group at a time read 17.4 GiB/s for Q4_0 and 19.9 for Q8_0; four adjacent groups 20.4 and
// 22.9; four streams 21.9 and 23.6, the rate of a pass that only loads the bytes. The hardware
// prefetcher keeps more lines in flight for several streams than for one.
constexpr int kStreams = 4;

// Every group through L's dots. group_at(g, scratch): group g's packed bytes.
template <class L, class GroupAt>
void matmul_groups(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / L::kBlockElems, groups = (rows + kGroupRows - 1) / kGroupRows;
  const auto* abytes = static_cast<const std::byte*>(a_data);
  thread_local std::vector<typename L::Term> terms;
  terms.resize(static_cast<size_t>(tokens * nb));
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* act = reinterpret_cast<const typename L::Act*>(abytes + t * a_stride);
    typename L::Term* row = terms.data() + t * nb;
    if constexpr (requires { L::row_terms(act, nb, row); }) {
      L::row_terms(act, nb, row);  // terms that depend on several blocks of the row
    } else {
      for (int64_t b = 0; b < nb; ++b) row[b] = L::term(act[b]);
    }
  }
  // Pointers, not the thread_local: in the parallel region that name is the workers' own.
  const DotTokens<L> dot{abytes, a_stride, tokens, terms.data(), nb};
  read_in_streams<kStreams>(groups, [&](const int64_t* at, int count, int /*member*/) {
    // Where weights in the file's layout are packed as the dots reach them; kept per thread.
    thread_local std::vector<std::byte> scratch[kStreams];
    const std::byte* group[kStreams];
    float* out[kStreams];
    int rows_in[kStreams];
    for (int s = 0; s < count; ++s) {
      group[s] = group_at(at[s], scratch[s]);
      out[s] = y + at[s] * kGroupRows;
      rows_in[s] = static_cast<int>(std::min<int64_t>(kGroupRows, rows - at[s] * kGroupRows));
    }
    auto run = [&]<int kGroups>(int first) {
      if (tokens == 1) {
        L::template dots_one_token<kGroups>(group + first, nb, dot, out + first, rows_in + first);
        return;
      }
      // The groups' weights stay in cache while the tokens pass kMaxDotTokens at a time.
      for (int64_t t0 = 0; t0 < tokens; t0 += kMaxDotTokens) {
        float* y_part[kGroups];
        for (int g = 0; g < kGroups; ++g) y_part[g] = out[first + g] + t0 * ldy;
        L::template dots<kGroups>(group + first, nb, dot.part(t0), y_part, ldy, rows_in + first);
      }
    };
    if (count == kStreams) {
      run.template operator()<kStreams>(0);
    } else {
      for (int s = 0; s < count; ++s) run.template operator()<1>(s);
    }
  });
}

// group_at for packed weights: the groups lie one after another.
template <class L>
auto packed_groups(const void* packed, int64_t k) {
  const auto* base = static_cast<const std::byte*>(packed);
  const size_t group_bytes = L::group_bytes(k / L::kBlockElems);
  return [=](int64_t g, std::vector<std::byte>&) { return base + g * group_bytes; };
}

// group_at for weights in the file's layout: each thread packs a group into its scratch before
// using it, the same bits as packed weights (the packing costs about what the weights' first
// unpacking would).
template <class L>
auto packing_groups(const void* w_data, size_t w_stride, int64_t rows, int64_t k) {
  const int64_t nb = k / L::kBlockElems;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  return [=](int64_t g, std::vector<std::byte>& scratch) {
    // vectors of std::byte are not 64-byte aligned: over-allocate and align.
    scratch.resize(L::group_bytes(nb) + 64);
    auto* out =
        reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    L::pack_group(wbytes + g * kGroupRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kGroupRows, rows - g * kGroupRows)), nb, out);
    return static_cast<const std::byte*>(out);
  };
}

template <class L>
void matmul_packed(int64_t k, const void* packed, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  matmul_groups<L>(k, packed_groups<L>(packed, k), rows, a_data, a_stride, tokens, y, ldy);
}

// Weights in the file's layout (the Avx512 level packs nothing at load), packed per call.
template <class L>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
          size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  matmul_groups<L>(k, packing_groups<L>(w_data, w_stride, rows, k), rows, a_data, a_stride, tokens,
                   y, ldy);
}

template <class L>
size_t packed_bytes(int64_t rows, int64_t k) {
  return static_cast<size_t>((rows + kGroupRows - 1) / kGroupRows) *
         L::group_bytes(k / L::kBlockElems);
}

template <class L>
void pack(const void* w, size_t w_stride, int64_t rows, int64_t k, void* out) {
  const int64_t nb = k / L::kBlockElems, groups = (rows + kGroupRows - 1) / kGroupRows;
  const auto* src = static_cast<const std::byte*>(w);
  auto* dst = static_cast<std::byte*>(out);
  parallel_for(groups, [&](int64_t g) {
    L::pack_group(src + g * kGroupRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kGroupRows, rows - g * kGroupRows)), nb,
                  dst + g * L::group_bytes(nb));
  });
}

template <class L>
constexpr PackedKernels kPacked{kGroupRows, packed_bytes<L>, pack<L>, matmul_packed<L>};

// The lines of a super-block's header (scales, d) asked for at once, and each qs line
// kPrefetchStreamBytes ahead as it is read: all of a super-block's lines at once measured slower
// than the file's rows (a decode-shaped pass over Qwen3-0.6B's shapes, 2 threads, Q4_K: 21.8
// GiB/s packed against 23.3 in place; with the prefetches spread, 24.5-25.3).
inline void prefetch_lines(const std::byte* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) prefetch_stream_ahead(p + off);
}
inline __m512i load_line(const std::byte* line) {
  prefetch_stream_ahead(line);
  return _mm512_loadu_si512(line);
}

}  // namespace
}  // namespace tern::cpu
