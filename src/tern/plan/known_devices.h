// Well-known accelerators and their vendor figures, for the plan's "where would it fit, how
// fast" table. Memory as the vendor states it: GPUs' "24 GB" are GiB (24,576 MiB), H200's
// 141 GB decimal, Apple's unified memory GiB (all of it, though macOS keeps some back).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tern::plan {

struct KnownDevice {
  std::string_view name;
  double bandwidth = 0;  // bytes/s
  uint64_t memory = 0;   // bytes
};

std::span<const KnownDevice> known_devices();

}  // namespace tern::plan
