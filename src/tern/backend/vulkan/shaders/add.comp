#version 450
// x[i] += y[i]: the residual connection.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats x; Floats y; uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i < p.n) p.x.v[i] = p.x.v[i] + p.y.v[i];
}
