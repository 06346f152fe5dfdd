// The interference experiment's view of a run: the streams being measured (short requests) and
// long prompts that arrive now and then. A long prefill shows as a gap between two tokens of
// the streams; with a few long prompts among thousands of gaps, the p99 hides it, so the
// worst gap is reported beside it, and a timeline of every gap with the long arrivals marked.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tern/bench/metrics.h"

namespace tern::bench {

// Every inter-token gap of the successful `streams` at the time it ended (seconds since the
// run's start), in time order.
struct TimedGap {
  double end = 0;      // when the later token arrived
  double seconds = 0;  // the gap before it
};
std::vector<TimedGap> timed_gaps(std::span<const RequestRecord> streams);

// The largest of them (zeros when there is none).
TimedGap worst_gap(std::span<const RequestRecord> streams);

// "Long requests" and "worst gap" lines for the summary, in the table's layout: how many long
// requests, their TTFT (mean, median, the chosen percentiles, max) and E2EL, and the streams'
// worst gap and when it ended.
std::string interference_section(std::span<const RequestRecord> streams,
                                 std::span<const RequestRecord> long_requests,
                                 std::span<const double> percentiles);

// The same for the result JSON: "max_itl_ms", "max_itl_end_s", "long_completed",
// "long_failed", "long_ttfts", "long_start_times", "mean_long_ttft_ms", …
nlohmann::ordered_json interference_json(std::span<const RequestRecord> streams,
                                         std::span<const RequestRecord> long_requests,
                                         std::span<const double> percentiles);

// An SVG of the streams' gaps over the run (x: seconds since the start, y: gap in ms, one dot
// per gap), with a dashed line at each long request's arrival and a shaded band until its
// first token.
std::string itl_timeline_svg(std::span<const RequestRecord> streams,
                             std::span<const RequestRecord> long_requests,
                             const std::string& title);

}  // namespace tern::bench
