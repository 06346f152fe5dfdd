// What every kernel shares: tensors are passed as device addresses in push constants
// (GL_EXT_buffer_reference), never bound through descriptors.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Words4 { uvec4 v[]; };

// Element i of an array of f16 stored two to a word.
float half_at(Words a, uint i) { return unpackHalf2x16(a.v[i >> 1])[i & 1u]; }

// Byte k of the bytes that start at word `base` of `a`.
uint byte_at(Words a, uint base, uint k) { return (a.v[base + (k >> 2)] >> (8u * (k & 3u))) & 0xFFu; }
