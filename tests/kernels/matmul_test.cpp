// matmul: batch invariance (bit-identical rows for any T and thread count), agreement with
// the dequantized float reference, shared activations, workspace reuse, errors.
#include "tern/kernels/cpu/matmul.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/lattice_fit.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

using testing::gaussian;

// N = 40 is not a multiple of the GEMM's row chunk; T = 64 spans two token tiles.
constexpr int64_t kN = 40, kK = 512;

struct Weights {
  std::vector<uint8_t> data;
  WeightView view;
};

Weights make_weights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  Weights w;
  const size_t row_bytes = *dtype_bytes(dtype, k);
  w.data.resize(row_bytes * n);
  // The lattice types take random blocks (every sign and scale pattern, and no grid search per
  // row); the others Gaussian rows quantized.
  if (has_quantizer(dtype) && !has_lattice_fit(dtype)) {
    const std::vector<float> f = gaussian(n * k, seed, 0.05f);
    for (int64_t r = 0; r < n; ++r)
      quantize_row(dtype, f.data() + r * k, w.data.data() + r * row_bytes, k);
  } else {
    w.data = testing::random_blocks(dtype, n * k, seed);
  }
  w.view = packed_weight_view(dtype, n, k, w.data.data());
  return w;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(Matmul, BatchInvariance) {
  const int64_t t_max = 64;
  const std::vector<float> x = gaussian(t_max * kK, 11);
  for (DType dtype : {DType::F32,   DType::F16,       DType::BF16,    DType::Q8_0,  DType::Q4_0,
                      DType::Q4_1,  DType::Q2_K,      DType::Q3_K,    DType::Q5_K,  DType::Q4_K,
                      DType::Q6_K,  DType::IQ4_NL,    DType::IQ4_XS,  DType::MXFP4, DType::IQ3_XXS,
                      DType::IQ3_S, DType::IQ2_XXS,   DType::IQ2_XS,  DType::IQ2_S, DType::IQ1_S,
                      DType::IQ1_M, DType::INT4_G128, DType::INT8_G64}) {
    const Weights w = make_weights(dtype, kN, kK, 5);
    Workspace ws;
    // Each row alone, one thread: the reference every other shape must reproduce bit for bit.
    std::vector<float> alone(t_max * kN);
    {
      ThreadCount one(1);
      for (int64_t i = 0; i < t_max; ++i)
        matmul(w.view, x.data() + i * kK, 1, alone.data() + i * kN, ws);
    }
    for (int threads : {1, 2}) {
      ThreadCount tc(threads);
      for (int64_t t : {1, 3, 17, 64}) {
        std::vector<float> y(t * kN);
        matmul(w.view, x.data(), t, y.data(), ws);
        EXPECT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
            << dtype_name(dtype) << " T=" << t << " threads=" << threads;
        // The same rows at an offset in a batch: row i of a batch starting at row 5.
        if (t + 5 <= t_max) {
          matmul(w.view, x.data() + 5 * kK, t, y.data(), ws);
          EXPECT_EQ(std::memcmp(y.data(), alone.data() + 5 * kN, y.size() * sizeof(float)), 0)
              << dtype_name(dtype) << " offset T=" << t << " threads=" << threads;
        }
      }
    }
  }
}

// Q2_K, Q3_K, the IQ4 types, MXFP4 and the IQ3, IQ2 and IQ1 types: every output of a matmul, at
// 1…40 tokens and 1–3 threads, on every level this CPU runs that has its own kernels for the type,
// is the bits of the scalar twin's dot of its row (their kernels meet the floats in the scalar
// order).
TEST(Matmul, LowBitTypesAreTheScalarTwinAtEveryShape) {
  const int64_t t_max = 40;
  // The GEMV's group of 4 super-blocks and one more; IQ4_NL, MXFP4: 8 chains twice and 5 blocks.
  const struct {
    DType dtype;
    int64_t k;
  } cases[] = {{DType::Q2_K, 256 * 5},   {DType::Q3_K, 256 * 5},    {DType::IQ4_XS, 256 * 5},
               {DType::IQ4_NL, 32 * 21}, {DType::MXFP4, 32 * 21},   {DType::IQ3_XXS, 256 * 5},
               {DType::IQ3_S, 256 * 5},  {DType::IQ2_XXS, 256 * 5}, {DType::IQ2_XS, 256 * 5},
               {DType::IQ2_S, 256 * 5},  {DType::IQ1_S, 256 * 5},   {DType::IQ1_M, 256 * 5}};
  for (const auto& c : cases) {
    const int64_t k = c.k;
    const std::vector<float> x = gaussian(t_max * k, 31);
    const Weights w = make_weights(c.dtype, kN, k, 32);
    const DType activation = type_kernels(c.dtype, Isa::Scalar).activation;
    const size_t row_bytes = *dtype_bytes(c.dtype, k), a_bytes = *dtype_bytes(activation, k);
    std::vector<uint8_t> a(a_bytes * t_max);
    for (int64_t i = 0; i < t_max; ++i)
      quantize_row(activation, x.data() + i * k, &a[i * a_bytes], k);
    std::vector<float> want(t_max * kN);
    for (int64_t i = 0; i < t_max; ++i)
      for (int64_t r = 0; r < kN; ++r)
        want[i * kN + r] = scalar_vec_dot(c.dtype)(k, &w.data[r * row_bytes], &a[i * a_bytes]);
    Workspace ws;
    for (int threads : {1, 2, 3}) {
      ThreadCount tc(threads);
      for (int64_t t = 1; t <= t_max; ++t) {
        std::vector<float> y(t * kN);
        matmul(w.view, x.data(), t, y.data(), ws);
        ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
            << dtype_name(c.dtype) << " T=" << t << " threads=" << threads;
        // Each level with its own kernels for the type, on the same activations.
        for (Isa isa : isa_levels()) {
          if (!isa_supported(isa) || isa == Isa::Scalar || kernel_row(c.dtype, isa).from != isa)
            continue;
          const QuantizedActivations qa{
              .format = activation, .t = t, .k = k, .data = a.data(), .row_bytes = a_bytes};
          matmul(w.view, qa, y.data(), isa);
          ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
              << dtype_name(c.dtype) << " " << isa_name(isa) << " T=" << t
              << " threads=" << threads;
        }
      }
    }
  }
}

// The types with GEMM tile kernels, on shapes with ragged edges everywhere: rows not a
// multiple of a micro-kernel's rows nor of the driver's row chunk, tokens not a multiple of
// a micro-kernel's tokens nor of the token tile, and rows with blocks after the last full
// group of blocks (or no full group at all).
struct TileCase {
  DType dtype;
  int64_t k;
};
std::vector<TileCase> tile_cases() {
  std::vector<TileCase> cases;
  for (DType dtype : {DType::Q4_0, DType::Q5_0, DType::Q8_0})
    for (int64_t k : {int64_t{32 * 21}, int64_t{32 * 10}, int64_t{32 * 48}})
      cases.push_back({dtype, k});
  for (DType dtype : {DType::Q4_K, DType::Q6_K, DType::Q5_K})
    // 17 super-blocks: more than one per chain of the AMX level's 16, in a tree that tells
    // the chains apart; 12: its GEMV's group of 8 and group of 4.
    for (int64_t k : {int64_t{256}, int64_t{256 * 3}, int64_t{256 * 12}, int64_t{256 * 17}})
      cases.push_back({dtype, k});
  // Q2_K, Q3_K, IQ4_XS and the IQ3, IQ2 and IQ1 types: a tile's only shape dependence is the
  // token edge (their sums meet the floats per super-block), so two lengths suffice.
  for (DType dtype : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S,
                      DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M})
    for (int64_t k : {int64_t{256}, int64_t{256 * 5}}) cases.push_back({dtype, k});
  // IQ4_NL and MXFP4: fewer blocks than their 8 chains, and chains used twice with a tail.
  for (DType dtype : {DType::IQ4_NL, DType::MXFP4})
    for (int64_t k : {int64_t{32 * 5}, int64_t{32 * 21}}) cases.push_back({dtype, k});
  // The affine groups: 21 and 48 blocks of 32 (chains used more than once, or not all); 5 and
  // 20 groups of 128, 10 and 40 of 64.
  for (DType dtype : {DType::INT4_G32, DType::INT8_G32})
    for (int64_t k : {int64_t{32 * 21}, int64_t{32 * 48}}) cases.push_back({dtype, k});
  for (DType dtype : {DType::INT4_G64, DType::INT8_G64, DType::INT4_G128, DType::INT8_G128})
    for (int64_t k : {int64_t{128 * 5}, int64_t{128 * 20}}) cases.push_back({dtype, k});
  // Float rows: 4-chunk steps, single chunks and a masked tail.
  for (DType dtype : {DType::F16, DType::F32, DType::BF16})
    for (int64_t k : {int64_t{32 * 21}, int64_t{32 * 48}, int64_t{149}})
      cases.push_back({dtype, k});
  // F16's two accumulators: a last chunk alone (whole or short) after the 32-element steps.
  for (int64_t k : {int64_t{32 * 21 + 16}, int64_t{32 * 21 + 7}}) cases.push_back({DType::F16, k});
  return cases;
}

// Each output element of a tile is bit for bit its vec_dot, for every ISA that has a tile, at
// token counts on both sides of the AMX level's few-token kernel (below 16) and its tiles.
TEST(Matmul, GemmTileIsVecDotPerElement) {
  const int64_t rows = 101;
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    for (const TileCase& c : tile_cases()) {
      const TypeKernels& kern = type_kernels(c.dtype, isa);
      const GemmTileFn tile = kern.gemm != nullptr ? kern.gemm : kern.gemm_tile;
      if (tile == nullptr) continue;
      const Weights w = make_weights(c.dtype, rows, c.k, 21);
      // 1 and 5: a group of 4 tokens' ragged edge of one token alone.
      for (int64_t tokens : {1, 2, 4, 5, 7, 15, 16, 67}) {
        const std::vector<float> x = gaussian(tokens * c.k, 22);
        Workspace ws;
        const QuantizedActivations a = quantize_activations(c.dtype, x.data(), tokens, c.k, ws);
        // y with a row stride wider than the tile, to catch writes outside it.
        const size_t ldy = rows + 7;
        std::vector<float> y(tokens * ldy, -1.0f);
        tile(c.k, w.view.data, w.view.row_bytes, rows, a.data, a.row_bytes, tokens, y.data(), ldy);
        int mismatches = 0;
        for (int64_t i = 0; i < tokens; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want =
                kern.vec_dot(c.k, static_cast<const uint8_t*>(w.view.data) + r * w.view.row_bytes,
                             static_cast<const uint8_t*>(a.data) + i * a.row_bytes);
            mismatches += std::memcmp(&want, &y[i * ldy + r], sizeof want) != 0;
          }
          for (size_t r = rows; r < ldy; ++r) mismatches += y[i * ldy + r] != -1.0f;
        }
        EXPECT_EQ(mismatches, 0) << dtype_name(c.dtype) << " k=" << c.k << " T=" << tokens << " "
                                 << isa_name(isa);
      }
    }
  }
}

// Through matmul: T = 1 (the GEMV) and every T and thread count give the same bits, and all
// agree with the scalar reference dot up to float summation order.
void expect_tiles_batch_invariant(const TileCase& c, int64_t rows, Isa isa) {
  // A level that runs a lower level's kernels for the type was tested there.
  if (isa != Isa::Scalar && kernel_row(c.dtype, isa).from != isa) return;
  const int64_t t_max = 67;
  const Weights w = make_weights(c.dtype, rows, c.k, 23);
  const std::vector<float> x = gaussian(t_max * c.k, 24);
  Workspace ws;
  const QuantizedActivations a = quantize_activations(c.dtype, x.data(), t_max, c.k, ws);
  const std::string where = std::string(dtype_name(c.dtype)) + " " + isa_name(isa) +
                            " k=" + std::to_string(c.k) + " rows=" + std::to_string(rows);
  // Row i of the activations alone.
  auto rows_from = [&](int64_t i, int64_t t) {
    QuantizedActivations part = a;
    part.t = t;
    part.data = static_cast<const uint8_t*>(a.data) + i * a.row_bytes;
    return part;
  };
  std::vector<float> alone(t_max * rows);
  {
    ThreadCount one(1);
    for (int64_t i = 0; i < t_max; ++i)
      matmul(w.view, rows_from(i, 1), alone.data() + i * rows, isa);
  }
  // The scalar reference dot of every element.
  const TypeKernels& scalar = type_kernels(c.dtype, Isa::Scalar);
  std::vector<float> ref(t_max * rows);
  for (int64_t i = 0; i < t_max; ++i)
    for (int64_t r = 0; r < rows; ++r)
      ref[i * rows + r] =
          scalar.vec_dot(c.k, static_cast<const uint8_t*>(w.view.data) + r * w.view.row_bytes,
                         static_cast<const uint8_t*>(a.data) + i * a.row_bytes);
  EXPECT_LE(testing::relative_rms_error(alone, ref), 1e-5) << where;
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    for (int64_t t :
         {2, 3, 4, 5, 7, 8, 15, 16, 64, 67}) {  // 2-15: the AMX level's few-token kernels
      std::vector<float> y(t * rows);
      matmul(w.view, rows_from(0, t), y.data(), isa);
      EXPECT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
          << where << " T=" << t << " threads=" << threads;
      // The same rows in the middle of a batch.
      if (t + 3 <= t_max) {
        matmul(w.view, rows_from(3, t), y.data(), isa);
        EXPECT_EQ(std::memcmp(y.data(), alone.data() + 3 * rows, y.size() * sizeof(float)), 0)
            << where << " from row 3, T=" << t << " threads=" << threads;
      }
    }
  }
}

// The level's packed copy of the weights gives every element the same bits as the rows read
// in place, for any T (1: the GEMV; up to 15 one pass of the dots, to 26 several; beyond, the
// tiles) and thread count.
void expect_packed_same_bits(const TileCase& c, int64_t rows, Isa isa) {
  const TypeKernels& kern = type_kernels(c.dtype, isa);
  if (kern.packed == nullptr) return;
  const int64_t t_max = 40;
  const Weights w = make_weights(c.dtype, rows, c.k, 25);
  const size_t bytes = kern.packed->bytes(rows, c.k);
  std::unique_ptr<std::byte, decltype(&std::free)> buffer(
      static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free);
  kern.packed->pack(w.view.data, w.view.row_bytes, rows, c.k, buffer.get());
  WeightView packed = w.view;
  packed.packed = buffer.get();
  const std::vector<float> x = gaussian(t_max * c.k, 26);
  Workspace ws;
  const QuantizedActivations a = quantize_activations(c.dtype, x.data(), t_max, c.k, ws);
  const std::string where = std::string(dtype_name(c.dtype)) + " " + isa_name(isa) +
                            " k=" + std::to_string(c.k) + " rows=" + std::to_string(rows);
  std::vector<float> want(t_max * rows);
  for (int64_t i = 0; i < t_max; ++i)
    for (int64_t r = 0; r < rows; ++r)
      want[i * rows + r] =
          kern.vec_dot(c.k, static_cast<const uint8_t*>(w.view.data) + r * w.view.row_bytes,
                       static_cast<const uint8_t*>(a.data) + i * a.row_bytes);
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    for (int64_t t : {1, 2, 7, 15, 16, 17, 26, 27, 33, 40}) {
      QuantizedActivations part = a;
      part.t = t;
      std::vector<float> y(t * rows);
      matmul(packed, part, y.data(), isa);
      EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
          << where << " packed, T=" << t << " threads=" << threads;
    }
  }
}

TEST(Matmul, PackedWeightsGiveTheSameBits) {
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    for (const TileCase& c : tile_cases())
      for (int64_t rows : {1, 16, 37, 101}) expect_packed_same_bits(c, rows, isa);
  }
}

TEST(Matmul, GemmTilesBatchInvariantAndMatchScalar) {
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    for (const TileCase& c : tile_cases()) expect_tiles_batch_invariant(c, 101, isa);
    // Enough rows for the driver's largest tiles (smaller ones are taken when there are few).
    for (DType dtype : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16})
      expect_tiles_batch_invariant({dtype, 512}, 430, isa);
  }
}

// Against dequantized weights times unquantized activations: what remains is the
// activation quantization (8-bit: < 1%; bf16 rounding; none for F32 and F16, whose
// activations are f32).
TEST(Matmul, MatchesReference) {
  const int64_t t = 5;
  const std::vector<float> x = gaussian(t * kK, 12);
  const struct {
    DType dtype;
    double bound;
  } cases[] = {{DType::F32, 1e-6},       {DType::F16, 1e-6},         {DType::BF16, 6e-3},
               {DType::Q8_0, 1.5e-2},    {DType::Q4_0, 1.5e-2},      {DType::Q5_1, 1.5e-2},
               {DType::Q4_K, 1.5e-2},    {DType::Q6_K, 1.5e-2},      {DType::Q2_K, 1.5e-2},
               {DType::Q3_K, 1.5e-2},    {DType::IQ4_NL, 1.5e-2},    {DType::IQ4_XS, 1.5e-2},
               {DType::MXFP4, 1.5e-2},   {DType::INT4_G128, 1.5e-2}, {DType::INT8_G32, 1.5e-2},
               {DType::IQ3_XXS, 1.5e-2}, {DType::IQ3_S, 1.5e-2},     {DType::IQ2_XXS, 1.5e-2},
               {DType::IQ2_XS, 1.5e-2},  {DType::IQ2_S, 1.5e-2},     {DType::IQ1_S, 1.5e-2},
               {DType::IQ1_M, 1.5e-2}};
  for (const auto& c : cases) {
    const Weights w = make_weights(c.dtype, kN, kK, 6);
    Workspace ws;
    std::vector<float> y(t * kN), ref(t * kN);
    matmul(w.view, x.data(), t, y.data(), ws);
    matmul_reference(w.view, x.data(), t, ref.data());
    EXPECT_LE(testing::relative_rms_error(y, ref), c.bound) << dtype_name(c.dtype);
  }
}

TEST(Matmul, SharedActivationsAndStridedRows) {
  const int64_t t = 3;
  const std::vector<float> x = gaussian(t * kK, 13);
  const Weights q4 = make_weights(DType::Q4_K, kN, kK, 7),
                q6 = make_weights(DType::Q6_K, 24, kK, 8);
  Workspace ws, ws2;
  std::vector<float> y4(t * kN), y6(t * 24), want4(t * kN), want6(t * 24);
  matmul(q4.view, x.data(), t, want4.data(), ws2);
  matmul(q6.view, x.data(), t, want6.data(), ws2);
  const QuantizedActivations a = quantize_activations(DType::Q4_K, x.data(), t, kK, ws);
  matmul(q4.view, a, y4.data());
  matmul(q6.view, a, y6.data());  // Q6_K takes the same Q8_K activations
  EXPECT_EQ(y4, want4);
  EXPECT_EQ(y6, want6);
  EXPECT_THROW(matmul(make_weights(DType::Q8_0, 4, kK, 9).view, a, y4.data()),
               Error);  // wants Q8_0

  // Rows padded apart (row_bytes larger than packed): same results.
  const size_t packed = q4.view.row_bytes, padded = packed + 64;
  std::vector<uint8_t> spread(padded * kN);
  for (int64_t r = 0; r < kN; ++r)
    std::memcpy(spread.data() + r * padded, q4.data.data() + r * packed, packed);
  WeightView view = q4.view;
  view.data = spread.data();
  view.row_bytes = padded;
  matmul(view, x.data(), t, y4.data(), ws);
  EXPECT_EQ(y4, want4);
}

TEST(Matmul, WorkspaceIsReusedAfterWarmUp) {
  const Weights w = make_weights(DType::Q8_0, kN, kK, 10);
  const std::vector<float> x = gaussian(17 * kK, 14);
  std::vector<float> y(17 * kN);
  Workspace ws;
  matmul(w.view, x.data(), 17, y.data(), ws);
  const void* buffer = ws.reserve(0);
  const size_t capacity = ws.capacity();
  for (int64_t t : {1, 5, 17}) matmul(w.view, x.data(), t, y.data(), ws);
  EXPECT_EQ(ws.reserve(0), buffer);
  EXPECT_EQ(ws.capacity(), capacity);
}

TEST(Matmul, Errors) {
  Workspace ws;
  std::vector<float> x(64), y(64);
  const std::vector<uint8_t> data(1024);
  EXPECT_THROW(matmul(WeightView{DType::Q4_K, 1, 64, data.data(), 64}, x.data(), 1, y.data(), ws),
               Error);
  EXPECT_THROW(matmul(WeightView{DType::Q8_K, 1, 256, data.data(), 292}, x.data(), 1, y.data(), ws),
               Error);  // an activation format only
  EXPECT_THROW(packed_weight_view(DType::Q4_0, 2, 33, data.data()), Error);
}

}  // namespace
}  // namespace tern::cpu
