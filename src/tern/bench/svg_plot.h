// A self-contained SVG of the benchmark's latency distributions: one panel per metric (TTFT,
// TPOT, ITL, E2EL), each the empirical CDF of its samples in milliseconds with axes, ticks,
// labels and the median and p99 marked. Opens in any browser; no plotting library needed.
#pragma once

#include <string>
#include <vector>

namespace tern::bench {

struct LatencySeries {
  std::string name;             // e.g. "TTFT"
  std::vector<double> seconds;  // the samples
};

// `title` heads the figure (e.g. the model and the run's settings).
std::string latency_cdf_svg(const std::vector<LatencySeries>& series, const std::string& title);

// "Nice" axis ticks covering [0, max]: 0, step, 2·step, ... with step 1, 2 or 5 × 10^k.
std::vector<double> axis_ticks(double max_value, int target_count = 5);

}  // namespace tern::bench
