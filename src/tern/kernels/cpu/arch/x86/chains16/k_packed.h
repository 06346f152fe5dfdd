// The driver of the K types' matmuls on weights packed in groups of 16 rows (chains16/
// matmul_k_packed.cpp: Q4_K; matmul_q6_k_packed.cpp: Q6_K): which groups each thread reads, in
// how many streams, and the tokens in parts of kMaxDotTokens. A layout L supplies the rest:
//   L::Block                          the file's block type
//   L::group_bytes(nb)                bytes of a group of nb super-blocks (a multiple of 64)
//   L::pack_group(w, stride, n, nb, out)   rows [0, n) of a group from the file's layout
//   L::kTermsPerSuperblock, L::prepare_terms(a, a_stride, tokens, nb, out)   what the dots
//                                     take from each token's activation super-blocks besides
//                                     their qs, int32, [tokens][nb][kTermsPerSuperblock]
//   L::dots_one_token<kGroups>(groups, nb, DotTokens, y, rows)   one token
//   L::dots<kGroups>(groups, nb, DotTokens, y, ldy, rows)        2..kMaxDotTokens tokens
// Every output element is the chains16/vec_dot_k.cpp GEMV's value, bit for bit. Internal
// linkage, so each file compiles its own copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/kernels/cpu/arch/x86/chains16/k_common.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

constexpr int kGroupRows = kChains;  // rows of a group = lanes of a register = chains of an element
constexpr int kMaxDotTokens = kMaxFewTokens;  // tokens per call of L::dots (chains on the stack)

struct DotTokens {
  const std::byte* a;  // the Q8_K activation rows
  size_t a_stride;
  int64_t tokens;
  const int32_t* terms;  // L::prepare_terms
  int64_t terms_per_token;

  const BlockQ8_K* act(int64_t t) const {
    return reinterpret_cast<const BlockQ8_K*>(a + t * a_stride);
  }
  // Tokens t0 .. t0 + kMaxDotTokens - 1 (fewer at the end).
  DotTokens part(int64_t t0) const {
    return {a + t0 * a_stride, a_stride, std::min<int64_t>(kMaxDotTokens, tokens - t0),
            terms + t0 * terms_per_token, terms_per_token};
  }
};

// A thread reads its groups as kStreams streams in step (read_in_streams), as the packed
// Q4_0 GEMV does (chains16/q_packed.h, where it was measured).
constexpr int kStreams = 4;

// Every group through L's dots. group_at(g, scratch): group g's packed bytes.
template <class L, class GroupAt>
void matmul_groups(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK, groups = (rows + kGroupRows - 1) / kGroupRows;
  const auto* abytes = static_cast<const std::byte*>(a_data);
  thread_local std::vector<int32_t> terms;
  terms.resize(static_cast<size_t>(tokens * nb * L::kTermsPerSuperblock));
  L::prepare_terms(abytes, a_stride, tokens, nb, terms.data());
  // Pointers, not the thread_local: in the parallel region that name is the workers' own.
  const DotTokens dot{abytes, a_stride, tokens, terms.data(), nb * L::kTermsPerSuperblock};
  read_in_streams<kStreams>(groups, [&](const int64_t* at, int count) {
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

template <class L>
void matmul_packed(int64_t k, const void* packed, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  const auto* base = static_cast<const std::byte*>(packed);
  const size_t group_bytes = L::group_bytes(k / kQKK);
  matmul_groups<L>(
      k, [=](int64_t g, std::vector<std::byte>&) { return base + g * group_bytes; }, rows, a_data,
      a_stride, tokens, y, ldy);
}

template <class L>
size_t packed_bytes(int64_t rows, int64_t k) {
  return static_cast<size_t>((rows + kGroupRows - 1) / kGroupRows) * L::group_bytes(k / kQKK);
}

template <class L>
void pack(const void* w, size_t w_stride, int64_t rows, int64_t k, void* out) {
  const int64_t nb = k / kQKK, groups = (rows + kGroupRows - 1) / kGroupRows;
  const auto* src = static_cast<const std::byte*>(w);
  auto* dst = static_cast<std::byte*>(out);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    L::pack_group(src + g * kGroupRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kGroupRows, rows - g * kGroupRows)), nb,
                  dst + g * L::group_bytes(nb));
}

// Weights in the file's layout (the Avx512 level, which has no tiles): each thread packs a
// group before using it, the same bits as packed weights.
template <class L>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
          size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  auto group_at = [=](int64_t g, std::vector<std::byte>& scratch) {
    // vectors of std::byte are not 64-byte aligned: over-allocate and align.
    scratch.resize(L::group_bytes(nb) + 64);
    auto* out =
        reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    L::pack_group(wbytes + g * kGroupRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kGroupRows, rows - g * kGroupRows)), nb, out);
    return static_cast<const std::byte*>(out);
  };
  matmul_groups<L>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
}

// The lines of a super-block's header (scales, d) into L2 at once, and each qs line
// kPrefetchL2Bytes ahead as it is read: all of a super-block's lines at once measured slower
// than the file's rows (a decode-shaped pass over Qwen3-0.6B's shapes, 2 threads, Q4_K: 21.8
// GiB/s packed against 23.3 in place; with the prefetches spread, 24.5-25.3).
inline void prefetch_lines(const std::byte* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) prefetch_l2_ahead(p + off);
}
inline __m512i load_line(const std::byte* line) {
  prefetch_l2_ahead(line);
  return _mm512_loadu_si512(line);
}

}  // namespace
}  // namespace tern::cpu
