// Gaps in time order, the worst one, the long requests' figures and the timeline figure.
#include "tern/bench/interference.h"

#include <algorithm>

#include "tern/bench/report.h"
#include "tern/bench/svg_plot.h"
#include "tern/bench/svg_text.h"

namespace tern::bench {
namespace {

using nlohmann::ordered_json;

std::vector<double> long_ttfts(std::span<const RequestRecord> long_requests) {
  std::vector<double> out;
  for (const RequestRecord& r : long_requests)
    if (r.success) out.push_back(r.ttft);
  return out;
}

double max_of(std::span<const double> v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

std::vector<TimedGap> timed_gaps(std::span<const RequestRecord> streams) {
  std::vector<TimedGap> gaps;
  for (const RequestRecord& r : streams) {
    if (!r.success) continue;
    double t = r.start_time + r.ttft;
    for (double gap : r.itl) {
      t += gap;
      gaps.push_back({t, gap});
    }
  }
  std::sort(gaps.begin(), gaps.end(),
            [](const TimedGap& a, const TimedGap& b) { return a.end < b.end; });
  return gaps;
}

TimedGap worst_gap(std::span<const RequestRecord> streams) {
  TimedGap worst;
  for (const TimedGap& g : timed_gaps(streams))
    if (g.seconds > worst.seconds) worst = g;
  return worst;
}

std::string interference_section(std::span<const RequestRecord> streams,
                                 std::span<const RequestRecord> long_requests,
                                 std::span<const double> percentiles) {
  std::string out = summary_rule("Interference", '-');
  const TimedGap worst = worst_gap(streams);
  summary_row(out, "Max ITL (ms):", worst.seconds * 1000);
  summary_row(out, "Max ITL ended at (s):", worst.end);
  int64_t ok = 0;
  for (const RequestRecord& r : long_requests) ok += r.success;
  summary_row(out, "Long requests completed:", ok);
  summary_row(out, "Long requests failed:", static_cast<int64_t>(long_requests.size()) - ok);
  const std::vector<double> ttfts = long_ttfts(long_requests);
  const LatencyStats ttft = latency_stats(ttfts, percentiles);
  summary_row(out, "Mean long TTFT (ms):", ttft.mean_ms);
  summary_row(out, "Median long TTFT (ms):", ttft.median_ms);
  for (const auto& [p, value] : ttft.percentiles_ms)
    // GCC 12 warns (-Wrestrict, a false positive) on `"P" + std::string`; append instead.
    summary_row(out, std::string("P").append(percentile_word(p)).append(" long TTFT (ms):"), value);
  summary_row(out, "Max long TTFT (ms):", max_of(ttfts) * 1000);
  return out;
}

ordered_json interference_json(std::span<const RequestRecord> streams,
                               std::span<const RequestRecord> long_requests,
                               std::span<const double> percentiles) {
  ordered_json j;
  const TimedGap worst = worst_gap(streams);
  j["max_itl_ms"] = worst.seconds * 1000;
  j["max_itl_end_s"] = worst.end;
  int64_t ok = 0;
  ordered_json starts = ordered_json::array(), ttfts_json = ordered_json::array();
  for (const RequestRecord& r : long_requests) {
    ok += r.success;
    starts.push_back(r.start_time);
    ttfts_json.push_back(r.success ? r.ttft : 0.0);
  }
  j["long_completed"] = ok;
  j["long_failed"] = static_cast<int64_t>(long_requests.size()) - ok;
  const std::vector<double> ttfts = long_ttfts(long_requests);
  const LatencyStats ttft = latency_stats(ttfts, percentiles);
  j["mean_long_ttft_ms"] = ttft.mean_ms;
  j["median_long_ttft_ms"] = ttft.median_ms;
  for (const auto& [p, value] : ttft.percentiles_ms)
    j[std::string("p").append(percentile_word(p)).append("_long_ttft_ms")] = value;
  j["max_long_ttft_ms"] = max_of(ttfts) * 1000;
  j["long_start_times"] = std::move(starts);
  j["long_ttfts"] = std::move(ttfts_json);
  return j;
}

std::string itl_timeline_svg(std::span<const RequestRecord> streams,
                             std::span<const RequestRecord> long_requests,
                             const std::string& title) {
  using svg::escape_xml;
  using svg::fmt;
  using svg::tick_label;
  constexpr double kW = 960, kH = 420, kLeft = 70, kRight = 20, kTop = 50, kBottom = 50;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  const std::vector<TimedGap> gaps = timed_gaps(streams);
  double t_max = 0, gap_max_ms = 0;
  for (const TimedGap& g : gaps) {
    t_max = std::max(t_max, g.end);
    gap_max_ms = std::max(gap_max_ms, g.seconds * 1000);
  }
  for (const RequestRecord& r : long_requests)
    t_max = std::max(t_max, r.start_time + (r.success ? r.ttft : 0.0));
  const std::vector<double> xt = axis_ticks(t_max > 0 ? t_max : 1);
  const std::vector<double> yt = axis_ticks(gap_max_ms > 0 ? gap_max_ms : 1);
  auto px = [&](double t) { return kLeft + t / xt.back() * plot_w; };
  auto py = [&](double ms) { return kTop + plot_h - ms / yt.back() * plot_h; };

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", kW) + "\" height=\"" +
         fmt("%.0f", kH) + "\" viewBox=\"0 0 " + fmt("%.0f", kW) + " " + fmt("%.0f", kH) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + fmt("%.1f", kW / 2) +
         "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">" + escape_xml(title) + "</text>\n";
  // Long prompts: shaded from arrival to first token, a dashed line at the arrival.
  for (const RequestRecord& r : long_requests) {
    const double x = px(r.start_time);
    if (r.success)
      out += "<rect class=\"long-prefill\" x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", kTop) +
             "\" width=\"" + fmt("%.1f", std::max(px(r.start_time + r.ttft) - x, 0.5)) +
             "\" height=\"" + fmt("%.1f", plot_h) + "\" fill=\"#ff7f0e\" fill-opacity=\"0.12\"/>\n";
    out += "<line class=\"long-arrival\" x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", kTop) +
           "\" x2=\"" + fmt("%.1f", x) + "\" y2=\"" + fmt("%.1f", kTop + plot_h) +
           "\" stroke=\"#ff7f0e\" stroke-dasharray=\"5,4\"/>\n";
  }
  for (double t : xt)
    out += "<text x=\"" + fmt("%.1f", px(t)) + "\" y=\"" + fmt("%.1f", kTop + plot_h + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(t) + "</text>\n";
  for (double v : yt) {
    out += "<line x1=\"" + fmt("%.1f", kLeft) + "\" y1=\"" + fmt("%.1f", py(v)) + "\" x2=\"" +
           fmt("%.1f", kLeft + plot_w) + "\" y2=\"" + fmt("%.1f", py(v)) +
           "\" stroke=\"#e0e0e0\"/>\n";
    out += "<text x=\"" + fmt("%.1f", kLeft - 6) + "\" y=\"" + fmt("%.1f", py(v) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">" + tick_label(v) + "</text>\n";
  }
  out += "<rect x=\"" + fmt("%.1f", kLeft) + "\" y=\"" + fmt("%.1f", kTop) + "\" width=\"" +
         fmt("%.1f", plot_w) + "\" height=\"" + fmt("%.1f", plot_h) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  out += "<text x=\"" + fmt("%.1f", kLeft + plot_w / 2) + "\" y=\"" + fmt("%.1f", kH - 12) +
         "\" text-anchor=\"middle\" font-size=\"12\">time since the start (s); dashed: a long "
         "prompt arrives, shaded: until its first token</text>\n";
  out +=
      "<text transform=\"translate(18," + fmt("%.1f", kTop + plot_h / 2) +
      ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">inter-token latency (ms)</text>\n";
  for (const TimedGap& g : gaps)
    out += "<circle class=\"gap\" cx=\"" + fmt("%.1f", px(g.end)) + "\" cy=\"" +
           fmt("%.1f", py(g.seconds * 1000)) + "\" r=\"1.6\" fill=\"#1f77b4\"/>\n";
  const TimedGap worst = worst_gap(streams);
  if (worst.seconds > 0)
    out += "<text x=\"" + fmt("%.1f", kLeft + 8) + "\" y=\"" + fmt("%.1f", kTop + 14) +
           "\" font-size=\"12\" fill=\"#d62728\">max ITL " + fmt("%.1f", worst.seconds * 1000) +
           " ms at " + fmt("%.2f", worst.end) + " s</text>\n";
  out += "</svg>\n";
  return out;
}

}  // namespace tern::bench
