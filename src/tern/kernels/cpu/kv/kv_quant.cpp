// The CPU backend's dequantizers of the 8-bit KV rows (blocks/kv_row_format.h), one per ISA
// level, with the format's scalar ones as the twin each is tested against.
#include "tern/kernels/cpu/kv/kv_quant.h"

#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/kernel_table.h"

namespace tern::cpu {

KvDequantizeFn scalar_kv_dequantize(KvDtype dtype) {
  return select_kv_dequantize(dtype, dequantize_kv_int8, dequantize_kv_e4m3, dequantize_kv_e5m2);
}

KvDequantizeFn kv_dequantize_fn(KvDtype dtype, Isa isa) {
  if (!kv_dtype_has_scales(dtype))
    throw Error("kv cache: " + std::string(kv_dtype_name(dtype)) + " rows are not quantized");
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
  const OpKernels& ops = op_kernels(isa);
  return select_kv_dequantize(dtype, ops.kv_dequantize_int8, ops.kv_dequantize_e4m3,
                              ops.kv_dequantize_e5m2);
}

}  // namespace tern::cpu
