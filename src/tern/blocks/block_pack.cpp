// Block packing of ggml's layouts (see block_layouts.h for where each element lives).
#include "tern/blocks/block_pack.h"

#include <cstring>

#include "tern/blocks/k_scales.h"

namespace tern {
namespace {

// Element j in the low nibble of qs[j], element j + 16 in the high one.
void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
}
// Bit 4 of element j is bit j of the little-endian word qh.
void pack_high_bits(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

// Q2_K and Q3_K's 2 low bits: in half h (128 elements), bits 2g..2g+1 of qs[32h + l] are
// element 128h + 32g + l.
void pack_two_bit_planes(const int* q, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      int byte = 0;
      for (int g = 0; g < 4; ++g) byte |= (q[128 * h + 32 * g + l] & 3) << (2 * g);
      qs[32 * h + l] = static_cast<uint8_t>(byte);
    }
}

}  // namespace

void pack_q4_0(uint16_t d, const int* q, BlockQ4_0* b) {
  b->d = d;
  pack_nibbles(q, b->qs);
}
void pack_q4_1(uint16_t d, uint16_t m, const int* q, BlockQ4_1* b) {
  b->d = d;
  b->m = m;
  pack_nibbles(q, b->qs);
}
void pack_q5_0(uint16_t d, const int* q, BlockQ5_0* b) {
  b->d = d;
  pack_nibbles(q, b->qs);
  pack_high_bits(q, b->qh);
}
void pack_q5_1(uint16_t d, uint16_t m, const int* q, BlockQ5_1* b) {
  b->d = d;
  b->m = m;
  pack_nibbles(q, b->qs);
  pack_high_bits(q, b->qh);
}
void pack_q8_0(uint16_t d, const int* q, BlockQ8_0* b) {
  b->d = d;
  for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(q[j]);
}

// Q4_K: in each 64-element chunk c, byte qs[32c + l] holds element 64c + l in its low nibble
// and element 64c + 32 + l in its high nibble.
void pack_q4_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ4_K* b) {
  b->d = d;
  b->dmin = dmin;
  pack_k_scales_mins(scales, mins, b->scales);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b->qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

// Q5_K: low nibbles as Q4_K; bit 4 of element 32j + l is bit j of qh[l].
void pack_q5_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ5_K* b) {
  b->d = d;
  b->dmin = dmin;
  pack_k_scales_mins(scales, mins, b->scales);
  for (int l = 0; l < 32; ++l) b->qh[l] = 0;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b->qs[32 * c + l] = static_cast<uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
      b->qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
  }
}

// Q6_K: in half h (128 elements), for l < 32, ql[64h + l] holds elements 128h + l (low nibble)
// and 128h + 64 + l (high); ql[64h + 32 + l] elements 128h + 32 + l and 128h + 96 + l; qh[32h + l]
// the top 2 bits of elements 128h + l, +32, +64, +96 at bit 0, 2, 4, 6.
void pack_q6_k(uint16_t d, const int* scales, const int* q, BlockQ6_K* b) {
  b->d = d;
  for (int j = 0; j < 16; ++j) b->scales[j] = static_cast<int8_t>(scales[j]);
  for (int h = 0; h < 2; ++h) {
    const int* qh = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      b->ql[64 * h + l] = static_cast<uint8_t>((qh[l] & 0xf) | (qh[l + 64] & 0xf) << 4);
      b->ql[64 * h + 32 + l] = static_cast<uint8_t>((qh[l + 32] & 0xf) | (qh[l + 96] & 0xf) << 4);
      b->qh[32 * h + l] = static_cast<uint8_t>((qh[l] >> 4) | (qh[l + 32] >> 4) << 2 |
                                               (qh[l + 64] >> 4) << 4 | (qh[l + 96] >> 4) << 6);
    }
  }
}

// Q2_K: scales[j] holds sub-block j's scale in its low nibble and its min in the high one.
void pack_q2_k(uint16_t d, uint16_t dmin, const int* scales, const int* mins, const int* q,
               BlockQ2_K* b) {
  b->d = d;
  b->dmin = dmin;
  for (int j = 0; j < 16; ++j)
    b->scales[j] = static_cast<uint8_t>((scales[j] & 0xf) | mins[j] << 4);
  pack_two_bit_planes(q, b->qs);
}

// Q3_K: the third bit of element 128h + 32g + l is bit 4h + g of hmask[l]. The 16 scales, as
// 6-bit values s + 32: the low nibbles of sub-blocks j and j + 8 share byte j (< 8), and the
// top 2 bits of sub-block j are bits 2 (j / 4) of byte 8 + j % 4.
void pack_q3_k(uint16_t d, const int* scales, const int* q, BlockQ3_K* b) {
  b->d = d;
  std::memset(b->scales, 0, sizeof b->scales);
  for (int j = 0; j < 16; ++j) {
    const int s = scales[j] + 32;
    b->scales[j % 8] |= static_cast<uint8_t>((s & 0xf) << (j < 8 ? 0 : 4));
    b->scales[8 + j % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (j / 4)));
  }
  std::memset(b->hmask, 0, sizeof b->hmask);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    b->hmask[l] |= static_cast<uint8_t>((q[e] >> 2) << (4 * h + g));
  }
  pack_two_bit_planes(q, b->qs);
}

void pack_iq4_nl(uint16_t d, const int* q, BlockIq4Nl* b) {
  b->d = d;
  pack_nibbles(q, b->qs);
}

void pack_mxfp4(uint8_t e, const int* q, BlockMxfp4* b) {
  b->e = e;
  pack_nibbles(q, b->qs);
}

void pack_iq4_xs(uint16_t d, const int* scales, const int* q, BlockIq4Xs* b) {
  b->d = d;
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof b->scales_l);
  for (int j = 0; j < kQKK / kQK; ++j) {
    const int biased = scales[j] + 32;
    b->scales_l[j / 2] |= static_cast<uint8_t>((biased & 0xf) << (4 * (j % 2)));
    b->scales_h |= static_cast<uint16_t>((biased >> 4) << (2 * j));
    pack_nibbles(q + kQK * j, b->qs + kQK / 2 * j);
  }
}

}  // namespace tern
