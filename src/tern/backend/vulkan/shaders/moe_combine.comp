#version 450
// A mixture of experts' output, one workgroup per token: out[token, :] = (with a shared expert:
// its output, already in `out`, times sigmoid(x[token, :] · shared_gate); else 0) + Σ_j
// weights[token, j] · routed[token · top_k + j, :], the routes in the router's order, as the
// CPU backend sums them.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats outp; Floats routed; Floats weights; Floats x; Floats shared_gate;
  uint h; uint top_k; uint has_shared; uint pad;
} p;
shared float partial[64];
void main() {
  const uint token = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
  const uint lid = gl_LocalInvocationID.x;
  float g = 0.0;
  if (p.has_shared != 0u) {
    float z = 0.0;
    for (uint c = lid; c < p.h; c += 64u) z += p.x.v[token * p.h + c] * p.shared_gate.v[c];
    partial[lid] = z;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
      if (lid < w) partial[lid] += partial[lid + w];
      barrier();
    }
    g = 1.0 / (1.0 + exp(-partial[0]));
  }
  for (uint c = lid; c < p.h; c += 64u) {
    float o = p.has_shared != 0u ? p.outp.v[token * p.h + c] * g : 0.0;
    for (uint j = 0u; j < p.top_k; ++j) {
      const uint route = token * p.top_k + j;
      o += p.weights.v[route] * p.routed.v[route * p.h + c];
    }
    p.outp.v[token * p.h + c] = o;
  }
}
