// The AMX tile configuration, shared by the tile files (arch/x86/amx/) and only them.
// Internal linkage, so each file compiles its own copy with its own flags.
#pragma once

#include <cstdint>

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"

namespace tern::cpu {
namespace {

// LDTILECFG's 64-byte operand: palette 1, then per tile register its bytes per row and rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads `cfg` into this thread's tile state (per thread: each thread of a parallel region
// loads it before its first tile instruction).
inline void load_tile_config(const TileConfig& cfg) {
  // GCC 12 may drop the stores that filled cfg as dead before _tile_loadconfig reads them (it
  // does not see the instruction read memory): make them visible to it.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

}  // namespace
}  // namespace tern::cpu
