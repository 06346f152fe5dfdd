// Run-time dispatch of the dot kernels: which ISA this CPU and OS support, and the kernels of
// a (weight type, ISA) from the table in kernel_table.cpp.
#include "tern/kernels/cpu/vec_dot.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "tern/core/error.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

#if defined(__x86_64__)
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
#elif defined(__aarch64__)
// What the kernel reports the CPU has (under qemu-user: what the emulated -cpu model has).
// The files of arch/arm/dotprod/ and i8mm/ are compiled with exactly these features.
Isa detect_isa() {
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  if (!(hwcap & HWCAP_ASIMD)) return Isa::Scalar;
  if (!(hwcap & HWCAP_ASIMDDP)) return Isa::Neon;
  if (!(hwcap2 & HWCAP2_I8MM)) return Isa::Dotprod;
  return Isa::I8mm;
}
#else
Isa detect_isa() { return Isa::Scalar; }
#endif

Isa decide_best_isa() {
  const Isa detected = detect_isa();
  const char* env = std::getenv("TERN_ISA");
  if (env == nullptr || *env == '\0') return detected;
  // Only ever lower: an unknown name, another architecture's level or a level above the
  // CPU's leaves the detected one.
  for (Isa level : isa_levels())
    if (std::string_view(env) == isa_name(level) && isa_includes(detected, level)) return level;
  return detected;
}

}  // namespace

void check_isa_request() {
  const char* env = std::getenv("TERN_ISA");
  if (env == nullptr || *env == '\0') return;
  const Isa detected = detect_isa();
  std::string runs;
  for (Isa level : isa_levels()) {
    if (!isa_includes(detected, level)) continue;
    if (std::string_view(env) == isa_name(level)) return;
    runs += std::string(runs.empty() ? "" : ", ") + isa_name(level);
  }
  throw Error("TERN_ISA=" + std::string(env) + ": not a level this CPU runs (it runs " + runs +
              ")");
}

bool request_amx_permission() {
#if defined(__x86_64__)
  // ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA: without it the first tile instruction
  // faults. Granted per process, once.
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
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
    case Isa::Neon:
      return "neon";
    case Isa::Dotprod:
      return "dotprod";
    case Isa::I8mm:
      return "i8mm";
  }
  return "unknown";
}

Isa isa_parent(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
    case Isa::Avx2:
    case Isa::Neon:
      return Isa::Scalar;
    case Isa::Avx512:
      return Isa::Avx2;
    case Isa::Amx:
      return Isa::Avx512;
    case Isa::Dotprod:
      return Isa::Neon;
    case Isa::I8mm:
      return Isa::Dotprod;
  }
  return Isa::Scalar;
}

bool isa_includes(Isa isa, Isa level) {
  for (;; isa = isa_parent(isa)) {
    if (isa == level) return true;
    if (isa == Isa::Scalar) return false;
  }
}

const std::vector<Isa>& isa_levels() {
#if defined(__x86_64__)
  static const std::vector<Isa> levels = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx};
#elif defined(__aarch64__)
  static const std::vector<Isa> levels = {Isa::Scalar, Isa::Neon, Isa::Dotprod, Isa::I8mm};
#else
  static const std::vector<Isa> levels = {Isa::Scalar};
#endif
  return levels;
}

Isa best_isa() {
  static const Isa isa = decide_best_isa();
  return isa;
}

bool isa_supported(Isa isa) {
  static const Isa detected = detect_isa();
  return isa_includes(detected, isa);
}

const TypeKernels& type_kernels(DType weight, Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
  const auto t = static_cast<int>(weight);
  if (t < 0 || t >= kNumDTypes || kernel_row(weight, isa).kernels.vec_dot == nullptr)
    throw Error("no matmul kernels for weight type " + std::string(dtype_name(weight)));
  return kernel_row(weight, isa).kernels;
}

}  // namespace tern::cpu
