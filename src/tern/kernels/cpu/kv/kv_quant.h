// The 8-bit KV cache's dequantizers on the CPU: the format and its scalar conversions are
// blocks/kv_row_format.h's; attention dequantizes per ISA (arch/x86/{avx2,avx512}/kv_dequant.cpp,
// arch/arm/neon/kv_dequant.cpp) with the format's scalar code as the twin each is tested against;
// all give the same bits, since a code's value and the product with its scale are exact or
// rounded once.
#pragma once

#include <cstdint>

#include "tern/blocks/kv_row_format.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// The dequantizer of `dtype` (Int8, Fp8E4M3, Fp8E5M2) at `isa` (Amx uses Avx512's, Dotprod
// and I8mm Neon's); throws
// tern::Error for another dtype or an ISA this CPU lacks.
KvDequantizeFn kv_dequantize_fn(KvDtype dtype, Isa isa);
inline KvDequantizeFn kv_dequantize_fn(KvDtype dtype) {
  return kv_dequantize_fn(dtype, best_isa());
}

// One ISA's three dequantizers, picked by dtype (nullptr for the unscaled dtypes).
inline KvDequantizeFn select_kv_dequantize(KvDtype dtype, KvDequantizeFn int8, KvDequantizeFn e4m3,
                                           KvDequantizeFn e5m2) {
  return dtype == KvDtype::Int8      ? int8
         : dtype == KvDtype::Fp8E4M3 ? e4m3
         : dtype == KvDtype::Fp8E5M2 ? e5m2
                                     : nullptr;
}

// The scalar twins (blocks/kv_row_format.h's dequantizers), which the others are tested
// against.
KvDequantizeFn scalar_kv_dequantize(KvDtype dtype);
// Per ISA, nullptr for a dtype the file does not cover (arch/x86/{avx2,avx512}/kv_dequant.cpp,
// arch/arm/neon/kv_dequant.cpp: every ARM level).
KvDequantizeFn avx2_kv_dequantize(KvDtype dtype);
KvDequantizeFn avx512_kv_dequantize(KvDtype dtype);
KvDequantizeFn neon_kv_dequantize(KvDtype dtype);

}  // namespace tern::cpu
