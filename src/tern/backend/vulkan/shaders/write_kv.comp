#version 450
// Stores each token's K and V rows of one layer at its slot, as f16 (slot -1: skip). One
// invocation per pair of elements of a token's row. The layer's K and V are each
// [num_slots, n_kv_heads · head_dim] f16, two to a word: the CPU cache's layout, so a block's
// bytes move between the two as they are.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats k; Floats v; Words k_cache; Words v_cache; Ints slots;
  uint t; uint row_elems;
} p;
void main() {
  const uint pairs = p.row_elems / 2u;
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 64u;
  if (i >= p.t * pairs) return;
  const uint token = i / pairs;
  const uint e = 2u * (i % pairs);
  const int slot = p.slots.v[token];
  if (slot < 0) return;
  const uint to = (uint(slot) * p.row_elems + e) / 2u;
  const uint from = token * p.row_elems + e;
  p.k_cache.v[to] = packHalf2x16(vec2(p.k.v[from], p.k.v[from + 1u]));
  p.v_cache.v[to] = packHalf2x16(vec2(p.v.v[from], p.v.v[from + 1u]));
}
