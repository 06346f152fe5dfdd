// The device table: NVIDIA's and Apple's published memory bandwidth and capacity.
#include "tern/plan/known_devices.h"

#include <array>

namespace tern::plan {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

constexpr std::array kDevices{
    KnownDevice{"RTX 3090", 936e9, 24 * kGiB},    KnownDevice{"RTX 4090", 1008e9, 24 * kGiB},
    KnownDevice{"A100-80G", 2039e9, 80 * kGiB},   KnownDevice{"H100 SXM", 3350e9, 80 * kGiB},
    KnownDevice{"H200", 4800e9, 141'000'000'000}, KnownDevice{"Apple M2 Max", 400e9, 96 * kGiB},
};

}  // namespace

std::span<const KnownDevice> known_devices() { return kDevices; }

}  // namespace tern::plan
