// Speculative decoding as a serving benchmark sees it: the server's spec-decode counters
// (tern's `tern:spec_decode_*`, vLLM's `vllm:spec_decode_*`) scraped from /metrics before and
// after a run, and the acceptance over the run from their change.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tern::bench {

struct SpecDecodeCounters {
  bool found = false;  // the page had the counters
  double drafts = 0.0;
  double draft_tokens = 0.0;
  double accepted_tokens = 0.0;
  std::map<int, double> accepted_per_position;
};

// Sums each counter over its label sets (any prefix before "spec_decode_"). Lines that are
// not such samples are skipped; a malformed value counts as absent.
SpecDecodeCounters parse_spec_decode_counters(std::string_view prometheus_text);

// The summary table's section for the run (acceptance rate, mean acceptance length, drafts,
// draft and accepted tokens, per-position acceptance), in its "{:<40} {:<10.2f}" rows; empty
// when the server drafted nothing during the run.
std::string spec_decode_section(const SpecDecodeCounters& before, const SpecDecodeCounters& after);

// The same figures for --save-result (spec_decode_* keys); null when nothing was drafted.
nlohmann::ordered_json spec_decode_json(const SpecDecodeCounters& before,
                                        const SpecDecodeCounters& after);

}  // namespace tern::bench
