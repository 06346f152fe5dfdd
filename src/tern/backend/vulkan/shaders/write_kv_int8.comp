#version 450
// Stores each token's K and V rows of one layer at its slot as int8 codes with an f16 scale per
// kv head (slot -1: skip), the CPU's format (blocks/kv_row_format.h: scale = f16(max|x| / 127),
// code = clamp(round-to-even(x / scale), ±127); a head with a NaN or ±inf gets scale NaN and
// zero codes). One invocation per (token, kv head, K or V). Codes: [num_slots, row_elems] bytes;
// scales: [num_slots, n_kv_heads] f16, two to a word, each half set by its own invocation with
// atomics (the other half may be another token's or head's). head_dim: a multiple of 4.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats k; Floats v; Words k_codes; Words v_codes; Words k_scales; Words v_scales; Ints slots;
  uint t; uint n_kv_heads; uint head_dim;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 64u;
  if (i >= p.t * p.n_kv_heads * 2u) return;
  const bool is_v = (i & 1u) != 0u;
  const uint head = (i / 2u) % p.n_kv_heads;
  const uint token = i / (2u * p.n_kv_heads);
  const int slot = p.slots.v[token];
  if (slot < 0) return;
  Floats x = is_v ? p.v : p.k;
  Words codes = is_v ? p.v_codes : p.k_codes;
  Words scales = is_v ? p.v_scales : p.k_scales;
  const uint from = (token * p.n_kv_heads + head) * p.head_dim;
  float amax = 0.0;
  bool finite = true;
  for (uint d = 0u; d < p.head_dim; ++d) {
    const float e = x.v[from + d];
    finite = finite && !isnan(e) && !isinf(e);
    amax = max(amax, abs(e));
  }
  const uint half_bits = finite ? (packHalf2x16(vec2(amax / 127.0, 0.0)) & 0xFFFFu) : 0x7e00u;
  const float s = unpackHalf2x16(half_bits).x;
  const bool usable = s > 0.0 && !isinf(s) && !isnan(s);
  const float inv = usable ? 1.0 / s : 0.0;
  const uint to = (uint(slot) * p.n_kv_heads + head) * p.head_dim / 4u;
  for (uint w = 0u; w < p.head_dim / 4u; ++w) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      const float q = usable ? clamp(roundEven(x.v[from + 4u * w + j] * inv), -127.0, 127.0) : 0.0;
      word |= (uint(int(q)) & 0xFFu) << (8u * j);
    }
    codes.v[to + w] = word;
  }
  const uint si = uint(slot) * p.n_kv_heads + head;
  const uint shift = 16u * (si & 1u);
  atomicAnd(scales.v[si >> 1], ~(0xFFFFu << shift));
  atomicOr(scales.v[si >> 1], half_bits << shift);
}
