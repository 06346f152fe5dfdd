// y = x · Wᵀ for one weight matrix of any supported type: the activations are quantized once
// per row into the weight type's activation format, then every output element is one vec_dot
// call or comes from a GEMM tile kernel with exactly that vec_dot's arithmetic, so a row's
// result is bit-identical for any batch size and any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "tern/core/dtype.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// A weight matrix in place (mmapped GGUF tensor, safetensors buffer, …).
struct WeightView {
  DType dtype = DType::F32;
  int64_t rows = 0;            // N: output features
  int64_t cols = 0;            // K: input features, a multiple of the type's block size
  const void* data = nullptr;  // [N, row_bytes]
  size_t row_bytes = 0;        // bytes from one row to the next (≥ dtype_bytes(dtype, K))
  // The same matrix rearranged for the best ISA's kernels (type_kernels(dtype).packed, made
  // by pack_weights), or nullptr. matmul reads it instead of `data` where the level it runs
  // with has packed kernels.
  const void* packed = nullptr;
  // Act-order checkpoints (GPTQ desc_act): the weight's input j is x[input_order[j]], a
  // permutation of [0, K) that put each quantization group's inputs side by side; nullptr: x
  // as it is. The activations are gathered once, as they are quantized.
  const int32_t* input_order = nullptr;
};

// Bytes of `w`'s packed copy for the best ISA's kernels; 0 when they read its rows in place.
size_t packed_weight_bytes(const WeightView& w);
// Rows per group of the best ISA's packed layout for `dtype`; 0 when it has none. Matrices of
// one type and width whose rows are multiples of it pack back to back into one matrix.
int64_t packed_row_group(DType dtype);
// Packs `w` into `out` (packed_weight_bytes(w) bytes, 64-byte aligned), threads inside.
void pack_weights(const WeightView& w, void* out);

// Scratch memory reused across calls: grows, never shrinks, so after the first call of each
// shape the hot path does not allocate. One per thread of the engine loop (not thread-safe).
class Workspace {
 public:
  // A 64-byte aligned buffer of at least `bytes`; what it held before may be lost.
  void* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t capacity_ = 0;
};

// Activation rows quantized for one weight type's dot (Q8_0, Q8_1, Q8_K, BF16 or F32),
// so inputs shared by several weights (q/k/v, gate/up) are quantized once. Points into the
// Workspace it was made in: valid until that workspace is next used.
struct QuantizedActivations {
  DType format = DType::F32;
  int64_t t = 0;               // rows (tokens)
  int64_t k = 0;               // elements per row
  const void* data = nullptr;  // [t, row_bytes]
  size_t row_bytes = 0;
  const int32_t* input_order = nullptr;  // the order the rows were gathered in (WeightView's)
};

// Bytes of the workspace quantize_activations takes for t rows of k elements of the input of
// a `weight` matrix: t rows of its activation format. Throws as quantize_activations does.
size_t activation_bytes(DType weight, int64_t t, int64_t k);

// x: [t, k] floats, each row taken in `input_order` (a WeightView's; nullptr: as it is).
// Throws tern::Error when the weight type has no kernels or k is not a whole number of its
// blocks.
QuantizedActivations quantize_activations(DType weight, const float* x, int64_t t, int64_t k,
                                          Workspace& ws, const int32_t* input_order = nullptr);

// y: [a.t, w.rows]. Every weight whose activation format is a.format and whose input order is
// a.input_order takes the same `a`.
// With the kernels of the best ISA, or of `isa` (tests: every level this CPU runs).
void matmul(const WeightView& w, const QuantizedActivations& a, float* y);
void matmul(const WeightView& w, const QuantizedActivations& a, float* y, Isa isa);

// x: [t, w.cols], y: [t, w.rows]. quantize_activations + matmul.
void matmul(const WeightView& w, const float* x, int64_t t, float* y, Workspace& ws);

// For tests: dequantized weights times the float activations (not quantized), accumulated in
// double. x: [t, w.cols], y: [t, w.rows].
void matmul_reference(const WeightView& w, const float* x, int64_t t, float* y);

// A view of `data` as N rows of K elements of `dtype`, packed (row_bytes from the type).
WeightView packed_weight_view(DType dtype, int64_t rows, int64_t cols, const void* data);

}  // namespace tern::cpu
