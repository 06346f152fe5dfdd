// The Dotprod level's integer-dot policy (lanes16_neon.h): sdot sums 4 int8 products per lane
// in one instruction. Only for files compiled with +dotprod (dotprod/, i8mm/).
#pragma once

#include <arm_neon.h>

namespace tern::cpu {
namespace {

struct SdotDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t x, int8x16_t y) { return vdotq_s32(acc, x, y); }
};

}  // namespace
}  // namespace tern::cpu
