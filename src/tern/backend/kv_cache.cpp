// The checks every backend's cache shares: they need only the config.
#include "tern/backend/kv_cache.h"

#include <string>

#include "tern/core/error.h"

namespace tern {

void KvCache::check_slot_mapping(std::span<const int64_t> slot_mapping) const {
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot == -1 || (slot >= 0 && slot < num_slots())) continue;
    throw Error("kv cache: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                " is neither -1 nor a slot of the " + std::to_string(num_slots()) +
                " in the cache");
  }
}

}  // namespace tern
