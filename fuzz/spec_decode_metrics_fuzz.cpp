// Fuzzes the reader of a server's /metrics page that `tern bench serve` scrapes for
// spec-decode counters: any text parses (into counters or nothing) and reports without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/bench/spec_decode_metrics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tern::bench::SpecDecodeCounters before =
      tern::bench::parse_spec_decode_counters(text.substr(0, size / 2));
  const tern::bench::SpecDecodeCounters after = tern::bench::parse_spec_decode_counters(text);
  (void)tern::bench::spec_decode_section(before, after);
  (void)tern::bench::spec_decode_json(before, after)
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
