// The suite's four figures, from the rows of results.json.
#include "tern/bench/suite/suite_plots.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/bench/svg_plot.h"
#include "tern/bench/svg_text.h"

namespace tern::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};

double metric(const SuiteRow& row, const char* key) {
  const auto it = row.metrics.find(key);
  return it != row.metrics.end() && it->is_number() ? it->get<double>() : kNaN;
}

std::vector<const SuiteRow*> rows_of(const SuiteResults& r, const std::string& section) {
  std::vector<const SuiteRow*> rows;
  for (const SuiteRow& row : r.rows)
    if (row.section == section) rows.push_back(&row);
  return rows;
}

// Decode tokens/s per weight type: tern, each other engine, and the ceiling.
std::string throughput_plot(const SuiteResults& r) {
  BarChart chart;
  chart.title = "Decode speed at batch 1 against the bandwidth ceiling";
  chart.value_label = "decode tokens/s (one sequence)";
  std::vector<std::string> engines;
  for (const SuiteRow* row : rows_of(r, "weights")) {
    if (std::find(chart.categories.begin(), chart.categories.end(), row->name) ==
        chart.categories.end())
      chart.categories.push_back(row->name);
    if (std::find(engines.begin(), engines.end(), row->engine) == engines.end())
      engines.push_back(row->engine);
  }
  auto index_of = [&](const std::string& name) {
    return static_cast<size_t>(std::find(chart.categories.begin(), chart.categories.end(), name) -
                               chart.categories.begin());
  };
  BarSeries ceiling{"ceiling (bandwidth / bytes a token reads)",
                    std::vector<double>(chart.categories.size(), kNaN), "#c7c7c7"};
  for (size_t e = 0; e < engines.size(); ++e) {
    BarSeries s{engines[e], std::vector<double>(chart.categories.size(), kNaN), kColors[e % 6]};
    for (const SuiteRow* row : rows_of(r, "weights"))
      if (row->engine == engines[e]) {
        s.values[index_of(row->name)] = metric(*row, "decode_tokens_per_s");
        if (!std::isfinite(ceiling.values[index_of(row->name)]))
          ceiling.values[index_of(row->name)] = metric(*row, "ceiling_tokens_per_s");
      }
    chart.series.push_back(std::move(s));
  }
  chart.series.push_back(std::move(ceiling));
  return bar_chart_svg(chart);
}

// Measured (α, speedup) of each speculative row, and the theory's curves.
std::string speculation_plot(const SuiteResults& r) {
  XyPanel panel;
  panel.x_label = "α (drafted tokens accepted)";
  panel.y_label = "decode speedup over plain decoding";
  panel.x_max = 1;
  const double c = r.draft_cost_ratio;
  int color = 0;
  for (int k : {4, 8}) {
    XySeries curve{"theory, K = " + std::to_string(k) + ", c = " + svg::fmt("%.3f", c),
                   {},
                   kColors[color++],
                   true,
                   true};
    for (int i = 0; i <= 100; ++i) {
      const double alpha = i / 100.0 * 0.999;
      curve.points.emplace_back(alpha, speculative_speedup(alpha, k, c));
    }
    panel.series.push_back(std::move(curve));
  }
  for (const SuiteRow* row : rows_of(r, "speculative")) {
    const double alpha = metric(*row, "acceptance_rate"), speedup = metric(*row, "speedup");
    if (!std::isfinite(alpha) || !std::isfinite(speedup)) continue;
    panel.series.push_back(
        {row->name + " (" + row->engine + ")", {{alpha, speedup}}, kColors[color++ % 6]});
  }
  panel.series.push_back({"plain decoding", {{0, 1}, {1, 1}}, "#7f7f7f", true, false});
  return xy_chart_svg({panel}, "What speculation buys, measured and predicted");
}

// The streams' gaps over time, one panel per setup on the same scale, long prefills shaded.
std::string itl_plot(const SuiteResults& r) {
  double x_max = 0, y_max = 0;
  for (const ItlTimeline& t : r.timelines) {
    for (const auto& [x, y] : t.gaps) x_max = std::max(x_max, x), y_max = std::max(y_max, y);
    for (const auto& [a, b] : t.long_requests) x_max = std::max(x_max, b);
  }
  std::vector<XyPanel> panels;
  int color = 0;
  for (const ItlTimeline& t : r.timelines) {
    XyPanel p;
    p.title = t.setup;
    p.x_label = "seconds since the start";
    p.y_label = "gap before a token (ms)";
    p.x_max = x_max;
    p.y_max = y_max;
    p.series.push_back({"streams' inter-token gaps", t.gaps, kColors[color++ % 6]});
    p.series.push_back({"long prompt: arrival to first token (shaded)", {}, "#bbbbbb"});
    p.bands = t.long_requests;
    panels.push_back(std::move(p));
  }
  return xy_chart_svg(panels, "Inter-token gaps of short streams while long prompts arrive");
}

std::string kv_capacity_plot(const SuiteResults& r) {
  BarChart chart;
  chart.title = "KV cache capacity by dtype";
  chart.value_label = "thousand tokens one GiB of KV cache holds";
  BarSeries capacity{"thousand tokens per GiB", {}, kColors[0]};
  for (const SuiteRow* row : rows_of(r, "kv_cache")) {
    if (row->engine != "tern") continue;
    chart.categories.push_back(row->name);
    capacity.values.push_back(metric(*row, "tokens_per_gib") / 1000);
  }
  chart.series = {capacity};
  return bar_chart_svg(chart);
}

}  // namespace

double speculative_speedup(double alpha, int k, double draft_cost) {
  const double tokens = alpha >= 1 ? k + 1 : (1 - std::pow(alpha, k + 1)) / (1 - alpha);
  return tokens / (k * draft_cost + 1);
}

std::vector<std::pair<std::string, std::string>> suite_plots(const SuiteResults& r) {
  std::vector<std::pair<std::string, std::string>> plots;
  if (!rows_of(r, "weights").empty()) plots.emplace_back("throughput.svg", throughput_plot(r));
  if (!rows_of(r, "speculative").empty())
    plots.emplace_back("speculation.svg", speculation_plot(r));
  if (!r.timelines.empty()) plots.emplace_back("itl_timeline.svg", itl_plot(r));
  if (!rows_of(r, "kv_cache").empty()) plots.emplace_back("kv_capacity.svg", kv_capacity_plot(r));
  return plots;
}

}  // namespace tern::bench
