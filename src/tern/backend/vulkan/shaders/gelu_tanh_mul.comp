#version 450
// out[i] = gelu_tanh(gate[i]) · up[i], gelu_tanh(x) = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))):
// Gemma's GeGLU (PyTorch's gelu(approximate="tanh")). The CPU takes tanh in double; here in
// float as 0.5 x (1 + tanh(u)) = x · sigmoid(2u), which needs no tanh (a driver may take tanh
// as a quotient of exponentials, inexact near 0 and overflowing far from it). out may be gate.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats gate; Floats up; Floats outp; uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i >= p.n) return;
  const float g = p.gate.v[i];
  const float u = 0.7978845608 * (g + 0.044715 * g * g * g);
  p.outp.v[i] = g / (1.0 + exp(-2.0 * u)) * p.up.v[i];
}
