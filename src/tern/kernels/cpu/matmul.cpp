// The matmul driver: activation quantization, then GEMV (one token, parallel over rows) or a
// tiled GEMM (many tokens, each chunk of weight rows reused from cache across a tile of
// tokens). Each output element is one vec_dot, or comes from a tile kernel that repeats that
// vec_dot's arithmetic exactly (vec_dot.h), which is what batch invariance needs.
#include "tern/kernels/cpu/matmul.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

// GEMM tiles: 16 weight rows (≤ 40 KB for K = 4096 in 4-5 bit types) stay in L1/L2 while a
// tile of 32 tokens, whose activation rows stream from L2, passes over them.
constexpr int64_t kRowChunk = 16;
constexpr int64_t kTokenTile = 32;
// With a tile kernel, which prepares each token's activations once per tile, more rows per
// tile amortize that (96 rows of K = 3072 in Q8_0: 320 KB, in L2); tokens per tile are a
// multiple of the micro-kernels' 3 or 4 tokens, so that a prefill has few ragged ones.
constexpr int64_t kTileRows = 96, kMinTileRows = 24;  // multiples of the micro-kernels' 2 or 3 rows
constexpr int64_t kTileTokens = 36;
// A GEMV thread reads its rows as this many streams: its share cut into quarters, taken a row
// of each in turn. One sequential stream per core left decode ~15% short of the bandwidth
// (Qwen3-0.6B Q4_K_M 46-48 → 53-56 tok/s on 2 threads; 2 streams 51-52, 8 streams 51-55):
// the hardware prefetcher keeps more lines in flight for several streams than for one.
constexpr int kGemvStreams = 4;
static_assert(kGemvStreams == kVecDotRows, "vec_dot_rows reads the GEMV's streams side by side");

size_t row_bytes_of(DType dtype, int64_t k) {
  const auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(k));
  if (!bytes)
    throw Error("row of " + std::to_string(k) + " elements is not a whole number of " +
                std::string(dtype_name(dtype)) + " blocks");
  return static_cast<size_t>(*bytes);
}

}  // namespace

void* Workspace::reserve(size_t bytes) {
  if (bytes > capacity_ || !data_) {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (p == nullptr)
      throw Error("workspace: cannot allocate " + std::to_string(rounded) + " bytes");
    data_.reset(p);
    capacity_ = rounded;
  }
  return data_.get();
}

WeightView packed_weight_view(DType dtype, int64_t rows, int64_t cols, const void* data) {
  return WeightView{dtype, rows, cols, data, row_bytes_of(dtype, cols)};
}

size_t packed_weight_bytes(const WeightView& w) {
  const TypeKernels& kern = type_kernels(w.dtype);
  return kern.packed != nullptr ? kern.packed->bytes(w.rows, w.cols) : 0;
}

int64_t packed_row_group(DType dtype) {
  const TypeKernels& kern = type_kernels(dtype);
  return kern.packed != nullptr ? kern.packed->row_group : 0;
}

void pack_weights(const WeightView& w, void* out) {
  const TypeKernels& kern = type_kernels(w.dtype);
  if (kern.packed == nullptr)
    throw Error("no packed layout for " + std::string(dtype_name(w.dtype)) + " weights");
  kern.packed->pack(w.data, w.row_bytes, w.rows, w.cols, out);
}

size_t activation_bytes(DType weight, int64_t t, int64_t k) {
  const TypeKernels& kern = type_kernels(weight);
  row_bytes_of(weight, k);  // throws unless k is whole blocks of the weight type
  return row_bytes_of(kern.activation, k) * static_cast<size_t>(std::max<int64_t>(t, 1));
}

QuantizedActivations quantize_activations(DType weight, const float* x, int64_t t, int64_t k,
                                          Workspace& ws, const int32_t* input_order) {
  const TypeKernels& kern = type_kernels(weight);
  const size_t row_bytes = row_bytes_of(kern.activation, k);
  auto* data = static_cast<std::byte*>(ws.reserve(activation_bytes(weight, t, k)));
  auto quantize_row = [&](int64_t i) {
    const float* row = x + i * k;
    if (input_order != nullptr) {
      // Grows to the widest row once per thread, then stays.
      thread_local std::vector<float> gathered;
      gathered.resize(static_cast<size_t>(k));
      for (int64_t j = 0; j < k; ++j) gathered[static_cast<size_t>(j)] = row[input_order[j]];
      row = gathered.data();
    }
    kern.quantize_activation(row, data + i * row_bytes, k);
  };
  if (t == 1) {
    quantize_row(0);
  } else {
    parallel_for(t, [&](int64_t i) { quantize_row(i); });
  }
  return QuantizedActivations{kern.activation, t, k, data, row_bytes, input_order};
}

void matmul(const WeightView& w, const QuantizedActivations& a, float* y) {
  matmul(w, a, y, best_isa());
}

void matmul(const WeightView& w, const QuantizedActivations& a, float* y, Isa isa) {
  const TypeKernels& kern = type_kernels(w.dtype, isa);
  if (a.format != kern.activation || a.k != w.cols)
    throw Error("matmul: activations are " + std::to_string(a.k) + " x " +
                std::string(dtype_name(a.format)) + ", weight wants " + std::to_string(w.cols) +
                " x " + std::string(dtype_name(kern.activation)));
  if (a.input_order != w.input_order)
    throw Error("matmul: the activations were gathered in another input order than the weight's");
  const VecDotFn dot = kern.vec_dot;
  const int64_t n = w.rows, k = w.cols, t = a.t;
  const auto* wdata = static_cast<const std::byte*>(w.data);
  const auto* adata = static_cast<const std::byte*>(a.data);
  if (w.packed != nullptr && kern.packed != nullptr) {
    kern.packed->matmul(k, w.packed, n, adata, a.row_bytes, t, y, static_cast<size_t>(n));
    return;
  }
  if (t == 1) {
    read_in_streams<kGemvStreams>(n, [&](const int64_t* rows, int count, int /*member*/) {
      if (count == kGemvStreams && kern.vec_dot_rows != nullptr) {  // the streams side by side
        const void* w_rows[kGemvStreams];
        float out[kGemvStreams];
        for (int s = 0; s < kGemvStreams; ++s) w_rows[s] = wdata + rows[s] * w.row_bytes;
        kern.vec_dot_rows(k, w_rows, adata, out);
        for (int s = 0; s < kGemvStreams; ++s) y[rows[s]] = out[s];
      } else {
        for (int s = 0; s < count; ++s) y[rows[s]] = dot(k, wdata + rows[s] * w.row_bytes, adata);
      }
    });
    return;
  }
  if (kern.gemm != nullptr) {
    kern.gemm(k, wdata, w.row_bytes, n, adata, a.row_bytes, t, y, static_cast<size_t>(n));
    return;
  }
  if (kern.gemm_tile != nullptr) {
    const int64_t token_tiles = (t + kTileTokens - 1) / kTileTokens;
    // Few tiles (a small batch, a small matrix) split unevenly over the threads: halve the
    // rows per tile until there are enough. Any split gives the same bits.
    int64_t tile_rows = kTileRows;
    while (tile_rows > kMinTileRows &&
           (n + tile_rows - 1) / tile_rows * token_tiles < 8 * team_threads())
      tile_rows /= 2;
    const int64_t row_chunks = (n + tile_rows - 1) / tile_rows;
    // As below: a thread's consecutive iterations share one chunk of rows.
    parallel_for(row_chunks * token_tiles, [&](int64_t it) {
      const int64_t r0 = it / token_tiles * tile_rows, r1 = std::min(n, r0 + tile_rows);
      const int64_t t0 = it % token_tiles * kTileTokens, t1 = std::min(t, t0 + kTileTokens);
      kern.gemm_tile(k, wdata + r0 * w.row_bytes, w.row_bytes, r1 - r0, adata + t0 * a.row_bytes,
                     a.row_bytes, t1 - t0, y + t0 * n + r0, static_cast<size_t>(n));
    });
    return;
  }
  const int64_t row_chunks = (n + kRowChunk - 1) / kRowChunk;
  const int64_t token_tiles = (t + kTokenTile - 1) / kTokenTile;
  // Consecutive iterations are the token tiles of one row chunk, so a thread's static share
  // keeps reusing the chunk it has in cache.
  parallel_for(row_chunks * token_tiles, [&](int64_t it) {
    const int64_t r0 = it / token_tiles * kRowChunk, r1 = std::min(n, r0 + kRowChunk);
    const int64_t t0 = it % token_tiles * kTokenTile, t1 = std::min(t, t0 + kTokenTile);
    for (int64_t i = t0; i < t1; ++i) {
      const std::byte* arow = adata + i * a.row_bytes;
      float* yrow = y + i * n;
      for (int64_t r = r0; r < r1; ++r) yrow[r] = dot(k, wdata + r * w.row_bytes, arow);
    }
  });
}

void matmul(const WeightView& w, const float* x, int64_t t, float* y, Workspace& ws) {
  matmul(w, quantize_activations(w.dtype, x, t, w.cols, ws, w.input_order), y);
}

void matmul_reference(const WeightView& w, const float* x, int64_t t, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.dtype, static_cast<const std::byte*>(w.data) + r * w.row_bytes, row.data(),
                   w.cols);
    for (int64_t i = 0; i < t; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < w.cols; ++j) {
        const int64_t input = w.input_order != nullptr ? w.input_order[j] : j;
        sum += static_cast<double>(row[j]) * x[i * w.cols + input];
      }
      y[i * w.rows + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace tern::cpu
