#include "tern/kernels/cpu/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/half.h"

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
