#version 450
// Rotates q and k in place by the step's positions, one invocation per rotated pair of one
// head of one token. The cos/sin table is the CPU's (Rope::fill_cos_sin, made on the host from
// the positions once per step): [t, rotary_dim] = cos of the pairs, then their sin.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats q; Floats k; Floats table;
  uint t; uint n_heads; uint n_kv_heads; uint head_dim; uint rotary_dim; uint interleaved;
} p;
void main() {
  const uint pairs = p.rotary_dim / 2u;
  const uint heads = p.n_heads + p.n_kv_heads;
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 64u;
  if (i >= p.t * heads * pairs) return;
  const uint pair = i % pairs;
  const uint head = (i / pairs) % heads;
  const uint token = i / (pairs * heads);
  const float c = p.table.v[token * p.rotary_dim + pair];
  const float s = p.table.v[token * p.rotary_dim + pairs + pair];
  const uint a = p.interleaved != 0u ? 2u * pair : pair;
  const uint b = p.interleaved != 0u ? 2u * pair + 1u : pair + pairs;
  Floats x = head < p.n_heads ? p.q : p.k;
  const uint base = head < p.n_heads ? (token * p.n_heads + head) * p.head_dim
                                     : (token * p.n_kv_heads + head - p.n_heads) * p.head_dim;
  const float x0 = x.v[base + a];
  const float x1 = x.v[base + b];
  x.v[base + a] = x0 * c - x1 * s;
  x.v[base + b] = x0 * s + x1 * c;
}
