// Latency CDF panels drawn as plain SVG.
#include "tern/bench/svg_plot.h"

#include <algorithm>
#include <cmath>

#include "tern/bench/metrics.h"
#include "tern/bench/svg_text.h"

namespace tern::bench {
namespace {

using svg::escape_xml;
using svg::fmt;
using svg::tick_label;

constexpr double kPanelW = 460, kPanelH = 300;
constexpr double kLeft = 60, kRight = 20, kTop = 40, kBottom = 50;  // margins inside a panel

void draw_panel(std::string& svg, const LatencySeries& s, double ox, double oy) {
  const double plot_w = kPanelW - kLeft - kRight, plot_h = kPanelH - kTop - kBottom;
  const double x0 = ox + kLeft, y0 = oy + kTop + plot_h;  // the plot's lower-left corner
  std::vector<double> ms;
  for (double v : s.seconds) ms.push_back(v * 1000);
  std::sort(ms.begin(), ms.end());
  const double max_ms = ms.empty() ? 1 : std::max(ms.back(), 1e-3);
  const std::vector<double> xt = axis_ticks(max_ms);
  const double x_max = xt.back();
  auto px = [&](double v) { return x0 + v / x_max * plot_w; };
  auto py = [&](double f) { return y0 - f * plot_h; };

  std::string title = s.name + " CDF (n = " + std::to_string(ms.size()) + ")";
  svg += "<text x=\"" + fmt("%.1f", ox + kPanelW / 2) + "\" y=\"" + fmt("%.1f", oy + 24) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + escape_xml(title) +
         "</text>\n";
  // Grid and ticks.
  for (double t : xt) {
    svg += "<line x1=\"" + fmt("%.1f", px(t)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
           fmt("%.1f", px(t)) + "\" y2=\"" + fmt("%.1f", py(1)) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", px(t)) + "\" y=\"" + fmt("%.1f", y0 + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(t) + "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double f = i / 4.0;
    svg += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", py(f)) + "\" x2=\"" +
           fmt("%.1f", x0 + plot_w) + "\" y2=\"" + fmt("%.1f", py(f)) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", x0 - 6) + "\" y=\"" + fmt("%.1f", py(f) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">" + fmt("%.2f", f) + "</text>\n";
  }
  // Axes and their labels.
  svg += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" +
         fmt("%.1f", x0 + plot_w) + "\" y2=\"" + fmt("%.1f", y0) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" +
         fmt("%.1f", x0) + "\" y2=\"" + fmt("%.1f", py(1)) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", x0 + plot_w / 2) + "\" y=\"" + fmt("%.1f", y0 + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + escape_xml(s.name) + " (ms)</text>\n";
  svg += "<text transform=\"translate(" + fmt("%.1f", ox + 16) + "," +
         fmt("%.1f", y0 - plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">fraction of samples</text>\n";
  if (ms.empty()) {
    svg += "<text x=\"" + fmt("%.1f", x0 + plot_w / 2) + "\" y=\"" + fmt("%.1f", py(0.5)) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#888\">no samples</text>\n";
    return;
  }
  // The empirical CDF as a step line: at the i-th smallest value the fraction rises to i/n.
  std::string points = fmt("%.1f", px(0)) + "," + fmt("%.1f", py(0));
  const double n = static_cast<double>(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    // GCC 12 warns (-Wrestrict, a false positive) on `" " + std::string`; append instead.
    points.append(" ").append(fmt("%.1f", px(ms[i]))).append(",").append(fmt("%.1f", py(i / n)));
    points.append(" ")
        .append(fmt("%.1f", px(ms[i])))
        .append(",")
        .append(fmt("%.1f", py((i + 1) / n)));
  }
  svg +=
      "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
  // Median and p99 markers, with their values.
  const struct {
    double p;
    const char* color;
  } marks[] = {{50, "#2ca02c"}, {99, "#d62728"}};
  int k = 0;
  for (const auto& mark : marks) {
    const double v = percentile(ms, mark.p);
    svg += "<line x1=\"" + fmt("%.1f", px(v)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
           fmt("%.1f", px(v)) + "\" y2=\"" + fmt("%.1f", py(1)) + "\" stroke=\"" + mark.color +
           "\" stroke-dasharray=\"5,4\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", x0 + 8) + "\" y=\"" + fmt("%.1f", py(1) + 14 + 14 * k++) +
           "\" font-size=\"11\" fill=\"" + mark.color + "\">p" + tick_label(mark.p) + " = " +
           fmt("%.2f", v) + " ms</text>\n";
  }
}

}  // namespace

std::vector<double> axis_ticks(double max_value, int target_count) {
  if (!(max_value > 0) || !std::isfinite(max_value)) return {0, 1};
  const double raw = max_value / std::max(target_count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    ticks.push_back(i * step);
    if (i * step >= max_value * (1 - 1e-12)) break;
  }
  return ticks;
}

std::string latency_cdf_svg(const std::vector<LatencySeries>& series, const std::string& title) {
  const int columns = 2;
  const int rows = static_cast<int>((series.size() + columns - 1) / columns);
  const double width = kPanelW * columns, height = 40 + kPanelH * std::max(rows, 1);
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " +
         fmt("%.0f", height) + "\" font-family=\"sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", width / 2) +
         "\" y=\"26\" text-anchor=\"middle\" "
         "font-size=\"17\">" +
         escape_xml(title) + "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const double ox = kPanelW * static_cast<double>(i % columns);
    const double oy = 40 + kPanelH * static_cast<double>(i / columns);
    draw_panel(svg, series[i], ox, oy);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tern::bench
