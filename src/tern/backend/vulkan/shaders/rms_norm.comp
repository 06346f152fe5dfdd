#version 450
// out[r, :] = x[src, :] / rms(x[src, :]) · weight, one workgroup per output row r, where src is
// rows[r] when a row list is given (the logit rows) and r otherwise. The sum of squares runs in a
// fixed order (strided partial sums, then a fixed tree), so a row's bits do not depend on the
// batch. out may be x.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x; Floats outp; Floats weight; Ints rows;
  uint num_rows; uint dim; float eps; uint has_rows;
} p;
shared float partial[64];
void main() {
  const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
  if (r >= p.num_rows) return;
  const uint src = p.has_rows != 0u ? uint(p.rows.v[r]) : r;
  const uint lid = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint i = lid; i < p.dim; i += 64u) {
    const float v = p.x.v[src * p.dim + i];
    s += v * v;
  }
  partial[lid] = s;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lid < w) partial[lid] += partial[lid + w];
    barrier();
  }
  const float scale = 1.0 / sqrt(partial[0] / float(p.dim) + p.eps);
  for (uint i = lid; i < p.dim; i += 64u)
    p.outp.v[r * p.dim + i] = p.x.v[src * p.dim + i] * scale * p.weight.v[i];
}
