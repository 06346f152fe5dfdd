// Self-contained SVG figures of the benchmarks, opened in any browser, no plotting library
// needed: the latency distributions of `tern bench serve` (one panel per metric, each the
// empirical CDF of its samples in milliseconds, the median and p99 marked), and the bar and
// x-y charts of `tern bench suite`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tern::bench {

struct LatencySeries {
  std::string name;             // e.g. "TTFT"
  std::vector<double> seconds;  // the samples
};

// `title` heads the figure (e.g. the model and the run's settings).
std::string latency_cdf_svg(const std::vector<LatencySeries>& series, const std::string& title);

// Horizontal grouped bars: one group per category, one bar per series, each bar's value written
// at its end. A missing value (NaN) draws no bar.
struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category
  std::string color;           // CSS colour
};
struct BarChart {
  std::string title;
  std::string value_label;  // the x axis, e.g. "decode tokens/s"
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
};
std::string bar_chart_svg(const BarChart& chart);

// Points on linear axes from 0: a series is a line through its points or a dot at each.
struct XySeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  std::string color;
  bool line = false;
  bool dashed = false;
};
struct XyPanel {
  std::string title;
  std::string x_label, y_label;
  std::vector<XySeries> series;
  std::vector<std::pair<double, double>> bands;  // x ranges shaded grey (with a line at the start)
  double x_max = 0, y_max = 0;                   // 0: from the data
};
// Panels stacked top to bottom under one title, each with its own legend.
std::string xy_chart_svg(const std::vector<XyPanel>& panels, const std::string& title);

// "Nice" axis ticks covering [0, max]: 0, step, 2·step, ... with step 1, 2 or 5 × 10^k.
std::vector<double> axis_ticks(double max_value, int target_count = 5);

}  // namespace tern::bench
