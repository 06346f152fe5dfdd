#include "tern/kernels/cpu/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/kv/kv_quant.h"

namespace tern::cpu {
namespace {

KvCacheConfig small_config(KvDtype dtype) {
  KvCacheConfig c;
  c.num_layers = 2;
  c.num_blocks = 5;
  c.block_size = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.dtype = dtype;
  return c;
}

TEST(KvCache, Sizes) {
  // Qwen3-0.6B: 28 layers, 8 kv heads, head_dim 128, f16: 2 * 28 * 1024 * 2 = 114688 B/token.
  KvCacheConfig c;
  c.num_layers = 28;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  EXPECT_EQ(c.bytes_per_token(), 114688);
  EXPECT_EQ(c.bytes_per_block(), 114688 * 16);
  EXPECT_EQ(kv_cache_blocks_for_budget(c, uint64_t{1} << 30), 585);  // 1 GiB
  EXPECT_EQ(kv_cache_blocks_for_budget(c, 1000), 0);
  c.dtype = KvDtype::F32;
  EXPECT_EQ(c.bytes_per_token(), 2 * 114688);
}

// The 8-bit types: 128 bytes of codes and a 2-byte scale per token and kv head, so the same
// memory holds 256 / 130 = 1.97 times the tokens of f16.
TEST(KvCache, EightBitTypesHoldAboutTwiceTheTokens) {
  KvCacheConfig c;
  c.num_layers = 28;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  const uint64_t budget = uint64_t{4} << 30;
  const int64_t f16_blocks = kv_cache_blocks_for_budget(c, budget);
  for (KvDtype dtype : {KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    c.dtype = dtype;
    EXPECT_EQ(c.bytes_per_token(), 2 * 28 * 8 * 130) << kv_dtype_name(dtype);
    const int64_t blocks = kv_cache_blocks_for_budget(c, budget);
    EXPECT_EQ(blocks, static_cast<int64_t>((budget - 4 * 28 * 64) / (16 * 58240)));
    EXPECT_GE(static_cast<double>(blocks) / static_cast<double>(f16_blocks), 1.96);
  }
  // And a real allocation of that many blocks of a small shape stays inside its budget.
  KvCacheConfig small = small_config(KvDtype::Int8);
  const uint64_t small_budget = 10000;
  small.num_blocks = kv_cache_blocks_for_budget(small, small_budget);
  EXPECT_LE(KvCache(small).total_bytes(), small_budget);
}

TEST(KvCache, EightBitRowsRoundTripWithinTheirStepAndKeepTheirScales) {
  for (KvDtype dtype : {KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    KvCacheConfig c = small_config(dtype);
    KvCache cache(c);
    const int64_t row = c.row_elems();
    std::vector<float> k(2 * row), v(2 * row);
    for (int64_t i = 0; i < 2 * row; ++i) {
      k[i] = std::sin(0.7f * static_cast<float>(i)) * (i % 8 == 3 ? 40.0f : 1.0f);
      v[i] = std::cos(0.3f * static_cast<float>(i));
    }
    const std::vector<int64_t> slots{9, 2};
    cache.write(1, k.data(), v.data(), slots);
    std::vector<float> kr(row), vr(row);
    for (int t = 0; t < 2; ++t) {
      cache.read_slot(1, slots[t], kr.data(), vr.data());
      for (int h = 0; h < c.n_kv_heads; ++h) {
        float amax = 0;
        for (int d = 0; d < c.head_dim; ++d)
          amax = std::max(amax, std::fabs(k[t * row + h * c.head_dim + d]));
        // The head's scale sits at [slot, head] of the layer's scale array.
        const uint16_t scale = cache.k_scales(1)[slots[t] * c.n_kv_heads + h];
        // It is the head quantizer's: max|x| / top, or for short FP8 heads the best scale of
        // an octave above that.
        const float top = dtype == KvDtype::Int8      ? 127.0f
                          : dtype == KvDtype::Fp8E4M3 ? 448.0f
                                                      : 57344.0f;
        std::vector<uint8_t> codes(static_cast<size_t>(c.head_dim));
        uint16_t expected = 0;
        quantize_kv_head(dtype, &k[t * row + h * c.head_dim], c.head_dim, codes.data(), &expected);
        EXPECT_EQ(scale, expected);
        if (dtype == KvDtype::Int8 || c.head_dim >= 128) {
          EXPECT_EQ(scale, f32_to_f16(amax / top));
        }
        EXPECT_GE(f16_to_f32(scale), f16_to_f32(f32_to_f16(amax / top)));
        for (int d = 0; d < c.head_dim; ++d) {
          const int64_t i = t * row + h * c.head_dim + d;
          const float bound = dtype == KvDtype::Int8      ? 0.51f * f16_to_f32(scale)
                              : dtype == KvDtype::Fp8E4M3 ? std::fabs(k[i]) / 15 + 1e-4f
                                                          : std::fabs(k[i]) / 7 + 1e-4f;
          ASSERT_NEAR(kr[h * c.head_dim + d], k[i], bound) << kv_dtype_name(dtype) << " " << i;
        }
      }
    }
    // copy_block moves the scales with the codes: slot 9 is block 2, offset 1.
    cache.copy_block(2, 4);
    std::vector<float> kc(row), vc(row);
    cache.read_slot(1, 9, kr.data(), vr.data());
    cache.read_slot(1, 4 * c.block_size + 1, kc.data(), vc.data());
    EXPECT_EQ(kc, kr);
    EXPECT_EQ(vc, vr);
    EXPECT_EQ(cache.k_scales(0) == nullptr, false);
  }
  EXPECT_EQ(KvCache(small_config(KvDtype::F16)).k_scales(0), nullptr);
}

TEST(KvCache, AllocationIsAlignedZeroedAndFitsItsBudget) {
  KvCacheConfig c = small_config(KvDtype::F16);
  c.n_kv_heads = 1;
  c.head_dim = 3;  // rows of 6 bytes: the padding to 64 matters
  const uint64_t budget = 5000;
  c.num_blocks = kv_cache_blocks_for_budget(c, budget);
  ASSERT_GT(c.num_blocks, 0);
  KvCache cache(c);
  EXPECT_LE(cache.total_bytes(), budget);
  for (int layer = 0; layer < c.num_layers; ++layer) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.k_data(layer)) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.v_data(layer)) % 64, 0u);
  }
  const auto* bytes = static_cast<const uint8_t*>(cache.k_data(0));
  for (size_t i = 0; i < cache.total_bytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
}

// Rows land at slot = block * block_size + offset of the [num_blocks, block_size, n_kv_heads,
// head_dim] tensor of their layer; -1 skips a token.
TEST(KvCache, WriteThroughSlotMapping) {
  for (KvDtype dtype : {KvDtype::F16, KvDtype::BF16, KvDtype::F32}) {
    KvCacheConfig c = small_config(dtype);
    KvCache cache(c);
    const int64_t row = c.row_elems();
    const int64_t t = 4;
    std::vector<float> k(t * row), v(t * row);
    for (int64_t i = 0; i < t * row; ++i) {
      k[i] = static_cast<float>(i) * 0.5f;  // exact in f16 and bf16 (< 256)
      v[i] = -static_cast<float>(i);
    }
    const std::vector<int64_t> slots{13, -1, 0, 19};  // block 3 offset 1, skip, 0/0, 4/3
    cache.write(1, k.data(), v.data(), slots);
    std::vector<float> kr(row), vr(row);
    for (int64_t i = 0; i < t; ++i) {
      if (slots[i] < 0) continue;
      cache.read_slot(1, slots[i], kr.data(), vr.data());
      for (int64_t j = 0; j < row; ++j) {
        ASSERT_EQ(kr[j], k[i * row + j]) << kv_dtype_name(dtype) << " token " << i;
        ASSERT_EQ(vr[j], v[i * row + j]) << kv_dtype_name(dtype) << " token " << i;
      }
    }
    // The layout itself: token 0 at slot 13, kv head 1, dim 2 of layer 1.
    const size_t elem = (13 * c.n_kv_heads + 1) * c.head_dim + 2;
    const float want = k[1 * c.head_dim + 2];
    if (dtype == KvDtype::F16) {
      EXPECT_EQ(static_cast<const uint16_t*>(cache.k_data(1))[elem], f32_to_f16(want));
    } else if (dtype == KvDtype::BF16) {
      EXPECT_EQ(static_cast<const uint16_t*>(cache.k_data(1))[elem], f32_to_bf16(want));
    } else {
      EXPECT_EQ(static_cast<const float*>(cache.k_data(1))[elem], want);
    }
    // Layer 0 and the skipped token's would-be slots stay zero.
    cache.read_slot(0, 13, kr.data(), vr.data());
    for (int64_t j = 0; j < row; ++j) ASSERT_EQ(kr[j], 0.0f);
    cache.read_slot(1, 1, kr.data(), vr.data());
    for (int64_t j = 0; j < row; ++j) ASSERT_EQ(vr[j], 0.0f);
  }
}

TEST(KvCache, F16RoundsToNearest) {
  KvCache cache(small_config(KvDtype::F16));
  const int64_t row = cache.config().row_elems();
  std::vector<float> k(row, 1.0f + 1.0f / 2048), v(row, 1.0f + 3.0f / 2048), kr(row), vr(row);
  k[1] = 3.14159265f;
  const int64_t slot[] = {7};
  cache.write(0, k.data(), v.data(), slot);
  cache.read_slot(0, 7, kr.data(), vr.data());
  // Half an f16 ulp above 1 and above 1 + 2^-10: ties go to the even mantissa.
  EXPECT_EQ(kr[0], 1.0f);
  EXPECT_EQ(vr[0], 1.0f + 2.0f / 1024);
  EXPECT_EQ(kr[1], 3.140625f);
}

TEST(KvCache, ChecksConfigAndSlots) {
  KvCacheConfig c = small_config(KvDtype::F16);
  KvCache cache(c);
  EXPECT_NO_THROW(cache.check_slot_mapping(std::vector<int64_t>{-1, 0, 19}));
  EXPECT_THROW(cache.check_slot_mapping(std::vector<int64_t>{0, 20}), Error);
  EXPECT_THROW(cache.check_slot_mapping(std::vector<int64_t>{-2}), Error);
  KvCacheConfig none = c;
  none.num_blocks = 0;
  EXPECT_THROW(KvCache{none}, Error);
  KvCacheConfig wide = c;
  wide.head_dim = KvCache::kMaxHeadDim + 2;
  EXPECT_THROW(KvCache{wide}, Error);
}

}  // namespace
}  // namespace tern::cpu
