#version 450
// y[t, row] = x[t, :] · w[row, :] (+ bias[row]) for one weight type (WEIGHT_F32, _F16, _BF16,
// _Q8_0, _Q4_0, _Q4_1, _Q5_0, _Q5_1, _Q2_K, _Q3_K, _Q4_K, _Q5_K, _Q6_K, _IQ4_NL, _IQ4_XS,
// _MXFP4, _IQ3_XXS, _IQ3_S, _IQ2_XXS, _IQ2_XS, _IQ2_S, _IQ1_S, _IQ1_M, or _AFFINE with
// AFFINE_BITS and AFFINE_GROUP: tern's INT4/INT8 groups; chosen at build time). A workgroup
// takes 4 weight rows
// and a group of up to 8 tokens, 16 lanes per row: lane i takes the row's units of 32 elements
// (or its elements) i, i + 16, ..., accumulating every token's sum in registers, and a fixed
// tree adds the 16 partial sums. A token's output is the same sum in the same order whatever
// the step's other tokens, so the kernel is batch invariant, and a weight row is read once per
// 8 tokens.
//
// EXPERTS (a mixture of experts' matmul_id_* variants): the experts' matrices stacked, [n_experts
// · rows, cols], and workgroup y takes one tile of moe_group.comp: up to 8 routes (a token's j-th
// choice) of one expert, which take the place of the tokens: the rows of their expert, each
// route's input row (x_by_token: its token's, route / top_k; else its own) and its output row;
// biases stacked as the matrices are. So an expert's rows are read once per 8 of its routes, and
// a route's sum is the plain kernel's of its expert for that one input row.
//
// Weight layouts, as vulkan_weights.cpp uploads them (row-major rows of `cols` elements):
//   F32: floats; F16, BF16: two to a word, element e of the matrix in word e / 2;
//   Q8_0, Q4_0, Q5_0, IQ4_NL: the blocks' f16 scales apart from their quants (`scales`: one
//   per block, two to a word; `w`: 8 words of int8 (Q8_0), 4 words of nibbles (Q4_0, IQ4_NL)
//   or Q5_0's word of fifth bits and 4 of nibbles per block), so that every read is an aligned
//   word; MXFP4: its e8m0 exponents as f32 scales 2^(e − 128) (one word a block, exact) and 4
//   words of nibbles a block; Q4_1, Q5_1 (20 and 24 bytes), Q2_K, Q4_K, Q5_K, IQ4_XS (84, 144,
//   176 and 136 bytes): ggml's blocks as they are, whole words; Q3_K, Q6_K, IQ3_S: their
//   super-blocks' f16 d in `scales`, the other 108, 208 and 108 bytes in `w`; IQ3_XXS, IQ2_XXS,
//   IQ2_XS, IQ2_S, IQ1_S: d in `scales`, the other 96, 64, 72, 80 and 48 bytes in `w`; IQ1_M (56 bytes, its d in the scale bits): its blocks as they are;
//   INT4_G*, INT8_G*: tern's blocks as they are (whole words).
//   `tables`: the lattice types' grids (vulkan_weights.cpp's lattice_tables, at the *_GRID
//   words below): IQ3_XXS's 256 entries and IQ3_S's 512, a word each (4 magnitudes a byte);
//   IQ2_XXS's 256, IQ2_XS's 512 and IQ2_S's 1024, two words each (8 magnitudes a byte); the IQ1
//   types' 2048, 16-bit codes two to a word (element e's g + 1 at bits 2e, 2e + 1).
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 4) in;
#define LANES 16u
#define ROWS 4u
#define TOKENS 8u
#if defined(EXPERTS)
layout(push_constant) uniform Push {
  Words w; Words scales; Floats x; Floats y; Floats bias; Ints tiles; Words tables;
  uint rows; uint cols; uint t; uint has_bias; uint top_k; uint x_by_token; uint tile0;
} p;
#else
layout(push_constant) uniform Push {
  Words w; Words scales; Floats x; Floats y; Floats bias; Words tables;
  uint rows; uint cols; uint t; uint has_bias;
} p;
#endif
shared float partial[ROWS][TOKENS][LANES];
// Where each lattice type's grid starts in `tables`, in words (vulkan_weights.cpp's lattice
// table, which checks these).
#define IQ3_XXS_GRID 0u
#define IQ3_S_GRID 256u
#define IQ2_XXS_GRID 768u
#define IQ2_XS_GRID 1280u
#define IQ2_S_GRID 2304u
#define IQ1_GRID 4352u

uint byte_of(uint words[8], uint k) { return (words[k >> 2] >> (8u * (k & 3u))) & 0xFFu; }

// A group's 8 sign bits (bit e: element e negative) from the 7 that IQ3_XXS, IQ2_XXS and IQ2_XS
// store: the eighth is their parity (blocks/lattice_signs.h).
uint lattice_signs(uint s7) { return s7 | ((uint(bitCount(s7)) & 1u) << 7); }

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl) and of MXFP4 (its e2m1 values
// doubled, index 8 + i the negation of i), as blocks/block_layouts.h.
const float kIq4Levels[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                       1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
const float kMxfp4Levels[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0,
                                         0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// The 32 nibbles of 4 words as Q4_0 lays them (element i low nibble of byte i, i + 16 high).
void nibbles(Words w, uint at, out uint n[32]) {
  for (uint i = 0u; i < 4u; ++i) {
    const uint word = w.v[at + i];
    for (uint j = 0u; j < 4u; ++j) {
      const uint byte = (word >> (8u * j)) & 0xFFu;
      n[4u * i + j] = byte & 0xFu;
      n[16u + 4u * i + j] = byte >> 4;
    }
  }
}

void main() {
  const uint row = (gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u) * ROWS + gl_LocalInvocationID.y;
  // A row past the matrix still takes part in the barriers.
  const bool in_matrix = row < p.rows;
#if defined(EXPERTS)
  // Each route's input row and output row.
  uint xrow_of[TOKENS], yrow_of[TOKENS];
  const uint tile = p.tile0 + gl_WorkGroupID.y;
  // The dispatch holds as many tiles as a step could have; the whole workgroup leaves together.
  if (tile >= uint(p.tiles.v[0])) return;
  const uint at = 1u + tile * 10u;
  const uint ntok = uint(p.tiles.v[at + 1u]);
  const uint wrow = uint(p.tiles.v[at]) * p.rows + row;  // its expert's row in the stack
  for (uint i = 0u; i < TOKENS; ++i) {
    const uint route = i < ntok ? uint(p.tiles.v[at + 2u + i]) : 0u;
    xrow_of[i] = p.x_by_token != 0u ? route / p.top_k : route;
    yrow_of[i] = route;
  }
#define xrow(tt) xrow_of[tt]
#define yrow(tt) yrow_of[tt]
#else
  const uint tok0 = gl_WorkGroupID.y * TOKENS;
  const uint ntok = min(TOKENS, p.t - tok0);
  const uint wrow = row;
#define xrow(tt) (tok0 + (tt))
#define yrow(tt) (tok0 + (tt))
#endif
  const uint lid = gl_LocalInvocationID.x;
  const uint ry = gl_LocalInvocationID.y;
  float acc[TOKENS];
  for (uint i = 0u; i < TOKENS; ++i) acc[i] = 0.0;

#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
#define ELEMENT_WISE
#endif
#if !defined(ELEMENT_WISE)
  // Units of 32 elements: a block of Q4_0/Q8_0, a sub-block of the K types. A unit's sum is
  // a · Σ₀..₁₅ q·x + b · Σ₁₆..₃₁ q·x − m · Σ x, with its integer quants q and its scales.
  const uint units = in_matrix ? p.cols / 32u : 0u;
  for (uint u = lid; u < units; u += LANES) {
    const uint g = wrow * units + u;
    float q[32];
    float a, b, m = 0.0;
#if defined(WEIGHT_Q4_0)
    a = half_at(p.scales, g);
    b = a;
    uint n[32];
    nibbles(p.w, g * 4u, n);
    for (uint l = 0u; l < 32u; ++l) q[l] = float(int(n[l]) - 8);
#elif defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1)
    // f16 d and m in the first word, (Q5_1: the fifth bits' word,) 4 words of nibbles: x = d q + m.
#if defined(WEIGHT_Q4_1)
    const uint base = g * 5u;
#else
    const uint base = g * 6u;
#endif
    const vec2 dm = unpackHalf2x16(p.w.v[base]);
    a = dm.x;
    b = a;
    m = -dm.y;
    uint n[32];
#if defined(WEIGHT_Q4_1)
    nibbles(p.w, base + 1u, n);
    for (uint l = 0u; l < 32u; ++l) q[l] = float(n[l]);
#else
    nibbles(p.w, base + 2u, n);
    const uint qh = p.w.v[base + 1u];
    for (uint l = 0u; l < 32u; ++l) q[l] = float(n[l] | (((qh >> l) & 1u) << 4));
#endif
#elif defined(WEIGHT_Q5_0)
    a = half_at(p.scales, g);
    b = a;
    uint n[32];
    nibbles(p.w, g * 5u + 1u, n);
    const uint qh = p.w.v[g * 5u];
    for (uint l = 0u; l < 32u; ++l) q[l] = float(int(n[l] | (((qh >> l) & 1u) << 4)) - 16);
#elif defined(WEIGHT_IQ4_NL) || defined(WEIGHT_MXFP4)
    uint n[32];
    nibbles(p.w, g * 4u, n);
#if defined(WEIGHT_IQ4_NL)
    a = half_at(p.scales, g);
    for (uint l = 0u; l < 32u; ++l) q[l] = kIq4Levels[n[l]];
#else
    a = uintBitsToFloat(p.scales.v[g]);
    for (uint l = 0u; l < 32u; ++l) q[l] = kMxfp4Levels[n[l]];
#endif
    b = a;
#elif defined(WEIGHT_IQ4_XS)
    // ggml's super-block: f16 d and the scales' high bits (a word), their low nibbles (a word),
    // then 8 sub-blocks of 4 words of nibbles. Sub-block j's scale: d · (ls − 32).
    const uint base = (g / 8u) * 34u;
    const uint j = g % 8u;
    const uint head = p.w.v[base];
    const uint ls = ((byte_at(p.w, base + 1u, j / 2u) >> (4u * (j % 2u))) & 0xFu) |
                    (((head >> (16u + 2u * j)) & 3u) << 4);
    a = unpackHalf2x16(head).x * float(int(ls) - 32);
    b = a;
    uint n[32];
    nibbles(p.w, base + 2u + 4u * j, n);
    for (uint l = 0u; l < 32u; ++l) q[l] = kIq4Levels[n[l]];
#elif defined(WEIGHT_Q2_K)
    // ggml's super-block: 16 bytes of scales (4 bits) and mins (4 bits), one a 16 elements,
    // 64 bytes of 2-bit quants, f16 d and dmin. Each half of a unit has its own min, which the
    // shared `m` cannot carry, so q holds the weights themselves, as ggml's dequantizer makes
    // them (dl · q − ml), and a = b = 1.
    const uint base = (g / 8u) * 21u;
    const uint u8 = g % 8u;
    const uint shift = 2u * (u8 % 4u);
    const vec2 dm = unpackHalf2x16(p.w.v[base + 20u]);
    uint qw[8];  // the 32 bytes whose bit pair `shift` is the unit's quants
    for (uint i = 0u; i < 8u; ++i) qw[i] = p.w.v[base + 4u + 8u * (u8 / 4u) + i];
    for (uint h = 0u; h < 2u; ++h) {
      const uint sc = byte_at(p.w, base, 2u * u8 + h);
      const float dl = dm.x * float(sc & 0xFu), ml = dm.y * float(sc >> 4);
      for (uint l = 16u * h; l < 16u * h + 16u; ++l)
        q[l] = dl * float((byte_of(qw, l) >> shift) & 3u) - ml;
    }
    a = 1.0;
    b = 1.0;
#elif defined(WEIGHT_Q3_K)
    // ggml's super-block without its f16 d (in `scales`): 32 bytes of high bits (bit u of byte l
    // for unit u's element l), 64 of 2-bit quants, 12 of 6-bit scales, one a 16 elements:
    // scale i's low 4 bits in nibble i / 8 of byte i % 8, its high 2 in bits 2 (i / 4) of byte
    // 8 + i % 4, less 32. x = d · scale · (q − 4 unless its high bit is set).
    const uint base = (g / 8u) * 27u;
    const uint u8 = g % 8u;
    const uint shift = 2u * (u8 % 4u);
    const float d = half_at(p.scales, g / 8u);
    float s[2];
    for (uint h = 0u; h < 2u; ++h) {
      const uint i = 2u * u8 + h;
      const uint lo = (byte_at(p.w, base + 24u, i % 8u) >> (4u * (i / 8u))) & 0xFu;
      const uint hi = (byte_at(p.w, base + 24u, 8u + i % 4u) >> (2u * (i / 4u))) & 3u;
      s[h] = d * float(int(lo | (hi << 4)) - 32);
    }
    a = s[0];
    b = s[1];
    uint qw[8], hw[8];
    for (uint i = 0u; i < 8u; ++i) {
      qw[i] = p.w.v[base + 8u + 8u * (u8 / 4u) + i];
      hw[i] = p.w.v[base + i];
    }
    for (uint l = 0u; l < 32u; ++l) {
      const int v = int((byte_of(qw, l) >> shift) & 3u);
      q[l] = float(((byte_of(hw, l) >> u8) & 1u) != 0u ? v : v - 4);
    }
#elif defined(WEIGHT_IQ3_XXS) || defined(WEIGHT_IQ3_S)
    // Sub-block j of a super-block: 8 groups of 4 magnitudes from the grid, each element's
    // sign from the sub-block's sign word, its scale d · (2 ls + 1) (IQ3_XXS's a quarter of it).
    const uint j = g % 8u;
    const float d = half_at(p.scales, g / 8u);
#if defined(WEIGHT_IQ3_XXS)
    // The sub-block's word: 4 × 7 sign bits (the eighth of each 8 their parity), ls above them.
    const uint base = (g / 8u) * 24u;
    const uint word = p.w.v[base + 16u + j];
    a = d * float(2u * (word >> 28) + 1u) * 0.25;
    uint signs = 0u;
    for (uint h = 0u; h < 4u; ++h) signs |= lattice_signs((word >> (7u * h)) & 0x7Fu) << (8u * h);
#else
    const uint base = (g / 8u) * 27u;
    const uint ls = (byte_at(p.w, base + 26u, j / 2u) >> (4u * (j % 2u))) & 0xFu;
    a = d * float(2u * ls + 1u);
    const uint qh = byte_at(p.w, base + 16u, j);
    const uint signs = p.w.v[base + 18u + j];
#endif
    b = a;
    for (uint m = 0u; m < 8u; ++m) {
#if defined(WEIGHT_IQ3_XXS)
      const uint entry = p.tables.v[IQ3_XXS_GRID + byte_at(p.w, base, 8u * j + m)];
#else
      const uint entry =
          p.tables.v[IQ3_S_GRID + (byte_at(p.w, base, 8u * j + m) | (((qh >> m) & 1u) << 8))];
#endif
      for (uint e = 0u; e < 4u; ++e) {
        const float magnitude = float((entry >> (8u * e)) & 0xFFu);
        q[4u * m + e] = ((signs >> (4u * m + e)) & 1u) != 0u ? -magnitude : magnitude;
      }
    }
#elif defined(WEIGHT_IQ2_XXS) || defined(WEIGHT_IQ2_XS) || defined(WEIGHT_IQ2_S)
    // Sub-block j of a super-block: 4 groups of 8 magnitudes from the grid (entry l at word
    // at[l]), each element's sign from the sub-block's sign word, half h's scale
    // d · (2 ls_h + 1) / 8.
    const uint j = g % 8u;
    const float d = half_at(p.scales, g / 8u) * 0.125;
    uint at[4];
    uint signs = 0u;
    uint ls;  // the halves' 4-bit scales: the first's the low nibble
#if defined(WEIGHT_IQ2_XXS)
    // Two words a sub-block: its 4 grid indices, then 4 × 7 sign bits with ls above them.
    const uint base = (g / 8u) * 16u + 2u * j;
    const uint indices = p.w.v[base], aux = p.w.v[base + 1u];
    for (uint l = 0u; l < 4u; ++l) {
      at[l] = IQ2_XXS_GRID + 2u * ((indices >> (8u * l)) & 0xFFu);
      signs |= lattice_signs((aux >> (7u * l)) & 127u) << (8u * l);
    }
    ls = (aux >> 28) | ((aux >> 28) << 4);  // one for both halves
#elif defined(WEIGHT_IQ2_XS)
    // 16 words of the 32 groups' 16 bits (a 9-bit grid index, 7 sign bits above it), then a
    // scale byte a sub-block.
    const uint base = (g / 8u) * 18u;
    for (uint l = 0u; l < 4u; ++l) {
      const uint group = (p.w.v[base + 2u * j + l / 2u] >> (16u * (l % 2u))) & 0xFFFFu;
      at[l] = IQ2_XS_GRID + 2u * (group & 511u);
      signs |= lattice_signs(group >> 9) << (8u * l);
    }
    ls = byte_at(p.w, base + 16u, j);
#else
    // 8 words of the grid indices' low bytes, 8 sign words (one a sub-block), then a byte a
    // sub-block of the indices' top bit pairs (group l's at 2l) and one of scales.
    const uint base = (g / 8u) * 20u;
    const uint qh = byte_at(p.w, base + 16u, j);
    for (uint l = 0u; l < 4u; ++l)
      at[l] = IQ2_S_GRID + 2u * (byte_at(p.w, base, 4u * j + l) | (((qh >> (2u * l)) & 3u) << 8));
    signs = p.w.v[base + 8u + j];
    ls = byte_at(p.w, base + 18u, j);
#endif
    a = d * float(2u * (ls & 0xFu) + 1u);
    b = d * float(2u * (ls >> 4) + 1u);
    for (uint l = 0u; l < 4u; ++l) {
      const uint entry[2] = uint[2](p.tables.v[at[l]], p.tables.v[at[l] + 1u]);
      for (uint e = 0u; e < 8u; ++e) {
        const float magnitude = float((entry[e / 4u] >> (8u * (e % 4u))) & 0xFFu);
        q[8u * l + e] = ((signs >> (8u * l + e)) & 1u) != 0u ? -magnitude : magnitude;
      }
    }
#elif defined(WEIGHT_IQ1_S) || defined(WEIGHT_IQ1_M)
    // Sub-block j of a super-block: 4 groups of 8 values g in {−1, 0, 1} from the grid, each
    // group shifted by its δ / 8 (δ = ±1): q = 8 g + δ, half h's scale d · (2 ls_h + 1) / 8.
    const uint j = g % 8u;
    uint index[4];
    uint negative = 0u;  // bit l: group l's δ is −1
    float d;
    uint ls[2];
#if defined(WEIGHT_IQ1_S)
    // 8 words of the grid indices' low bytes, then a 16-bit word a sub-block: index bits 8..10
    // of group l at 3l, ls at 12 (one for both halves), δ's sign at 15 (for all 4 groups).
    const uint base = (g / 8u) * 12u;
    d = half_at(p.scales, g / 8u);
    const uint qh = (p.w.v[base + 8u + j / 2u] >> (16u * (j % 2u))) & 0xFFFFu;
    for (uint l = 0u; l < 4u; ++l)
      index[l] = byte_at(p.w, base, 4u * j + l) | (((qh >> (3u * l)) & 7u) << 8);
    negative = (qh >> 15) * 15u;
    ls[0] = (qh >> 12) & 7u;
    ls[1] = ls[0];
#else
    // ggml's 56 bytes: 8 words of the grid indices' low bytes, 4 of a nibble a group (byte
    // 2j + l / 2, nibble l % 2: index bits 8..10, δ's sign above them), 2 of four 16-bit scale
    // words: half h of sub-block j's ls at 6 (j % 2) + 3h of word j / 2, d's nibble n the top
    // nibble of word n.
    const uint base = (g / 8u) * 14u;
    const uint s01 = p.w.v[base + 12u], s23 = p.w.v[base + 13u];
    d = unpackHalf2x16(((s01 >> 12) & 0xFu) | ((s01 >> 24) & 0xF0u) | ((s23 >> 4) & 0xF00u) |
                       ((s23 >> 16) & 0xF000u))
            .x;
    for (uint l = 0u; l < 4u; ++l) {
      const uint nibble = (byte_at(p.w, base + 8u, 2u * j + l / 2u) >> (4u * (l % 2u))) & 0xFu;
      index[l] = byte_at(p.w, base, 4u * j + l) | ((nibble & 7u) << 8);
      negative |= (nibble >> 3) << l;
    }
    const uint sw = ((j < 4u ? s01 : s23) >> (16u * ((j / 2u) % 2u))) & 0xFFFFu;
    ls[0] = (sw >> (6u * (j % 2u))) & 7u;
    ls[1] = (sw >> (6u * (j % 2u) + 3u)) & 7u;
#endif
    a = d * float(2u * ls[0] + 1u) * 0.125;
    b = d * float(2u * ls[1] + 1u) * 0.125;
    for (uint l = 0u; l < 4u; ++l) {
      const uint code = (p.tables.v[IQ1_GRID + index[l] / 2u] >> (16u * (index[l] % 2u))) & 0xFFFFu;
      const int delta = ((negative >> l) & 1u) != 0u ? -1 : 1;
      for (uint e = 0u; e < 8u; ++e)
        q[8u * l + e] = float(8 * (int((code >> (2u * e)) & 3u) - 1) + delta);
    }
#elif defined(WEIGHT_Q8_0)
    a = half_at(p.scales, g);
    b = a;
    for (uint i = 0u; i < 8u; ++i) {
      const int word = int(p.w.v[g * 8u + i]);
      for (uint j = 0u; j < 4u; ++j) q[4u * i + j] = float(bitfieldExtract(word, int(8u * j), 8));
    }
#elif defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
    // ggml's super-block of 8 sub-blocks: f16 d and dmin, 12 bytes of 6-bit scales and mins,
    // (Q5_K: 32 bytes of fifth bits,) 128 bytes of nibbles.
#if defined(WEIGHT_Q4_K)
    const uint base = (g / 8u) * 36u;
    const uint qs = base + 4u;
#else
    const uint base = (g / 8u) * 44u;
    const uint qs = base + 12u;
#endif
    const uint j = g % 8u;
    const vec2 dm = unpackHalf2x16(p.w.v[base]);
    uint sw[8];  // the 12 scale bytes (words 1..3 of the super-block)
    for (uint i = 0u; i < 3u; ++i) sw[i] = p.w.v[base + 1u + i];
    uint sc, mn;
    if (j < 4u) {
      sc = byte_of(sw, j) & 63u;
      mn = byte_of(sw, j + 4u) & 63u;
    } else {
      sc = (byte_of(sw, j + 4u) & 0xFu) | ((byte_of(sw, j - 4u) >> 6) << 4);
      mn = (byte_of(sw, j + 4u) >> 4) | ((byte_of(sw, j) >> 6) << 4);
    }
    a = dm.x * float(sc);
    b = a;
    m = dm.y * float(mn);
    uint qw[8];  // the 32 bytes whose nibbles (low for even j, high for odd) are the unit's
    for (uint i = 0u; i < 8u; ++i) qw[i] = p.w.v[qs + 8u * (j / 2u) + i];
#if defined(WEIGHT_Q5_K)
    uint hw[8];  // the 32 bytes whose bit j is each element's fifth bit
    for (uint i = 0u; i < 8u; ++i) hw[i] = p.w.v[base + 4u + i];
#endif
    const uint shift = 4u * (j % 2u);
    for (uint l = 0u; l < 32u; ++l) {
      uint v = (byte_of(qw, l) >> shift) & 0xFu;
#if defined(WEIGHT_Q5_K)
      v |= ((byte_of(hw, l) >> j) & 1u) << 4;
#endif
      q[l] = float(v);
    }
#elif defined(WEIGHT_AFFINE)
    // tern's affine groups of AFFINE_GROUP elements (GPTQ, AWQ, MLX): f32 scale and bias, then
    // AFFINE_BITS-bit unsigned codes, 4-bit ones as Q4_0's nibbles per 32. x = s · q + bias.
    const uint units_per_group = uint(AFFINE_GROUP) / 32u;
    const uint block_words = 2u + uint(AFFINE_GROUP * AFFINE_BITS) / 32u;
    const uint base = (g / units_per_group) * block_words;
    const uint codes = base + 2u + (g % units_per_group) * uint(AFFINE_BITS);
    a = uintBitsToFloat(p.w.v[base]);
    b = a;
    m = -uintBitsToFloat(p.w.v[base + 1u]);
#if AFFINE_BITS == 4
    uint n[32];
    nibbles(p.w, codes, n);
    for (uint l = 0u; l < 32u; ++l) q[l] = float(n[l]);
#else
    for (uint i = 0u; i < 8u; ++i) {
      const uint word = p.w.v[codes + i];
      for (uint j = 0u; j < 4u; ++j) q[4u * i + j] = float((word >> (8u * j)) & 0xFFu);
    }
#endif
#elif defined(WEIGHT_Q6_K)
    // ggml's super-block without its f16 d (in `scales`): 128 bytes of low nibbles, 64 of high
    // bit pairs, 16 int8 scales of 16 elements each. Unit j is elements 32 j .. 32 j + 31.
    const uint base = (g / 8u) * 52u;
    const uint j = g % 8u;
    const uint h = j / 4u, k = j % 4u;
    const float d = half_at(p.scales, g / 8u);
    const uint scale_word = p.w.v[base + 48u + 2u * h + (k >> 1)];
    const uint s0 = 16u * (k & 1u);  // the unit's two scales are bytes 2k, 2k + 1 of 8h's
    a = d * float(bitfieldExtract(int(scale_word >> s0), 0, 8));
    b = d * float(bitfieldExtract(int(scale_word >> (s0 + 8u)), 0, 8));
    uint lw[8], hw[8];
    for (uint i = 0u; i < 8u; ++i) {
      lw[i] = p.w.v[base + 16u * h + 8u * (k & 1u) + i];
      hw[i] = p.w.v[base + 32u + 8u * h + i];
    }
    for (uint l = 0u; l < 32u; ++l) {
      const uint lo = (byte_of(lw, l) >> (4u * (k >> 1))) & 0xFu;
      const uint hi = (byte_of(hw, l) >> (2u * k)) & 3u;
      q[l] = float(int(lo | (hi << 4)) - 32);
    }
#endif
    for (uint tt = 0u; tt < TOKENS; ++tt) {
      if (tt >= ntok) break;
      const uint xb = xrow(tt) * p.cols + u * 32u;
      float sa = 0.0, sb = 0.0, sx = 0.0;
      for (uint i = 0u; i < 16u; ++i) sa += q[i] * p.x.v[xb + i];
      for (uint i = 16u; i < 32u; ++i) sb += q[i] * p.x.v[xb + i];
      if (m != 0.0)
        for (uint i = 0u; i < 32u; ++i) sx += p.x.v[xb + i];
      acc[tt] += a * sa + b * sb - m * sx;
    }
  }
#else
  for (uint k = lid; in_matrix && k < p.cols; k += LANES) {
    const uint e = wrow * p.cols + k;
#if defined(WEIGHT_F32)
    const float wv = uintBitsToFloat(p.w.v[e]);
#elif defined(WEIGHT_F16)
    const float wv = half_at(p.w, e);
#elif defined(WEIGHT_BF16)
    const float wv = uintBitsToFloat(((p.w.v[e >> 1] >> (16u * (e & 1u))) & 0xFFFFu) << 16);
#endif
    for (uint tt = 0u; tt < TOKENS; ++tt) {
      if (tt >= ntok) break;
      acc[tt] += wv * p.x.v[xrow(tt) * p.cols + k];
    }
  }
#endif

  for (uint tt = 0u; tt < TOKENS; ++tt) partial[ry][tt][lid] = acc[tt];
  barrier();
  for (uint w = LANES / 2u; w > 0u; w >>= 1) {
    if (lid < w)
      for (uint tt = 0u; tt < TOKENS; ++tt) partial[ry][tt][lid] += partial[ry][tt][lid + w];
    barrier();
  }
  if (in_matrix && lid < ntok) {
    const float b = p.has_bias != 0u ? p.bias.v[wrow] : 0.0;
    p.y.v[yrow(lid) * p.rows + row] = partial[ry][lid][0] + b;
  }
}
