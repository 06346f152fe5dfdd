// Run-time dispatch of the dot kernels: which ISA this CPU and OS support, and the table of
// kernels per (weight type, ISA), falling back to a lower ISA where a level lacks a kernel.
#include "tern/kernels/cpu/vec_dot.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tern/core/error.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return static_cast<uint64_t>(edx) << 32 | eax;
}

// What the hardware and the OS (XSAVE state enabled in XCR0) allow; the files of arch/x86/avx2/
// and avx512/ are compiled with exactly these feature sets.
Isa detect_isa() {
  uint32_t a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::Scalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29);
  if (!osxsave || !avx) return Isa::Scalar;
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::Scalar;  // XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::Scalar;
  const bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  if (!(avx2 && fma && f16c && bmi2)) return Isa::Scalar;
  const bool amx_int8 = (d & (1u << 24)) && (d & (1u << 25));  // AMX-TILE, AMX-INT8
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) &&
                      (b & (1u << 31)) &&  // F DQ BW VL
                      (c & (1u << 11));    // VNNI
  uint32_t a1 = 0, b1, c1, d1;
  __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  const bool avx512_bf16 = a1 & (1u << 5);
  const bool zmm_state = (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  if (!(avx512 && avx512_bf16 && zmm_state)) return Isa::Avx2;
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  if (amx_int8 && tile_state && request_amx_permission()) return Isa::Amx;
  return Isa::Avx512;
}

Isa decide_best_isa() {
  Isa isa = detect_isa();
  if (const char* env = std::getenv("TERN_ISA"); env != nullptr && *env != '\0') {
    const std::string_view want(env);
    Isa forced = isa;
    if (want == "scalar")
      forced = Isa::Scalar;
    else if (want == "avx2")
      forced = Isa::Avx2;
    else if (want == "avx512")
      forced = Isa::Avx512;
    else if (want == "amx")
      forced = Isa::Amx;
    // Only ever lower: an unknown value or a level above the CPU's leaves the detected one.
    if (static_cast<int>(forced) < static_cast<int>(isa)) isa = forced;
  }
  return isa;
}

constexpr int kNumDTypes = static_cast<int>(DType::Q8_K) + 1;
constexpr int kNumIsas = 4;

DType activation_of(DType weight) {
  switch (weight) {
    // F16 weights take f32 activations: then only the weights need widening (one conversion
    // per FMA rather than two), and the activations are not rounded.
    case DType::F32:
    case DType::F16:
      return DType::F32;
    case DType::BF16:
      return weight;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    default:
      return DType::Q8_K;
  }
}

VecDotFn simd_vec_dot(DType weight, Isa isa) {
  VecDotFn fn = nullptr;
  if (isa == Isa::Amx && ((fn = amx_vec_dot_q(weight)) || (fn = amx_vec_dot_k(weight)))) return fn;
  // Q4_0 and Q8_0 have one arithmetic on both AVX-512 levels (its GEMV and packed dots are
  // AVX-512 VNNI; the AMX level adds tiles for many tokens).
  if (isa == Isa::Avx512 && (fn = amx_vec_dot_q(weight))) return fn;
  if (isa == Isa::Avx512 || isa == Isa::Amx) {
    if ((fn = avx512_vec_dot_q(weight)) || (fn = avx512_vec_dot_k(weight)) ||
        (fn = avx512_vec_dot_float(weight)))
      return fn;
  }
  if (isa == Isa::Avx512 || isa == Isa::Avx2) {
    if ((fn = avx2_vec_dot_q(weight)) || (fn = avx2_vec_dot_k(weight)) ||
        (fn = avx2_vec_dot_float(weight)))
      return fn;
  }
  return scalar_vec_dot(weight);
}

// Likewise only where the level's vec_dot is the one these rows repeat.
VecDotRowsFn simd_vec_dot_rows(DType weight, Isa isa) {
  if ((isa == Isa::Avx512 || isa == Isa::Amx) &&
      simd_vec_dot(weight, isa) == avx512_vec_dot_float(weight))
    return avx512_vec_dot_rows_float(weight);
  return nullptr;
}

// Only where the tile's level is the one whose vec_dot the table holds: a tile must
// reproduce exactly that vec_dot.
GemmTileFn simd_gemm_tile(DType weight, Isa isa) {
  if (isa == Isa::Amx) {
    // The whole-matmul amx_gemm_q / amx_gemm_k instead.
    if (amx_vec_dot_q(weight) != nullptr || amx_vec_dot_k(weight) != nullptr) return nullptr;
    isa = Isa::Avx512;
  }
  if (isa == Isa::Avx512) {
    if (amx_vec_dot_q(weight) != nullptr) return nullptr;  // vnni_gemm_q instead
    if (avx512_vec_dot_q(weight) != nullptr) return avx512_gemm_tile_q(weight);
    if (avx512_vec_dot_k(weight) != nullptr) return avx512_gemm_tile_k(weight);
    if (avx512_vec_dot_float(weight) != nullptr) return avx512_gemm_tile_float(weight);
    return nullptr;
  }
  if (isa == Isa::Avx2) {
    if (avx2_vec_dot_q(weight) != nullptr) return avx2_gemm_tile_q(weight);
    if (avx2_vec_dot_k(weight) != nullptr) return avx2_gemm_tile_k(weight);
  }
  return nullptr;
}

struct KernelTable {
  // entries[isa][dtype]; vec_dot == nullptr marks a weight type without kernels.
  std::array<std::array<TypeKernels, kNumDTypes>, kNumIsas> entries{};
  KernelTable() {
    for (int i = 0; i < kNumIsas; ++i) {
      for (int t = 0; t < kNumDTypes; ++t) {
        const auto weight = static_cast<DType>(t);
        TypeKernels& e = entries[i][t];
        e.weight = weight;
        e.activation = activation_of(weight);
        if (scalar_vec_dot(weight) == nullptr) continue;
        e.quantize_activation = scalar_quantize_activation(e.activation);
        e.vec_dot = simd_vec_dot(weight, static_cast<Isa>(i));
        e.vec_dot_rows = simd_vec_dot_rows(weight, static_cast<Isa>(i));
        e.gemm_tile = simd_gemm_tile(weight, static_cast<Isa>(i));
        if (static_cast<Isa>(i) == Isa::Amx) {
          e.gemm = amx_gemm_q(weight) ? amx_gemm_q(weight) : amx_gemm_k(weight);
          e.packed = amx_packed_q(weight) ? amx_packed_q(weight) : amx_packed_k(weight);
        } else if (static_cast<Isa>(i) == Isa::Avx512) {
          e.gemm = vnni_gemm_q(weight);
          e.packed = vnni_packed_q(weight);
        }
      }
    }
  }
};

}  // namespace

bool request_amx_permission() {
  // ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA: without it the first tile instruction
  // faults. Granted per process, once.
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Amx:
      return "amx";
  }
  return "unknown";
}

Isa best_isa() {
  static const Isa isa = decide_best_isa();
  return isa;
}

bool isa_supported(Isa isa) {
  static const Isa detected = detect_isa();
  return static_cast<int>(isa) <= static_cast<int>(detected);
}

const TypeKernels& type_kernels(DType weight, Isa isa) {
  static const KernelTable table;
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
  const auto t = static_cast<int>(weight);
  if (t < 0 || t >= kNumDTypes || table.entries[static_cast<int>(isa)][t].vec_dot == nullptr)
    throw Error("no matmul kernels for weight type " + std::string(dtype_name(weight)));
  return table.entries[static_cast<int>(isa)][t];
}

}  // namespace tern::cpu
