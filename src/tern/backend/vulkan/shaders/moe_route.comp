#version 450
// A mixture of experts' routing, one invocation per token, as cpu::route_top_k: the softmax of
// the token's router logits, its top_k experts (the higher probability first, the lower index
// on a tie) into experts[token, :] and their probabilities into weights[token, :], renormalised
// to sum 1 when `normalize`. A token's choice depends on its own logits only. top_k ≤ 16 (the
// backend refuses more).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats logits; Ints experts; Floats weights;
  uint t; uint n; uint top_k; uint normalize;
} p;
void main() {
  const uint token = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 64u;
  if (token >= p.t) return;
  const uint base = token * p.n;
  float top = p.logits.v[base];
  for (uint e = 1u; e < p.n; ++e) top = max(top, p.logits.v[base + e]);
  float sum = 0.0;
  for (uint e = 0u; e < p.n; ++e) sum += exp(p.logits.v[base + e] - top);
  float w[16];
  int chosen[16];
  uint count = 0u;
  for (uint e = 0u; e < p.n; ++e) {
    const float pe = exp(p.logits.v[base + e] - top) / sum;
    if (count == p.top_k && !(pe > w[p.top_k - 1u])) continue;  // ties keep the lower index
    uint at = count < p.top_k ? count++ : p.top_k - 1u;
    while (at > 0u && pe > w[at - 1u]) {
      w[at] = w[at - 1u];
      chosen[at] = chosen[at - 1u];
      --at;
    }
    w[at] = pe;
    chosen[at] = int(e);
  }
  float total = 0.0;
  for (uint j = 0u; j < p.top_k; ++j) total += w[j];
  for (uint j = 0u; j < p.top_k; ++j) {
    p.experts.v[token * p.top_k + j] = chosen[j];
    p.weights.v[token * p.top_k + j] = p.normalize != 0u ? w[j] / total : w[j];
  }
}
