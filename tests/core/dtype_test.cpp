#include "tern/core/dtype.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(DType, GgmlIdsRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    const auto& traits = dtype_traits(dtype);
    EXPECT_EQ(traits.dtype, dtype);
    if (traits.ggml_type >= 0) {
      EXPECT_EQ(dtype_from_ggml(static_cast<uint32_t>(traits.ggml_type)), dtype);
      EXPECT_EQ(ggml_type_name(static_cast<uint32_t>(traits.ggml_type)), traits.name);
    }
    EXPECT_EQ(dtype_from_name(traits.name), dtype);
  }
  EXPECT_EQ(dtype_from_ggml(34), std::nullopt);  // TQ1_0: not supported
  EXPECT_EQ(ggml_type_name(34), "TQ1_0");
  EXPECT_EQ(dtype_from_ggml(16), DType::IQ2_XXS);
}

TEST(DType, BlockBytes) {
  EXPECT_EQ(dtype_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_bytes(DType::Q4_K, 512), 288u);
  EXPECT_EQ(dtype_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(dtype_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_bytes(DType::Q8_0, 33), std::nullopt);    // not a whole block
  EXPECT_EQ(dtype_bytes(DType::F32, ~0ull), std::nullopt);  // overflows
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::BF16);
  EXPECT_EQ(dtype_from_safetensors("Q4_0"), std::nullopt);
}

}  // namespace
}  // namespace tern
