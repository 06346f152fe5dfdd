// The 8-bit KV rows' scalar code: the encoder the cache writes with and the dequantizers that
// define the values (the CPU's SIMD ones are tested against them).
#include "tern/blocks/kv_row_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tern/core/half.h"

namespace tern {
namespace {

// f32 → an FP8 code with kMan mantissa bits and exponent bias kBias, saturating at kMaxCode.
template <int kMan, int kBias, uint32_t kMaxCode>
uint8_t f32_to_fp8(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const auto sign = static_cast<uint8_t>((u >> 24) & 0x80);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | static_cast<uint8_t>(kMaxCode);  // NaN: never written
  uint32_t code;
  if (u < static_cast<uint32_t>(127 + 1 - kBias) << 23) {
    // Below the smallest normal the codes are multiples of 2^(1 - bias - man): scale to
    // integers (exact, a power of two) and round to nearest even. A result of 2^man is the
    // smallest normal's code, which is what the encoding says.
    float a;
    std::memcpy(&a, &u, sizeof a);
    code = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, kBias - 1 + kMan)));
  } else {
    constexpr int kShift = 23 - kMan;
    u += ((1u << (kShift - 1)) - 1) + ((u >> kShift) & 1);  // round to nearest even
    code = (u >> kShift) - (static_cast<uint32_t>(127 - kBias) << kMan);
  }
  return sign | static_cast<uint8_t>(std::min(code, kMaxCode));
}

template <int kMan, int kBias>
float fp8_to_f32(uint8_t code) {
  const int e = (code & 0x7f) >> kMan;
  const int m = code & ((1 << kMan) - 1);
  const float magnitude = e == 0
                              ? std::ldexp(static_cast<float>(m), 1 - kBias - kMan)
                              : std::ldexp(static_cast<float>(m + (1 << kMan)), e - kBias - kMan);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The largest value of each code.
constexpr float kInt8Max = 127.0f;
constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
// The FP8 scale search: at most this many encodings per head, and candidate scales.
constexpr int kFp8ScaleSearchEncodes = 256;
constexpr int kFp8MaxScaleCandidates = 32;

}  // namespace

uint8_t f32_to_fp8_e4m3(float x) { return f32_to_fp8<3, 7, 0x7e>(x); }
uint8_t f32_to_fp8_e5m2(float x) { return f32_to_fp8<2, 15, 0x7b>(x); }
float fp8_e4m3_to_f32(uint8_t code) { return fp8_to_f32<3, 7>(code); }
float fp8_e5m2_to_f32(uint8_t code) { return fp8_to_f32<2, 15>(code); }

void quantize_kv_head(KvDtype dtype, const float* x, int n, uint8_t* codes, uint16_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  // std::max drops NaN; look for it (and ±inf) apart.
  bool finite = std::isfinite(amax);
  for (int i = 0; i < n && finite; ++i) finite = !std::isnan(x[i]);
  const float top = dtype == KvDtype::Int8      ? kInt8Max
                    : dtype == KvDtype::Fp8E4M3 ? kE4M3Max
                                                : kE5M2Max;
  *scale = finite ? f32_to_f16(amax / top) : uint16_t{0x7e00};
  const float s = f16_to_f32(*scale);
  if (!(s > 0.0f) || !std::isfinite(s)) {
    std::fill_n(codes, n, uint8_t{0});
    return;
  }
  if (dtype == KvDtype::Int8) {
    const float inv = 1.0f / s;
    for (int i = 0; i < n; ++i) {
      const float q = std::clamp(std::nearbyint(x[i] * inv), -kInt8Max, kInt8Max);
      codes[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
    return;
  }
  // An FP8 code rounds each value to a fraction of its own octave, and the scale decides where
  // in its octave each value falls: of a few scales spread over one octave above max|x| / top
  // (none saturates), one fits a short row markedly better (an 8-wide head of N(0, 1) values,
  // simulated: 16 scales halve the squared error of max|x| / top alone, 32 cut it 2.6×). The
  // search takes about 256 encodings per head whatever its width, so heads of 128 try 2 scales.
  const auto encode = dtype == KvDtype::Fp8E4M3 ? f32_to_fp8_e4m3 : f32_to_fp8_e5m2;
  const auto decode = dtype == KvDtype::Fp8E4M3 ? fp8_e4m3_to_f32 : fp8_e5m2_to_f32;
  const int candidates = std::clamp(kFp8ScaleSearchEncodes / n, 1, kFp8MaxScaleCandidates);
  uint8_t trial[kFp8ScaleSearchEncodes];
  float best_err = -1.0f;
  for (int c = 0; c < candidates; ++c) {
    const uint16_t bits =
        c == 0 ? *scale
               : f32_to_f16(amax / top *
                            std::exp2(static_cast<float>(c) / static_cast<float>(candidates)));
    const float sc = f16_to_f32(bits);
    const float inv = 1.0f / sc;
    uint8_t* out = c == 0 ? codes : trial;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      out[i] = encode(x[i] * inv);
      const float e = x[i] - decode(out[i]) * sc;
      err += e * e;
    }
    if (c == 0 || err < best_err) {
      best_err = err;
      *scale = bits;
      if (c != 0) std::copy(trial, trial + n, codes);
    }
  }
}

void dequantize_kv_int8(const uint8_t* codes, float scale, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
}
void dequantize_kv_e4m3(const uint8_t* codes, float scale, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(codes[i]) * scale;
}
void dequantize_kv_e5m2(const uint8_t* codes, float scale, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = fp8_e5m2_to_f32(codes[i]) * scale;
}

}  // namespace tern
