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
  std::string svg = svg::document_header(width, height, title);
  for (size_t i = 0; i < series.size(); ++i) {
    const double ox = kPanelW * static_cast<double>(i % columns);
    const double oy = 40 + kPanelH * static_cast<double>(i / columns);
    draw_panel(svg, series[i], ox, oy);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tern::bench

namespace tern::bench {
namespace {

using svg::escape_xml;
using svg::fmt;
using svg::tick_label;

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke,
                 const std::string& extra = "") {
  return "<line x1=\"" + fmt("%.1f", x1) + "\" y1=\"" + fmt("%.1f", y1) + "\" x2=\"" +
         fmt("%.1f", x2) + "\" y2=\"" + fmt("%.1f", y2) + "\" stroke=\"" + stroke + "\"" + extra +
         "/>\n";
}

std::string text(double x, double y, const std::string& anchor, int size, const std::string& s,
                 const std::string& extra = "") {
  return "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\" text-anchor=\"" + anchor +
         "\" font-size=\"" + std::to_string(size) + "\"" + extra + ">" + escape_xml(s) +
         "</text>\n";
}

// A legend of coloured swatches and names from (x, y), left to right, wrapping into rows of
// kLegendRowH before `right`; returns the number of rows it took.
constexpr double kLegendRowH = 18;
int legend(std::string& svg, double x, double y, double right,
           const std::vector<std::pair<std::string, std::string>>& items) {
  const double x_start = x;
  int rows = items.empty() ? 0 : 1;
  for (const auto& [name, color] : items) {
    const double w = 30 + 6.5 * static_cast<double>(name.size());
    if (x > x_start && x + w > right) {
      x = x_start;
      y += kLegendRowH;
      ++rows;
    }
    svg += "<rect x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y - 10) +
           "\" width=\"12\" height=\"12\" fill=\"" + color + "\"/>\n";
    svg += text(x + 17, y, "start", 12, name);
    x += w;
  }
  return rows;
}

}  // namespace

std::string bar_chart_svg(const BarChart& chart) {
  constexpr double kLabelW = 190, kPlotW = 560, kRightPad = 90, kBarH = 16, kGroupGap = 12;
  const double group_h =
      kBarH * static_cast<double>(std::max<size_t>(chart.series.size(), 1)) + kGroupGap;
  const double width = kLabelW + kPlotW + kRightPad;
  std::vector<std::pair<std::string, std::string>> items;
  for (const BarSeries& s : chart.series) items.emplace_back(s.name, s.color);
  std::string legend_svg;
  const int legend_rows = legend(legend_svg, kLabelW, 52, width - 10, items);
  const double top = 52 + kLegendRowH * legend_rows;
  const double plot_h = group_h * static_cast<double>(chart.categories.size());
  const double height = top + plot_h + 50;
  double max_value = 0;
  for (const BarSeries& s : chart.series)
    for (double v : s.values)
      if (std::isfinite(v)) max_value = std::max(max_value, v);
  const std::vector<double> ticks = axis_ticks(max_value > 0 ? max_value : 1);
  const double x_max = ticks.back();
  auto px = [&](double v) { return kLabelW + v / x_max * kPlotW; };

  std::string svg = svg::document_header(width, height, chart.title) + legend_svg;
  for (double t : ticks) {
    svg += line(px(t), top, px(t), top + plot_h, "#e0e0e0");
    svg += text(px(t), top + plot_h + 16, "middle", 11, tick_label(t));
  }
  svg += line(kLabelW, top, kLabelW, top + plot_h, "black");
  svg += text(kLabelW + kPlotW / 2, top + plot_h + 38, "middle", 12, chart.value_label);
  for (size_t c = 0; c < chart.categories.size(); ++c) {
    const double gy = top + group_h * static_cast<double>(c) + kGroupGap / 2;
    svg += text(kLabelW - 8, gy + group_h / 2, "end", 12, chart.categories[c]);
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const BarSeries& series = chart.series[s];
      if (c >= series.values.size() || !std::isfinite(series.values[c])) continue;
      const double v = series.values[c], y = gy + kBarH * static_cast<double>(s);
      svg += "<rect x=\"" + fmt("%.1f", kLabelW) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"" +
             fmt("%.1f", std::max(px(v) - kLabelW, 0.5)) + "\" height=\"" + fmt("%.1f", kBarH - 2) +
             "\" fill=\"" + series.color + "\"><title>" +
             escape_xml(series.name + ": " + fmt("%.4g", v)) + "</title></rect>\n";
      svg += text(px(v) + 4, y + kBarH - 5, "start", 11, fmt(v >= 100 ? "%.0f" : "%.3g", v));
    }
  }
  svg += "</svg>\n";
  return svg;
}

std::string xy_chart_svg(const std::vector<XyPanel>& panels, const std::string& title) {
  constexpr double kW = 860, kPlotH = 190, kLeft = 70, kRight = 30, kBottom = 50;
  // Each panel: its title, its legend's rows, the plot, the x axis's labels.
  std::vector<std::string> legends(panels.size());
  std::vector<double> tops(panels.size()), plot_tops(panels.size());
  double height = 40;
  for (size_t p = 0; p < panels.size(); ++p) {
    std::vector<std::pair<std::string, std::string>> items;
    for (const XySeries& s : panels[p].series) items.emplace_back(s.name, s.color);
    const double title_h = panels[p].title.empty() ? 8 : 30;
    const int rows = legend(legends[p], kLeft + 10, height + title_h + 14, kW - kRight, items);
    tops[p] = height;
    plot_tops[p] = height + title_h + kLegendRowH * rows + 14;
    height = plot_tops[p] + kPlotH + kBottom;
  }
  std::string svg = svg::document_header(kW, height, title);
  for (size_t p = 0; p < panels.size(); ++p) {
    const XyPanel& panel = panels[p];
    const double oy = tops[p];
    const double plot_w = kW - kLeft - kRight, plot_h = kPlotH;
    const double x0 = kLeft, y0 = plot_tops[p] + plot_h;
    double x_max = panel.x_max, y_max = panel.y_max;
    for (const XySeries& s : panel.series)
      for (const auto& [x, y] : s.points) {
        if (panel.x_max <= 0 && std::isfinite(x)) x_max = std::max(x_max, x);
        if (panel.y_max <= 0 && std::isfinite(y)) y_max = std::max(y_max, y);
      }
    for (const auto& [a, b] : panel.bands)
      if (panel.x_max <= 0) x_max = std::max(x_max, b);
    const std::vector<double> xt = axis_ticks(x_max > 0 ? x_max : 1);
    const std::vector<double> yt = axis_ticks(y_max > 0 ? y_max : 1);
    auto px = [&](double x) { return x0 + std::clamp(x / xt.back(), 0.0, 1.0) * plot_w; };
    auto py = [&](double y) { return y0 - std::clamp(y / yt.back(), 0.0, 1.0) * plot_h; };

    if (!panel.title.empty())
      svg += text(kW / 2, oy + 20, "middle", 15, panel.title, " font-weight=\"bold\"");
    for (const auto& [a, b] : panel.bands) {
      svg += "<rect x=\"" + fmt("%.1f", px(a)) + "\" y=\"" + fmt("%.1f", py(yt.back())) +
             "\" width=\"" + fmt("%.1f", std::max(px(b) - px(a), 1.0)) + "\" height=\"" +
             fmt("%.1f", plot_h) + "\" fill=\"#eeeeee\"/>\n";
      svg += line(px(a), py(0), px(a), py(yt.back()), "#999999", " stroke-dasharray=\"4,3\"");
    }
    for (double t : xt) {
      svg += line(px(t), py(0), px(t), py(yt.back()), "#e8e8e8");
      svg += text(px(t), y0 + 16, "middle", 11, tick_label(t));
    }
    for (double t : yt) {
      svg += line(x0, py(t), x0 + plot_w, py(t), "#e8e8e8");
      svg += text(x0 - 6, py(t) + 4, "end", 11, tick_label(t));
    }
    svg += line(x0, y0, x0 + plot_w, y0, "black");
    svg += line(x0, y0, x0, py(yt.back()), "black");
    svg += text(x0 + plot_w / 2, y0 + 36, "middle", 12, panel.x_label);
    svg += "<text transform=\"translate(" + fmt("%.1f", x0 - 48) + "," +
           fmt("%.1f", y0 - plot_h / 2) +
           ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" + escape_xml(panel.y_label) +
           "</text>\n";
    for (const XySeries& s : panel.series) {
      svg += "<g><title>" + escape_xml(s.name) + "</title>\n";
      if (s.line) {
        std::string points;
        for (const auto& [x, y] : s.points)
          if (std::isfinite(x) && std::isfinite(y))
            points.append(points.empty() ? "" : " ")
                .append(fmt("%.1f", px(x)))
                .append(",")
                .append(fmt("%.1f", py(y)));
        svg += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
               (s.dashed ? " stroke-dasharray=\"6,4\"" : "") + " points=\"" + points + "\"/>\n";
      } else {
        for (const auto& [x, y] : s.points)
          if (std::isfinite(x) && std::isfinite(y))
            svg += "<circle cx=\"" + fmt("%.1f", px(x)) + "\" cy=\"" + fmt("%.1f", py(y)) +
                   "\" r=\"" + (s.points.size() > 50 ? "2" : "5") + "\" fill=\"" + s.color +
                   "\" fill-opacity=\"0.8\"/>\n";
      }
      svg += "</g>\n";
    }
    svg += legends[p];
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tern::bench
