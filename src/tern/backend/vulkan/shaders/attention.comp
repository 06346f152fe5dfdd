#version 450
// Causal paged attention, one workgroup per (query token, head), flash-style: the keys of the
// token's context (all of it, or its last `window` keys: sliding-window attention) are visited
// in chunks of 64 (one per invocation) with a running max and sum, and each invocation owns up
// to 4 of the head's output dims. With sinks (gpt-oss's), each head's sink logit joins the
// softmax's denominator as a key with no value. Grouped-query heads read
// kv head head / (n_heads / n_kv_heads). Every sum runs in a fixed order and chunks start at
// absolute positions, so a token's output depends only on its q row and its context: the same
// bits alone or in any batch. head_dim: even, at most 256. With KV_INT8, the cache holds int8
// codes (a byte each) and an f16 scale per slot and kv head (write_kv_int8.comp).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats q; Floats outp; Words k_cache; Words v_cache;
  Ints block_tables; Ints seq_of_token; Ints context_lens;
  Words k_scales; Words v_scales;
  uint max_blocks; uint block_size; uint n_heads; uint n_kv_heads; uint head_dim; float scale;
  uint window; uint has_sinks; Floats sinks;
} p;
shared float qs[256];
shared float ps[64];
shared uint slot_of[64];
const float kNone = -1.0e30;
void main() {
  const uint head = gl_WorkGroupID.x;
  const uint token = gl_WorkGroupID.y + gl_WorkGroupID.z * 65535u;
  const uint lid = gl_LocalInvocationID.x;
  const uint kvh = head / (p.n_heads / p.n_kv_heads);
  const uint row_elems = p.n_kv_heads * p.head_dim;
  const uint q_base = (token * p.n_heads + head) * p.head_dim;
  for (uint d = lid; d < p.head_dim; d += 64u) qs[d] = p.q.v[q_base + d];
  barrier();
  const uint ctx = uint(p.context_lens.v[token]);
  const uint table = uint(p.seq_of_token.v[token]) * p.max_blocks;
  float m = kNone;
  float l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  const uint lo = p.window > 0u && ctx > p.window ? ctx - p.window : 0u;  // the first key seen
  for (uint c0 = lo / 64u * 64u; c0 < ctx; c0 += 64u) {
    const uint key = c0 + lid;
    const bool seen = key >= lo && key < ctx;
    float s = kNone;
    if (seen) {
      const uint block = uint(p.block_tables.v[table + key / p.block_size]);
      const uint slot = block * p.block_size + key % p.block_size;
      slot_of[lid] = slot;
      const uint base = slot * row_elems + kvh * p.head_dim;
      float dot = 0.0;
#ifdef KV_INT8
      for (uint d = 0u; d < p.head_dim; d += 4u) {
        const int word = int(p.k_cache.v[(base + d) >> 2]);
        for (uint j = 0u; j < 4u; ++j) dot += qs[d + j] * float(bitfieldExtract(word, int(8u * j), 8));
      }
      dot *= half_at(p.k_scales, slot * p.n_kv_heads + kvh);
#else
      for (uint d = 0u; d < p.head_dim; d += 2u) {
        const vec2 kv = unpackHalf2x16(p.k_cache.v[(base + d) >> 1]);
        dot += qs[d] * kv.x;
        dot += qs[d + 1u] * kv.y;
      }
#endif
      s = dot * p.scale;
    }
    ps[lid] = s;
    barrier();
    float chunk_max = kNone;
    for (uint j = 0u; j < 64u; ++j) chunk_max = max(chunk_max, ps[j]);
    const float new_m = max(m, chunk_max);
    const float correction = exp(m - new_m);
    barrier();
    ps[lid] = seen ? exp(s - new_m) : 0.0;
    barrier();
    float sum = 0.0;
    for (uint j = 0u; j < 64u; ++j) sum += ps[j];
    l = l * correction + sum;
    const uint keys = min(64u, ctx - c0);
    const uint first = lo > c0 ? lo - c0 : 0u;
    for (uint i = 0u; i < 4u; ++i) {
      const uint d = lid + 64u * i;
      if (d >= p.head_dim) break;
      float a = acc[i] * correction;
      for (uint j = first; j < keys; ++j) {
#ifdef KV_INT8
        const uint e = slot_of[j] * row_elems + kvh * p.head_dim + d;
        const float code = float(bitfieldExtract(int(p.v_cache.v[e >> 2]), int(8u * (e & 3u)), 8));
        a += ps[j] * (code * half_at(p.v_scales, slot_of[j] * p.n_kv_heads + kvh));
#else
        a += ps[j] * half_at(p.v_cache, slot_of[j] * row_elems + kvh * p.head_dim + d);
#endif
      }
      acc[i] = a;
    }
    m = new_m;
    barrier();
  }
  // The sink moves the sums to the larger max and adds to the denominator alone.
  float scale_out = 1.0 / l;
  if (p.has_sinks != 0u) {
    const float sink = p.sinks.v[head];
    const float top = max(m, sink);
    const float alpha = exp(m - top);
    scale_out = alpha / (l * alpha + exp(sink - top));
  }
  for (uint i = 0u; i < 4u; ++i) {
    const uint d = lid + 64u * i;
    if (d >= p.head_dim) break;
    p.outp.v[q_base + d] = ctx > 0u ? acc[i] * scale_out : 0.0;
  }
}
