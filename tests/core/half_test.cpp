#include "tern/core/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tern {
namespace {

// Every f16 value converts to f32 and back to itself, by the hardware path and the scalar one.
TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32_scalar(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_bits(f), f32_to_bits(f16_to_f32(static_cast<uint16_t>(h)))) << h;
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_scalar(f), h) << h;
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(Half, F16RoundsToNearestEvenLikeHardware) {
  for (uint32_t i = 0; i < 2000000; ++i) {
    uint32_t bits = i * 2147u + 0x30000000u;  // sweep subnormal..overflow ranges
    float f = bits_to_f32(bits & 0x7fffffffu);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_scalar(f), f32_to_f16(f)) << f;
    ASSERT_EQ(f32_to_f16_scalar(-f), f32_to_f16(-f)) << -f;
  }
}

TEST(Half, Bf16) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // halfway, rounds to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // halfway, rounds up to even
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
}

}  // namespace
}  // namespace tern
