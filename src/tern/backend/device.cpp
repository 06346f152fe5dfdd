// The devices this build has. Each backend folder contributes one; the list is the only place
// above the folders that names them.
#include "tern/backend/device.h"

#include <array>

#include "tern/backend/cpu/cpu_device.h"
#include "tern/core/error.h"

namespace tern {
namespace {

std::array<const Device*, 1> devices() { return {&cpu_device()}; }

}  // namespace

const Device& find_device(std::string_view name) {
  if (name.empty()) return *devices().front();
  for (const Device* d : devices())
    if (d->name() == name) return *d;
  throw Error("--device " + std::string(name) + ": this build has no such device (" +
              device_names() + ")");
}

std::string device_names() {
  std::string names;
  for (const Device* d : devices()) names += (names.empty() ? "" : ", ") + std::string(d->name());
  return names;
}

}  // namespace tern
