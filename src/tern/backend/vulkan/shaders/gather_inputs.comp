#version 450
// An act-order matrix's inputs gathered in its order, y[t, j] = x[t, order[j]]
// (WeightMatrix::input_order), so that the matmul reads them as the checkpoint's columns lie.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { Floats x; Floats y; Ints order; uint cols; uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
  if (i >= p.n) return;
  const uint t = i / p.cols;
  p.y.v[i] = p.x.v[t * p.cols + uint(p.order.v[i - t * p.cols])];
}
