#version 450
// out[i] = gelu_tanh(gate[i]) · up[i], gelu_tanh(x) = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))):
// Gemma's GeGLU (PyTorch's gelu(approximate="tanh")). The CPU takes tanh in double; here in
// float, within the backend's stated tolerance. tanh's argument is clamped at ±10, where tanh
// is 1 in float, since a driver may take tanh as a quotient of exponentials that overflow.
// out may be gate.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats gate; Floats up; Floats outp; uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i >= p.n) return;
  const float g = p.gate.v[i];
  const float inner = clamp(0.7978845608 * (g + 0.044715 * g * g * g), -10.0, 10.0);
  p.outp.v[i] = 0.5 * g * (1.0 + tanh(inner)) * p.up.v[i];
}
