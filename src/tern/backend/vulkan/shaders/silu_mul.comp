#version 450
// out[i] = silu(gate[i]) · up[i]: the MLP's activation. out may be gate.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats gate; Floats up; Floats outp; uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i >= p.n) return;
  const float g = p.gate.v[i];
  p.outp.v[i] = g / (1.0 + exp(-g)) * p.up.v[i];
}
