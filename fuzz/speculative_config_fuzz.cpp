// Fuzzes --speculative-config: any bytes give a finalized config or a tern::Error, and an
// accepted config is internally consistent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/core/error.h"
#include "tern/spec_decode/speculative_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tern::SpeculativeConfig c =
        tern::parse_speculative_config(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!c.enabled() || c.num_speculative_tokens < 1 || c.num_speculative_tokens > 32)
      __builtin_trap();
    if (c.method == tern::SpeculativeMethod::kNgram &&
        (c.prompt_lookup_min < 1 || c.prompt_lookup_min > c.prompt_lookup_max || !c.model.empty()))
      __builtin_trap();
    if (c.method == tern::SpeculativeMethod::kDraftModel && c.model.empty()) __builtin_trap();
    (void)c.describe();
  } catch (const tern::Error&) {
  }
  return 0;
}
