// Writing one block of ggml's layouts from quants already chosen: the one place that knows
// where each quant's bits go, shared by the row quantizers (quantize_row.h) and the weight
// quantizers that search scales against an importance matrix (quant/weight_quantizer.h).
// Quants are given as stored: unsigned, offset included (Q4_0's q + 8 in 0..15, Q6_K's q + 32
// in 0..63), except Q8_0's signed values.
#pragma once

#include <cstdint>

#include "tern/blocks/block_layouts.h"

namespace tern {

void pack_q4_0(uint16_t d, const int* q, BlockQ4_0* b);              // q[32]
void pack_q4_1(uint16_t d, uint16_t m, const int* q, BlockQ4_1* b);  // q[32]
void pack_q5_0(uint16_t d, const int* q, BlockQ5_0* b);              // q[32]
void pack_q5_1(uint16_t d, uint16_t m, const int* q, BlockQ5_1* b);  // q[32]
void pack_q8_0(uint16_t d, const int* q, BlockQ8_0* b);              // q[32] in -127..127
// scales, mins: [8] in 0..63; q[256] in 0..15 (Q4_K) or 0..31 (Q5_K).
void pack_q4_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ4_K* b);
void pack_q5_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ5_K* b);
// scales: [16] in -128..127; q[256] in 0..63.
void pack_q6_k(uint16_t d, const int* scales, const int* q, BlockQ6_K* b);
// scales, mins: [16] in 0..15; q[256] in 0..3.
void pack_q2_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ2_K* b);
// scales: [16] in -32..31; q[256] in 0..7 (the value q − 4).
void pack_q3_k(uint16_t d, const int* scales, const int* q, BlockQ3_K* b);
// q: level indices (kIq4Levels) in 0..15: [32] (IQ4_NL), [256] (IQ4_XS, scales [8] in -32..31).
void pack_iq4_nl(uint16_t d, const int* q, BlockIq4Nl* b);
void pack_iq4_xs(uint16_t d, const int* scales, const int* q, BlockIq4Xs* b);
// q: [32] level indices (kMxfp4Levels) in 0..15 under the scale 2^(e − 128).
void pack_mxfp4(uint8_t e, const int* q, BlockMxfp4* b);

// The other way, for the lookup types (IQ4_NL, IQ4_XS's groups, MXFP4): y[32] = d · levels[q],
// q the nibbles of qs[16] (element j the low nibble of qs[j], j + 16 the high one).
inline void unpack_lookup_block(const uint8_t* qs, const int8_t* levels, float d, float* y) {
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(levels[qs[j] & 0xf]);
    y[j + kQK / 2] = d * static_cast<float>(levels[qs[j] >> 4]);
  }
}

}  // namespace tern
