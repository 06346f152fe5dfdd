#version 450
// gpt-oss's experts' activation: with g = min(gate[i], limit) and u = clamp(up[i], −limit,
// limit), out[i] = g · sigmoid(1.702 g) · (u + 1), as cpu::clamped_swiglu. out may be gate.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats gate; Floats up; Floats outp; uint n; float limit; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i >= p.n) return;
  const float g = min(p.gate.v[i], p.limit);
  const float u = clamp(p.up.v[i], -p.limit, p.limit);
  p.outp.v[i] = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
}
