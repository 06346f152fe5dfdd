// Quantizers and dequantizers: round-trip error per type on Gaussian data, and hand-built
// blocks (bytes written from ggml's layout description) dequantizing to known values.
#include "tern/blocks/quantize_row.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/core/error.h"
#include "tern/core/half.h"

namespace tern {
namespace {

using testing::dequantized;
using testing::gaussian;
using testing::quantized;
using testing::relative_rms_error;

struct RoundTripBound {
  DType dtype;
  double max_relative_rms;  // the measured value in the comment, plus ~15%
};

// ‖dequantize(quantize(x)) - x‖ / ‖x‖ on 4096 N(0, 1) values.
TEST(Quantize, RoundTripErrorPerType) {
  const RoundTripBound bounds[] = {
      {DType::F32, 0.0},           {DType::F16, 2.4e-4},  // measured 2.09e-4
      {DType::BF16, 1.9e-3},                              // 1.66e-3
      {DType::Q8_0, 6.2e-3},                              // 5.38e-3
      {DType::Q8_1, 6.2e-3},                              // 5.38e-3
      {DType::Q8_K, 7.9e-3},                              // 6.84e-3
      {DType::Q6_K, 1.95e-2},       // 1.70e-2: the step is ~ 1.8σ/32 per 16 values, /√12
      {DType::Q5_1, 4.35e-2},       // 3.78e-2
      {DType::Q5_K, 4.05e-2},       // 3.53e-2
      {DType::Q5_0, 4.95e-2},       // 4.32e-2
      {DType::Q4_K, 8.15e-2},       // 7.11e-2: the step is ~ 4.1σ/15 per 32 values, /√12
      {DType::Q4_1, 8.95e-2},       // 7.79e-2
      {DType::Q4_0, 1.0e-1},        // 8.75e-2
      {DType::IQ4_NL, 8.85e-2},     // 7.72e-2: 16 levels denser near 0
      {DType::IQ4_XS, 8.9e-2},      // 7.75e-2
      {DType::MXFP4, 1.29e-1},      // 1.12e-1: llama.cpp's rule, the scale a power of two
      {DType::Q3_K, 1.65e-1},       // 1.43e-1: 8 levels per 16 values
      {DType::Q2_K, 3.1e-1},        // 2.70e-1: 4 levels per 16 values
      {DType::INT8_G32, 5.5e-3},    // 4.74e-3: GPTQ's round to nearest, 0 in the range
      {DType::INT4_G32, 9.2e-2},    // 8.03e-2
      {DType::INT4_G128, 1.14e-1},  // 9.92e-2
  };
  const std::vector<float> x = gaussian(4096, 1);
  for (const RoundTripBound& b : bounds) {
    const std::vector<uint8_t> q = quantized(b.dtype, x);
    const std::vector<float> y = dequantized(b.dtype, q.data(), 4096);
    const double err = relative_rms_error(y, x);
    EXPECT_LE(err, b.max_relative_rms) << dtype_name(b.dtype);
    // Nor far below it: a bound 4x too loose would let a quantizer regress unnoticed.
    if (b.max_relative_rms > 1e-2) {
      EXPECT_GE(err, b.max_relative_rms / 4) << dtype_name(b.dtype);
    }
  }
}

// Rows with a large dynamic range between blocks, all-zero blocks and one-sided blocks.
TEST(Quantize, EdgeRowsStayBounded) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q3_K,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS,
                  DType::MXFP4, DType::INT4_G32, DType::INT8_G128}) {
    std::vector<float> x = gaussian(512, 2);
    for (int i = 0; i < 32; ++i) x[i] = 0.0f;                      // zero block
    for (int i = 32; i < 64; ++i) x[i] = 1.0f + std::fabs(x[i]);   // all positive
    for (int i = 64; i < 96; ++i) x[i] = -2.0f - std::fabs(x[i]);  // all negative
    for (int i = 256; i < 512; ++i) x[i] *= 1000.0f;               // another scale
    const std::vector<float> y = dequantized(t, quantized(t, x).data(), 512);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << dtype_name(t) << " element " << i;
    double err = 0, ref = 0;
    for (int i = 0; i < 256; ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]);
      ref += x[i] * x[i];
    }
    // MXFP4 measured 0.124: its power-of-two scale leaves a one-sided block's range anywhere in
    // [8, 16) steps of the top level's 12.
    EXPECT_LE(std::sqrt(err / ref), t == DType::MXFP4 ? 0.14 : 0.12) << dtype_name(t);
  }
}

TEST(Quantize, HandBuiltQ4_0) {
  BlockQ4_0 b;
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const std::vector<float> y = dequantized(DType::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;            // low nibbles: elements 0..15
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j + 16;  // high nibbles: elements 16..31
  }
}

// Codes, scale and bias where block_layouts.h says: 4 bits in Q4_0's nibble order per 32
// elements, x = fma(scale, q, bias).
TEST(Quantize, HandBuiltAffineGroups) {
  BlockAffine<4, 64> b4{};
  b4.scale = 0.25f;
  b4.bias = -1.5f;
  for (int sub = 0; sub < 2; ++sub)
    for (int j = 0; j < 16; ++j) b4.qs[16 * sub + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const std::vector<float> y4 = dequantized(DType::INT4_G64, &b4, 64);
  for (int sub = 0; sub < 2; ++sub)
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y4[32 * sub + j], 0.25f * j - 1.5f);
      EXPECT_EQ(y4[32 * sub + 16 + j], 0.25f * (15 - j) - 1.5f);
    }
  BlockAffine<8, 32> b8{};
  b8.scale = -0.5f;
  b8.bias = 3.0f;
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<uint8_t>(8 * j);
  const std::vector<float> y8 = dequantized(DType::INT8_G32, &b8, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y8[j], -0.5f * (8 * j) + 3.0f);
}

// The quantizer makes what a GPTQ or AWQ checkpoint can hold: an f16 scale and an integer
// zero point, bias = −scale · zero.
TEST(Quantize, AffineGroupsAreF16ScalesAndIntegerZeros) {
  const std::vector<float> x = gaussian(1024, 3);
  for (DType t : {DType::INT4_G32, DType::INT4_G128, DType::INT8_G64}) {
    const std::vector<uint8_t> q = quantized(t, x);
    const AffineIntFormat f = *affine_int_format(t);
    const size_t block_bytes = dtype_traits(t).block_bytes;
    for (size_t g = 0; g < 1024 / static_cast<size_t>(f.group); ++g) {
      float scale, bias;
      std::memcpy(&scale, q.data() + g * block_bytes, 4);
      std::memcpy(&bias, q.data() + g * block_bytes + 4, 4);
      EXPECT_EQ(f16_to_f32(f32_to_f16(scale)), scale) << dtype_name(t);
      const float zero = -bias / scale;
      EXPECT_EQ(zero, std::nearbyint(zero)) << dtype_name(t);
      EXPECT_GE(zero, 0.0f);
      EXPECT_LE(zero, static_cast<float>((1 << f.bits) - 1));
    }
  }
}

TEST(Quantize, HandBuiltQ8_0) {
  BlockQ8_0 b[2];
  b[0].d = 0x3400;  // 0.25
  b[1].d = 0xc000;  // -2
  for (int j = 0; j < 32; ++j) b[0].qs[j] = b[1].qs[j] = static_cast<int8_t>(4 * j - 127);
  const std::vector<float> y = dequantized(DType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], (4 * j - 127) * 0.25f);
    EXPECT_EQ(y[32 + j], (4 * j - 127) * -2.0f);
  }
}

// Scales 4-7 and mins 4-7 use their top bits, so every field of the 12-byte packing matters.
TEST(Quantize, HandBuiltQ4_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {5, 6, 7, 8, 20, 36, 49, 62};
  BlockQ4_K b;
  b.d = 0x3c00;     // 1
  b.dmin = 0x3800;  // 0.5
  // bytes 0-3: scale j | (top 2 bits of scale j+4) << 6; bytes 4-7: min j | (top of min j+4) << 6;
  // bytes 8-11: low nibble of scale j+4 | low nibble of min j+4 << 4.
  const uint8_t scales[12] = {0x41, 0x82, 0xc3, 0xc4, 0x45, 0x86,
                              0xc7, 0xc8, 0x41, 0x41, 0x12, 0xef};
  std::memcpy(b.scales, scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::vector<float> y = dequantized(DType::Q4_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    // 64-element chunk c: byte 32c + l holds element 64c + l (low) and 64c + 32 + l (high).
    const int c = e / 64, within = e % 64;
    const uint8_t byte = b.qs[32 * c + within % 32];
    const int q = within < 32 ? byte & 0xf : byte >> 4;
    const int j = e / 32;
    EXPECT_EQ(y[e], 1.0f * sc[j] * q - 0.5f * mn[j]) << "element " << e;
  }
}

TEST(Quantize, HandBuiltQ6_K) {
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 5 + 3) % 64;
  BlockQ6_K b;
  b.d = 0x3000;  // 0.125
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(3 * j - 20);
  // Per half of 128: ql[l] = q[l] | q[l + 64] << 4, ql[l + 32] = q[l + 32] | q[l + 96] << 4,
  // qh[l] = top 2 bits of q[l], q[l + 32], q[l + 64], q[l + 96] at bits 0, 2, 4, 6.
  for (int h = 0; h < 2; ++h) {
    const int* qq = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      b.ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 15) | (qq[l + 64] & 15) << 4);
      b.ql[64 * h + l + 32] = static_cast<uint8_t>((qq[l + 32] & 15) | (qq[l + 96] & 15) << 4);
      b.qh[32 * h + l] = static_cast<uint8_t>(qq[l] >> 4 | (qq[l + 32] >> 4) << 2 |
                                              (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
    }
  }
  const std::vector<float> y = dequantized(DType::Q6_K, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.125f * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q[e] - 32))
        << e;
}

// Q2_K: 2-bit quants, in half h bits 2g..2g+1 of qs[32h + l] are element 128h + 32g + l;
// scales[j] (elements 16j..16j+15) has the scale in its low nibble, the min in its high one.
TEST(Quantize, HandBuiltQ2_K) {
  BlockQ2_K b;
  b.d = 0x3c00;     // 1
  b.dmin = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 3 + e / 7) % 4;
  for (int i = 0; i < 64; ++i) b.qs[i] = 0;
  for (int e = 0; e < 256; ++e)
    b.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e % 128) / 32)));
  const std::vector<float> y = dequantized(DType::Q2_K, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], static_cast<float>((e / 16) * q[e]) - 0.5f * (15 - e / 16)) << e;
}

// Q3_K: 3-bit codes c with value c - 4: the low 2 bits as Q2_K, bit 2 in bit 4h + g of
// hmask[l]. 16 6-bit scales (value - 32) in 12 bytes: low nibbles of scales 0-7 in the low
// nibbles of bytes 0-7, of scales 8-15 in their high nibbles; the top 2 bits of scale j at
// bits 2 (j / 4) of byte 8 + j % 4.
TEST(Quantize, HandBuiltQ3_K) {
  const int sc[16] = {0, 63, 5, 40, 17, 33, 50, 1, 2, 60, 31, 32, 48, 15, 16, 47};
  BlockQ3_K b = {};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) {
    b.scales[j % 8] |= static_cast<uint8_t>((sc[j] & 15) << (j < 8 ? 0 : 4));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((sc[j] >> 4) << (2 * (j / 4)));
  }
  int c[256];
  for (int e = 0; e < 256; ++e) {
    c[e] = (e * 3 + 1 + e / 64) % 8;
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    b.qs[32 * h + l] |= static_cast<uint8_t>((c[e] & 3) << (2 * g));
    b.hmask[l] |= static_cast<uint8_t>((c[e] >> 2) << (4 * h + g));
  }
  const std::vector<float> y = dequantized(DType::Q3_K, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.5f * static_cast<float>((sc[e / 16] - 32) * (c[e] - 4))) << e;
}

// IQ4_NL: element j is d · L[low nibble of qs[j]], element j + 16 d · L[its high nibble], L the
// 16 levels −127 … 113. IQ4_XS: 8 such groups (qs[16j ..]), group j scaled by d · (ls − 32),
// ls's low 4 bits in nibble j % 2 of scales_l[j / 2], its high 2 in bits 2j of scales_h.
TEST(Quantize, HandBuiltIq4) {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  BlockIq4Nl nl;
  nl.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) nl.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> y = dequantized(DType::IQ4_NL, &nl, 32);
  for (int e = 0; e < 32; ++e)
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(levels[e < 16 ? e : 31 - e])) << e;
  const int ls[8] = {0, 63, 32, 17, 48, 5, 40, 31};
  BlockIq4Xs xs = {};
  xs.d = 0x3c00;  // 1
  for (int j = 0; j < 8; ++j) {
    xs.scales_l[j / 2] |= static_cast<uint8_t>((ls[j] & 15) << (4 * (j % 2)));
    xs.scales_h |= static_cast<uint16_t>((ls[j] >> 4) << (2 * j));
  }
  for (int i = 0; i < 128; ++i) xs.qs[i] = static_cast<uint8_t>((i * 7 + 3) % 256);
  y = dequantized(DType::IQ4_XS, &xs, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const uint8_t byte = xs.qs[16 * j + l % 16];
    const int q = l < 16 ? byte & 15 : byte >> 4;
    EXPECT_EQ(y[e], static_cast<float>((ls[j] - 32) * levels[q])) << e;
  }
}

// IQ3_XXS: element e of sub-block j (of 8) is d · (0.5 + ls) · 0.5 · G[qs[8j + e / 4]]'s byte
// e % 4 · ±1, the word at bytes 64 + 4j holding ls (top 4 bits) and, in bits 7l.., the 7 sign
// bits of elements 8l..8l+6; element 8l + 7 is negative when an odd number of those are.
TEST(Quantize, HandBuiltIq3Xxs) {
  BlockIq3Xxs b = {};
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  b.qs[0] = 5;  // G[5] = 0x04040c3e: 62, 12, 4, 4
  uint32_t words[8];
  for (int j = 0; j < 8; ++j) {
    words[j] =
        static_cast<uint32_t>((j * 5 + 3) % 16) << 28 | (((j + 1) * 0x2468ace1u) & 0x0fffffff);
    std::memcpy(b.qs + 64 + 4 * j, &words[j], 4);
  }
  const std::vector<float> y = dequantized(DType::IQ3_XXS, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = (e % 32) / 8, bit = e % 8;
    const uint32_t seven = (words[j] >> (7 * l)) & 127;
    const bool negative = bit < 7 ? (seven >> bit) & 1 : std::popcount(seven) % 2 == 1;
    const int m =
        static_cast<int>((kIq3XxsGrid[b.qs[8 * j + (e % 32) / 4]] >> (8 * (e % 4))) & 255);
    const float scale = 0.5f * (0.5f + static_cast<float>(words[j] >> 28)) * 0.5f;
    EXPECT_EQ(y[e], scale * static_cast<float>(negative ? -m : m)) << e;
  }
  // The first group by hand: word 0's ls 3 and first sign bits 0x61 (elements 0, 5, 6
  // negative, and 7: three of the seven).
  EXPECT_EQ(words[0] >> 28, 3u);
  EXPECT_EQ(words[0] & 127, 0x61u);
  const float s0 = 0.5f * 3.5f * 0.5f;
  const float first[4] = {-62, 12, 4, 4};
  for (int e = 0; e < 4; ++e) EXPECT_EQ(y[e], s0 * first[e]) << e;
  EXPECT_LT(y[7], 0.0f);
  for (int i = 0; i < 128; ++i)
    EXPECT_EQ(kLatticeSigns[i], i | (std::popcount(static_cast<unsigned>(i)) % 2) << 7) << i;
  EXPECT_EQ(*dtype_bytes(DType::IQ3_XXS, 512), 196u);
  EXPECT_EQ(dtype_traits(DType::IQ3_XXS).ggml_type, 18);
}

// IQ3_S: element e of sub-block j is d · (1 + 2 ls) · G[qs[8j + e / 4] | (bit e / 4 of qh[j])
// << 8]'s byte e % 4 · ±1, negative when bit e % 8 of signs[4j + e / 8] is set, ls nibble j % 2
// of scales[j / 2].
TEST(Quantize, HandBuiltIq3S) {
  BlockIq3S b = {};
  b.d = 0x3c00;  // 1
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  for (int j = 0; j < 8; ++j) b.qh[j] = static_cast<uint8_t>(j * 0x35 + 0x5a);
  for (int i = 0; i < 32; ++i) b.signs[i] = static_cast<uint8_t>(i * 29 + 101);
  for (int i = 0; i < 4; ++i) b.scales[i] = static_cast<uint8_t>(0x3f + 0x52 * i);
  b.qs[0] = 7;  // with bit 0 of qh[0] set: G[263] = 0x050b0303: 3, 3, 11, 5
  b.qh[0] |= 1;
  const std::vector<float> y = dequantized(DType::IQ3_S, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, g = (e % 32) / 4;
    const int ls = (b.scales[j / 2] >> (4 * (j % 2))) & 15;
    const int index = b.qs[8 * j + g] | ((b.qh[j] >> g) & 1) << 8;
    const int m = static_cast<int>((kIq3SGrid[index] >> (8 * (e % 4))) & 255);
    const bool negative = (b.signs[4 * j + (e % 32) / 8] >> (e % 8)) & 1;
    EXPECT_EQ(y[e], static_cast<float>((1 + 2 * ls) * (negative ? -m : m))) << e;
  }
  const float s0 = static_cast<float>(1 + 2 * (b.scales[0] & 15));  // ls 15
  EXPECT_EQ(s0, 31.0f);
  for (int e = 0; e < 4; ++e) {
    const float m = static_cast<float>(e < 2 ? 3 : e == 2 ? 11 : 5);
    EXPECT_EQ(y[e], (b.signs[0] >> e) & 1 ? -s0 * m : s0 * m) << e;
  }
  EXPECT_EQ(*dtype_bytes(DType::IQ3_S, 512), 220u);
  EXPECT_EQ(dtype_traits(DType::IQ3_S).ggml_type, 21);
  // (tern writes them too: lattice_fit_test.cpp.)
  EXPECT_TRUE(has_quantizer(DType::IQ3_S));
  EXPECT_TRUE(has_quantizer(DType::IQ3_XXS));
  EXPECT_TRUE(has_dequantizer(DType::IQ3_XXS));
}

// IQ2_XXS: element e of sub-block j (of 8) is d · (0.5 + ls) · 0.25 · G[qs[8j + e / 8]]'s byte
// e % 8 · ±1, the word at bytes 8j + 4 holding ls (top 4 bits) and, in bits 7l.., the 7 sign bits
// of elements 8l..8l+6; element 8l + 7 is negative when an odd number of those are.
TEST(Quantize, HandBuiltIq2Xxs) {
  BlockIq2Xxs b = {};
  b.d = 0x3800;  // 0.5
  uint32_t words[8];
  for (int j = 0; j < 8; ++j) {
    for (int g = 0; g < 4; ++g) b.qs[8 * j + g] = static_cast<uint8_t>((j * 4 + g) * 37 + 11);
    words[j] =
        static_cast<uint32_t>((j * 5 + 3) % 16) << 28 | (((j + 1) * 0x2468ace1u) & 0x0fffffff);
    std::memcpy(b.qs + 8 * j + 4, &words[j], 4);
  }
  b.qs[0] = 1;  // G[1] = 0x080808080808082b: 43, then seven 8s
  const std::vector<float> y = dequantized(DType::IQ2_XXS, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, g = (e % 32) / 8, bit = e % 8;
    const uint32_t seven = (words[j] >> (7 * g)) & 127;
    const bool negative = bit < 7 ? (seven >> bit) & 1 : std::popcount(seven) % 2 == 1;
    const int m = static_cast<int>((kIq2XxsGrid[b.qs[8 * j + g]] >> (8 * bit)) & 255);
    const float scale = 0.5f * (0.5f + static_cast<float>(words[j] >> 28)) * 0.25f;
    EXPECT_EQ(y[e], scale * static_cast<float>(negative ? -m : m)) << e;
  }
  // The first group by hand: ls 3, sign bits 0x61 (elements 0, 5, 6 negative, and 7: three of
  // the seven).
  EXPECT_EQ(words[0] >> 28, 3u);
  EXPECT_EQ(words[0] & 127, 0x61u);
  const float s0 = 0.5f * 3.5f * 0.25f;
  const float first[8] = {-43, 8, 8, 8, 8, -8, -8, -8};
  for (int e = 0; e < 8; ++e) EXPECT_EQ(y[e], s0 * first[e]) << e;
  EXPECT_EQ(*dtype_bytes(DType::IQ2_XXS, 512), 132u);
  EXPECT_EQ(dtype_traits(DType::IQ2_XXS).ggml_type, 16);
}

// IQ2_XS: group g of sub-block j is the word qs[4j + g]: G[its low 9 bits]'s bytes, signed by its
// top 7 bits as IQ2_XXS's; elements 16h.. of the sub-block scaled by d · (0.5 + ls) · 0.25, ls
// nibble h of scales[j].
TEST(Quantize, HandBuiltIq2Xs) {
  BlockIq2Xs b = {};
  b.d = 0x3c00;  // 1
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<uint16_t>(i * 2477 + 313);
  for (int j = 0; j < 8; ++j) b.scales[j] = static_cast<uint8_t>(j * 0x35 + 0x3f);
  b.qs[0] = static_cast<uint16_t>(
      2 | 0x05 << 9);  // G[2] = 0x0808080808081919: 25, 25, then six 8s; elements 0, 2 negative
  const std::vector<float> y = dequantized(DType::IQ2_XS, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, g = (e % 32) / 8, bit = e % 8, h = (e % 32) / 16;
    const uint16_t q = b.qs[4 * j + g];
    const unsigned seven = q >> 9;
    const bool negative = bit < 7 ? (seven >> bit) & 1 : std::popcount(seven) % 2 == 1;
    const int m = static_cast<int>((kIq2XsGrid[q & 511] >> (8 * bit)) & 255);
    const float scale = 0.5f + static_cast<float>((b.scales[j] >> (4 * h)) & 15);
    EXPECT_EQ(y[e], scale * 0.25f * static_cast<float>(negative ? -m : m)) << e;
  }
  // scales[0] = 0x3f: the first half's ls 15 (3.875), the second's 3 (0.875).
  const float first[8] = {-25, 25, -8, 8, 8, 8, 8, 8};
  for (int e = 0; e < 8; ++e) EXPECT_EQ(y[e], 3.875f * first[e]) << e;
  const int m16 = static_cast<int>(kIq2XsGrid[b.qs[2] & 511] & 255);
  EXPECT_EQ(std::fabs(y[16]), 0.875f * static_cast<float>(m16));
  EXPECT_EQ(*dtype_bytes(DType::IQ2_XS, 512), 148u);
  EXPECT_EQ(dtype_traits(DType::IQ2_XS).ggml_type, 17);
}

// IQ2_S: group g of sub-block j is G[qs[4j + g] | (bits 2g.. of qh[j]) << 8]'s bytes, element e
// negative when bit e % 8 of qs[32 + 4j + g] is set; elements 16h.. scaled by d · (0.5 + ls) ·
// 0.25, ls nibble h of scales[j].
TEST(Quantize, HandBuiltIq2S) {
  BlockIq2S b = {};
  b.d = 0x3c00;  // 1
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(i * 53 + 7);
  for (int j = 0; j < 8; ++j) b.qh[j] = static_cast<uint8_t>(j * 0x35 + 0x5a);
  for (int j = 0; j < 8; ++j) b.scales[j] = static_cast<uint8_t>(j * 0x29 + 0x2a);
  b.qs[0] = 7;  // with qh[0]'s low bits 2: G[519] = 0x1908081919191919: 25 × 5, 8, 8, 25
  b.qh[0] = static_cast<uint8_t>((b.qh[0] & ~3) | 2);
  b.qs[32] = 0x81;  // elements 0 and 7 negative
  const std::vector<float> y = dequantized(DType::IQ2_S, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, g = (e % 32) / 8, bit = e % 8, h = (e % 32) / 16;
    const int index = b.qs[4 * j + g] | ((b.qh[j] >> (2 * g)) & 3) << 8;
    const int m = static_cast<int>((kIq2SGrid[index] >> (8 * bit)) & 255);
    const bool negative = (b.qs[32 + 4 * j + g] >> bit) & 1;
    const float scale = 0.5f + static_cast<float>((b.scales[j] >> (4 * h)) & 15);
    EXPECT_EQ(y[e], scale * 0.25f * static_cast<float>(negative ? -m : m)) << e;
  }
  // scales[0] = 0x2a: the first half's ls 10 (2.625).
  const float first[8] = {-25, 25, 25, 25, 25, 8, 8, -25};
  for (int e = 0; e < 8; ++e) EXPECT_EQ(y[e], 2.625f * first[e]) << e;
  EXPECT_EQ(*dtype_bytes(DType::IQ2_S, 512), 164u);
  EXPECT_EQ(dtype_traits(DType::IQ2_S).ggml_type, 22);
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S}) {
    EXPECT_TRUE(has_quantizer(t)) << dtype_name(t);
    EXPECT_TRUE(has_dequantizer(t)) << dtype_name(t);
  }
}

// The 1-bit grid as ggml's 64-bit words (bytes −1, 0, 1), at a few entries read off
// ggml-common.h's iq1s_grid.
TEST(Quantize, Iq1GridIsGgmls) {
  EXPECT_EQ(kIq1Grid[0], 0xffffffffffffffffull);
  EXPECT_EQ(kIq1Grid[1], 0xffffffffffffff01ull);
  EXPECT_EQ(kIq1Grid[300], 0xff000000ff00ff00ull);
  EXPECT_EQ(kIq1Grid[1027], 0x000000000000ff01ull);
  EXPECT_EQ(kIq1Grid[1234], 0x0001ff00ff01ff01ull);
  EXPECT_EQ(kIq1Grid[2047], 0x0101010101010101ull);
}

// IQ1_S: element 8l + e of sub-block j is d · (2 ls + 1) · (G[qs[4j + l] | bits 3l.. of qh[j]
// << 8]'s byte e ± 1/8), ls bits 12..14 of qh[j], the 1/8 negative when its bit 15 is set.
TEST(Quantize, HandBuiltIq1S) {
  BlockIq1S b = {};
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<uint8_t>((i * 41 + 13) % 256);
  for (int j = 0; j < 8; ++j) b.qh[j] = static_cast<uint16_t>(j * 0x2b57 + 0x1234);
  // Sub-block 0: group 0 index 1234 (0x4d2), group 1 index 300 (0x12c), ls 5, delta −.
  b.qs[0] = 0xd2;
  b.qs[1] = 0x2c;
  b.qh[0] = static_cast<uint16_t>(0x8000 | 5 << 12 | (b.qh[0] & 0xfc0) | 1 << 3 | 4);
  const std::vector<float> y = dequantized(DType::IQ1_S, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = (e % 32) / 8;
    const int index = b.qs[4 * j + l] | ((b.qh[j] >> (3 * l)) & 7) << 8;
    const auto g = static_cast<int8_t>(kIq1Grid[index] >> (8 * (e % 8)));
    const float scale = 0.5f * static_cast<float>(2 * ((b.qh[j] >> 12) & 7) + 1);
    const float delta = b.qh[j] & 0x8000 ? -0.125f : 0.125f;
    EXPECT_EQ(y[e], scale * (static_cast<float>(g) + delta)) << e;
  }
  // By hand: 0.5 · 11 · (g − 1/8), G[1234] = 1, −1, 1, −1, 0, −1, 1, 0 and G[300] = 0, −1, 0,
  // −1, 0, 0, 0, −1.
  const float first[16] = {4.8125f,  -6.1875f, 4.8125f,  -6.1875f, -0.6875f, -6.1875f,
                           4.8125f,  -0.6875f, -0.6875f, -6.1875f, -0.6875f, -6.1875f,
                           -0.6875f, -0.6875f, -0.6875f, -6.1875f};
  for (int e = 0; e < 16; ++e) EXPECT_EQ(y[e], first[e]) << e;
  EXPECT_EQ(*dtype_bytes(DType::IQ1_S, 512), 100u);
  EXPECT_EQ(dtype_traits(DType::IQ1_S).ggml_type, 19);
  EXPECT_TRUE(has_quantizer(DType::IQ1_S));
  EXPECT_TRUE(has_dequantizer(DType::IQ1_S));
}

// IQ1_M: as IQ1_S, but group l's high index bits are bits 4 (l % 2).. of qh[2j + l / 2] and its
// delta sign the bit above them; the scales are per 16, 3 bits at 6 (j % 2) + 3h of the
// little-endian word w[j / 2] of the scale bytes, and d's f16 nibble n is w[n]'s top nibble.
TEST(Quantize, HandBuiltIq1M) {
  BlockIq1M b = {};
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<uint8_t>((i * 59 + 3) % 256);
  for (int i = 0; i < 16; ++i) b.qh[i] = static_cast<uint8_t>(i * 0x4f + 0x21);
  // d = 0.5 (0x3800): nibbles 0, 0, 8, 3 the top nibbles of words 0..3.
  const uint16_t words[4] = {0x0000 | 2 << 3 | 5, 0x0abc, 0x8def, 0x3123};
  for (int n = 0; n < 4; ++n) std::memcpy(b.scales + 2 * n, &words[n], 2);
  // Sub-block 0: groups 0, 1 (ls 5) index 1234, 300 with deltas −, +; groups 2, 3 (ls 2): group
  // 2 index 1027, delta +.
  b.qs[0] = 0xd2;
  b.qs[1] = 0x2c;
  b.qs[2] = 0x03;
  b.qh[0] = 0x1c;
  b.qh[1] = static_cast<uint8_t>((b.qh[1] & 0xf0) | 4);
  const std::vector<float> y = dequantized(DType::IQ1_M, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = (e % 32) / 8, h = (e % 32) / 16;
    const int q = b.qh[2 * j + l / 2] >> (4 * (l % 2));
    const int index = b.qs[4 * j + l] | (q & 7) << 8;
    const auto g = static_cast<int8_t>(kIq1Grid[index] >> (8 * (e % 8)));
    const int ls = (words[j / 2] >> (6 * (j % 2) + 3 * h)) & 7;
    const float delta = q & 8 ? -0.125f : 0.125f;
    EXPECT_EQ(y[e], (0.5f * static_cast<float>(2 * ls + 1)) * (static_cast<float>(g) + delta)) << e;
  }
  // By hand: 0.5 · 11 · (g ∓ 1/8) over G[1234] and G[300], then 0.5 · 5 · (g + 1/8) over
  // G[1027] = 1, −1, 0, ….
  const float first[20] = {4.8125f,  -6.1875f, 4.8125f,  -6.1875f, -0.6875f, -6.1875f, 4.8125f,
                           -0.6875f, 0.6875f,  -4.8125f, 0.6875f,  -4.8125f, 0.6875f,  0.6875f,
                           0.6875f,  -4.8125f, 2.8125f,  -2.1875f, 0.3125f,  0.3125f};
  for (int e = 0; e < 20; ++e) EXPECT_EQ(y[e], first[e]) << e;
  EXPECT_EQ(*dtype_bytes(DType::IQ1_M, 512), 112u);
  EXPECT_EQ(dtype_traits(DType::IQ1_M).ggml_type, 29);
  EXPECT_TRUE(has_quantizer(DType::IQ1_M));
  EXPECT_TRUE(has_dequantizer(DType::IQ1_M));
}

// MXFP4: element j is 2^(e − 127) · E[low nibble of qs[j]], element j + 16 the same of its high
// nibble, E the e2m1 values (sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6); e = 0 and 1 are
// the subnormal scales 2^−128 and 2^−127.
TEST(Quantize, HandBuiltMxfp4) {
  const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  auto value = [&](int nibble, int e) {
    const float v = std::ldexp(e2m1[nibble & 7], e - 127);
    return nibble & 8 ? -v : v;
  };
  for (int e : {0, 1, 2, 100, 127, 131, 254}) {
    BlockMxfp4 b;
    b.e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - (j * 5) % 16) << 4);
    const std::vector<float> y = dequantized(DType::MXFP4, &b, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], value(j, e)) << "e " << e << " element " << j;
      EXPECT_EQ(y[j + 16], value(15 - (j * 5) % 16, e)) << "e " << e << " element " << j + 16;
    }
    EXPECT_EQ(mxfp4_scale(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
  }
  // 17 bytes a block: the exponent, then the nibbles.
  EXPECT_EQ(*dtype_bytes(DType::MXFP4, 64), 34u);
  EXPECT_EQ(dtype_traits(DType::MXFP4).ggml_type, 39);
}

// llama.cpp's rule for an MXFP4 block, written out here: the exponent ⌊log2 max |x|⌋ + 125, each
// element the nearest level under it (ties to the lower index). The row quantizer writes
// exactly these bytes, on blocks of every range.
TEST(Quantize, Mxfp4RowsAreLlamaCppsRule) {
  const float levels[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  std::vector<float> x = gaussian(32 * 64, 7);
  for (int i = 0; i < 32; ++i) x[i] *= 1e-37f;  // subnormal scales
  for (int i = 32; i < 64; ++i) x[i] *= 1e30f;  // near the top exponent
  x[70] = 40.0f;                                // an outlier
  for (int i = 96; i < 128; ++i) x[i] = 0.75f;  // every element halfway between two levels
  const std::vector<uint8_t> q = quantized(DType::MXFP4, x);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* xb = &x[32 * b];
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const int e = static_cast<int>(std::floor(std::log2(amax))) + 125;
    ASSERT_GE(e, 0);
    const float scale = std::ldexp(1.0f, e - 127);
    BlockMxfp4 ref = {static_cast<uint8_t>(e), {}};
    for (int j = 0; j < 32; ++j) {
      int best = 0;
      for (int l = 1; l < 16; ++l)
        if (std::fabs(levels[l] * scale - xb[j]) < std::fabs(levels[best] * scale - xb[j]))
          best = l;
      ref.qs[j % 16] |= static_cast<uint8_t>(best << (j < 16 ? 0 : 4));
    }
    EXPECT_EQ(std::memcmp(&q[17 * b], &ref, sizeof ref), 0) << "block " << b;
  }
}

// Q8_K bsums are the sums of each 16 quants, and no 8-bit activation quant is -128.
TEST(Quantize, ActivationFormatsInvariants) {
  std::vector<float> x = gaussian(512, 3);
  x[5] = -50.0f;  // the block's extreme is negative
  const std::vector<uint8_t> q = quantized(DType::Q8_K, x);
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(q.data());
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blocks[i].qs[16 * j + l];
      EXPECT_EQ(blocks[i].bsums[j], sum);
    }
    for (int l = 0; l < 256; ++l) EXPECT_GE(blocks[i].qs[l], -127);
  }
  EXPECT_EQ(blocks[0].qs[5], -127);
  const std::vector<uint8_t> q1 = quantized(DType::Q8_1, x);
  const auto* b1 = reinterpret_cast<const BlockQ8_1*>(q1.data());
  for (int i = 0; i < 16; ++i) {
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      sum += b1[i].qs[l];
      EXPECT_GE(b1[i].qs[l], -127);
    }
    EXPECT_EQ(b1[i].s, f32_to_f16(f16_to_f32(b1[i].d) * static_cast<float>(sum)));
  }
}

TEST(Quantize, Errors) {
  float x[64] = {};
  uint8_t y[512];
  EXPECT_THROW(quantize_row(DType::Q4_0, x, y, 33), Error);
  EXPECT_THROW(quantize_row(DType::Q4_K, x, y, 64), Error);
  EXPECT_THROW(quantize_row(DType::Q2_K, x, y, 64), Error);
  EXPECT_THROW(quantize_row(DType::I32, x, y, 1), Error);
  EXPECT_THROW(dequantize_row(DType::I8, y, x, 1), Error);
  EXPECT_TRUE(has_quantizer(DType::Q3_K) && has_dequantizer(DType::Q3_K));
}

}  // namespace
}  // namespace tern
