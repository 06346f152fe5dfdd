// The suite's page and results.json: tables with every column, commands numbered once per
// section, the headline figures, and the JSON read back as written. The plots: valid SVG with
// the series the results have, and the theory's speedup.
#include "tern/bench/suite/suite_results.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tern/bench/suite/suite_plots.h"
#include "tern/bench/svg_plot.h"
#include "tern/core/error.h"

namespace tern::bench {
namespace {

using nlohmann::json;
using oj = nlohmann::ordered_json;

SuiteRow row(const std::string& section, const std::string& name, const std::string& engine,
             std::vector<std::string> commands, const oj& values) {
  SuiteRow r{section, name, engine, std::move(commands), empty_metrics(section)};
  for (const auto& [key, value] : values.items()) r.metrics[key] = value;
  return r;
}

SuiteResults sample_results() {
  SuiteResults r;
  r.date = "2026-12-05T17:00:00Z";
  r.commit = "abc1234";
  r.cpu = "AMD EPYC";
  r.cores = 2;
  r.threads = 2;
  r.bandwidth_bytes_per_s = 54.5e9;
  r.draft_cost_ratio = 0.02;
  r.config = {{"model", "wide-f16.gguf"}};
  const std::string quantize = "tern quantize wide.gguf wide-q4_0.gguf q4_0 -t 2";
  r.rows = {
      row("weights", "F16", "tern", {"tern bench-model wide-f16.gguf"},
          {{"weight_bytes", 2045000000.0},
           {"decode_tokens_per_s", 24.0},
           {"ceiling_tokens_per_s", 26.6},
           {"ceiling_pct", 90.2},
           {"prefill_tokens_per_s", 150.0},
           {"ttft_ms", 1706.7}}),
      row("weights", "Q4_0", "tern", {quantize, "tern bench-model wide-q4_0.gguf"},
          {{"weight_bytes", 575000000.0},
           {"decode_tokens_per_s", 80.0},
           {"ceiling_tokens_per_s", 94.0},
           {"ceiling_pct", 85.1},
           {"prefill_tokens_per_s", 300.0},
           {"ttft_ms", 853.3}}),
      row("weights", "Q4_0", "llama.cpp", {quantize, "llama-bench -m wide-q4_0.gguf"},
          {{"weight_bytes", 575000000.0},
           {"decode_tokens_per_s", 75.0},
           {"ceiling_tokens_per_s", 94.0},
           {"ceiling_pct", 79.8}}),
      row("speculative", "plain decoding", "tern", {"tern generate"},
          {{"decode_tokens_per_s", 80.0}, {"speedup", 1.0}}),
      row("speculative", "draft model (K = 4)", "tern", {"tern generate --speculative-config"},
          {{"num_speculative_tokens", 4},
           {"decode_tokens_per_s", 240.0},
           {"speedup", 3.0},
           {"acceptance_rate", 0.95},
           {"mean_acceptance_length", 4.6}}),
      row("kv_cache", "int8", "tern", {"tern bench-model -d 2048"},
          {{"context", 2048},
           {"kv_bytes_per_token", 1200},
           {"tokens_per_gib", 894784},
           {"decode_tokens_per_s", 70.0}}),
      row("mixed_load", "whole", "tern", {"tern serve &", "tern bench serve"},
          {{"itl_p50_ms", 14.0},
           {"itl_p99_ms", 900.0},
           {"max_itl_ms", 4000.0},
           {"ttft_p50_ms", 50.0},
           {"long_ttft_mean_ms", 4000.0},
           {"long_ttft_max_ms", 4100.0},
           {"failed", 0}}),
      row("mixed_load", "chunked 256", "tern", {"tern serve --max-num-batched-tokens 256 &"},
          {{"itl_p50_ms", 15.0},
           {"itl_p99_ms", 120.0},
           {"max_itl_ms", 400.0},
           {"ttft_p50_ms", 60.0},
           {"long_ttft_mean_ms", 5000.0},
           {"long_ttft_max_ms", 5200.0},
           {"failed", 0}}),
      row("serving", "concurrency 4", "tern", {"tern bench serve --max-concurrency 4"},
          {{"concurrency", 4},
           {"output_tokens_per_s", 200.0},
           {"requests_per_s", 3.1},
           {"ttft_p50_ms", 90.0},
           {"tpot_p50_ms", 19.0},
           {"failed", 0}}),
  };
  r.timelines = {{"whole", {{1.0, 14.0}, {2.0, 4000.0}}, {{1.5, 5.5}}},
                 {"chunked 256", {{1.0, 15.0}, {2.0, 400.0}}, {{1.5, 6.5}}}};
  return r;
}

// Tags nest and close, attribute values are quoted, and text has no raw '<' or stray '&':
// what an XML parser needs of an SVG file.
bool well_formed_xml(const std::string& s, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      const std::string entity = s.substr(i, semi == std::string::npos ? 1 : semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;") {
        *why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = s.find('>', i);
    if (end == std::string::npos) {
      *why = "unclosed tag at " + std::to_string(i);
      return false;
    }
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    size_t quotes = 0;
    for (char c : tag) quotes += c == '"';
    if (quotes % 2 != 0 || tag.find('<') != std::string::npos) {
      *why = "bad attributes in <" + tag + ">";
      return false;
    }
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        *why = "</" + tag.substr(1) + "> closes " + (open.empty() ? "nothing" : open.back());
        return false;
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!open.empty()) *why = "<" + open.back() + "> never closed";
  return open.empty();
}

TEST(SuiteResults, MarkdownHasEveryColumnTheCommandsAndTheHeadlines) {
  const std::string md = results_markdown(sample_results(), {"throughput.svg", "itl_timeline.svg"});
  EXPECT_NE(md.find("on 2026-12-05T17:00:00Z, tern abc1234, AMD EPYC (2 cores, 2 threads), memory "
                    "read bandwidth 54.5 GB/s"),
            std::string::npos);
  EXPECT_NE(md.find("- Q4_0 decodes 3.3× as fast as F16 (80.0 vs 24.0 tokens/s), in 28% of the "
                    "bytes.\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- speculative decoding (draft model (K = 4)) decodes 3.00× as fast as plain "
                    "decoding at α = 0.95.\n"),
            std::string::npos);
  EXPECT_NE(md.find("- under a mixed load, chunked prefill cuts the streams' worst gap from 4000 "
                    "ms to 400 ms (10.0×), ITL p99 900.0 → 120.0 ms.\n"),
            std::string::npos);
  // Every column of the weights table, and a row with nulls shown as dashes.
  EXPECT_NE(md.find("| configuration | engine | size (MiB) | decode tok/s | ceiling tok/s | % of "
                    "ceiling | prefill tok/s | TTFT (ms) | commands |\n|---|---|---:|---:|---:|---"
                    ":|---:|---:|---|\n"),
            std::string::npos);
  EXPECT_NE(md.find("| F16 | tern | 1950 | 24.0 | 26.6 | 90% | 150.0 | 1707 | 1 |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| Q4_0 | tern | 548 | 80.0 | 94.0 | 85% | 300.0 | 853 | 2, 3 |\n"),
            std::string::npos);
  // The quantize command is shared: numbered once, cited by both rows.
  EXPECT_NE(md.find("| Q4_0 | llama.cpp | 548 | 75.0 | 94.0 | 80% | — | — | 2, 4 |\n"),
            std::string::npos);
  EXPECT_NE(md.find("2. `tern quantize wide.gguf wide-q4_0.gguf q4_0 -t 2`\n"), std::string::npos);
  EXPECT_NE(md.find("| plain decoding | tern | — | 80.0 | 1.00× | — | — | 1 |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| int8 | tern | 2048 | 1200 | 894784 | 70.0 | 1 |\n"), std::string::npos);
  EXPECT_NE(md.find("| chunked 256 | tern | 15.0 | 120.0 | 400 | 60 | 5000 | 5200 | 0 | 3 |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| concurrency 4 | tern | 4 | 200.0 | 3.10 | 90 | 19.0 | 0 | 1 |\n"),
            std::string::npos);
  // Plots under their sections; a plot not given is not linked.
  EXPECT_NE(md.find("![Weight types (batch 1)](throughput.svg)"), std::string::npos);
  EXPECT_NE(md.find("(itl_timeline.svg)"), std::string::npos);
  EXPECT_EQ(md.find("speculation.svg"), std::string::npos);
  EXPECT_EQ(md.find("## Real model shapes"), std::string::npos);  // no rows, no section
}

TEST(SuiteResults, HeadlinesAreLeftOutWithoutTheirRows) {
  SuiteResults r = sample_results();
  r.rows.erase(r.rows.begin());  // no F16 row
  const Headlines h = headlines(r);
  EXPECT_EQ(h.quantization, "");
  EXPECT_NE(h.speculation, "");
  EXPECT_NE(h.chunked_prefill, "");
}

TEST(SuiteResults, JsonReadsBackAsWritten) {
  const SuiteResults r = sample_results();
  const oj doc = results_json(r);
  const SuiteResults back = results_from_json(json::parse(doc.dump()));
  EXPECT_EQ(back.commit, "abc1234");
  EXPECT_EQ(back.cores, 2);
  EXPECT_DOUBLE_EQ(back.bandwidth_bytes_per_s, 54.5e9);
  EXPECT_DOUBLE_EQ(back.draft_cost_ratio, 0.02);
  ASSERT_EQ(back.rows.size(), r.rows.size());
  EXPECT_EQ(back.rows[2].engine, "llama.cpp");
  EXPECT_EQ(back.rows[2].commands, r.rows[2].commands);
  EXPECT_EQ(back.rows[2].metrics.dump(), r.rows[2].metrics.dump());
  ASSERT_EQ(back.timelines.size(), 2u);
  EXPECT_EQ(back.timelines[0].gaps, r.timelines[0].gaps);
  EXPECT_EQ(back.timelines[1].long_requests, r.timelines[1].long_requests);
  EXPECT_EQ(results_markdown(back, {}), results_markdown(r, {}));
}

// The page says of the machine only what was measured: a section with other programs busy
// around it is marked, and the header no longer calls the machine idle.
TEST(SuiteResults, SectionsTakenUnderLoadAreMarked) {
  SuiteResults r = sample_results();
  const std::string unmeasured = results_markdown(r, {});
  EXPECT_NE(unmeasured.find("(this run did not measure what else the machine ran)"),
            std::string::npos);
  EXPECT_EQ(unmeasured.find("idle"), std::string::npos);

  r.machine_load = {{"weights", 0.02, 0.05}, {"speculative", 0.01, 0.03}};
  const std::string idle = results_markdown(r, {});
  EXPECT_NE(idle.find("on a machine other programs left idle (at most 0.05 CPUs busy in the "
                      "second before and after each section)"),
            std::string::npos)
      << idle;
  EXPECT_EQ(idle.find("⚠"), std::string::npos);

  r.machine_load[1].after = 1.02;
  const std::string loaded = results_markdown(r, {});
  EXPECT_EQ(loaded.find("left idle"), std::string::npos);
  EXPECT_NE(loaded.find("other programs kept the CPUs busy around the sections marked ⚠"),
            std::string::npos);
  const size_t mark = loaded.find(
      "⚠ Other programs kept 0.01 CPUs busy in the second before this "
      "section and 1.02 in the second after");
  ASSERT_NE(mark, std::string::npos) << loaded;
  EXPECT_GT(mark, loaded.find("## Speculative decoding"));
  EXPECT_EQ(loaded.find("⚠ Other programs", mark + 1), std::string::npos);  // weights: idle

  const SuiteResults back = results_from_json(json::parse(results_json(r).dump()));
  ASSERT_EQ(back.machine_load.size(), 2u);
  EXPECT_EQ(back.machine_load[1].section, "speculative");
  EXPECT_DOUBLE_EQ(back.machine_load[1].after, 1.02);
}

TEST(SuiteResults, MalformedResultsAreErrors) {
  json doc = json::parse(results_json(sample_results()).dump());
  auto error_of = [](const json& d) {
    try {
      results_from_json(d);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  json no_date = doc;
  no_date.erase("date");
  EXPECT_EQ(error_of(no_date), "results: missing 'date'");
  json missing_metric = doc;
  missing_metric["rows"][0]["metrics"].erase("ttft_ms");
  EXPECT_EQ(error_of(missing_metric), "results.rows[] 'F16': metrics lack 'ttft_ms'");
  json bad_section = doc;
  bad_section["rows"][0]["section"] = "vibes";
  EXPECT_EQ(error_of(bad_section), "unknown suite section 'vibes'");
  json bad_cores = doc;
  bad_cores["machine"]["cores"] = "two";
  EXPECT_EQ(error_of(bad_cores), "results.machine: 'cores' has the wrong type");
}

TEST(SuitePlots, TheoryIsTheExpectedTokensPerStepOverTheStepsCost) {
  EXPECT_DOUBLE_EQ(speculative_speedup(0, 4, 0), 1.0);  // nothing accepted, nothing paid
  EXPECT_DOUBLE_EQ(speculative_speedup(1, 4, 0), 5.0);  // every draft accepted
  EXPECT_NEAR(speculative_speedup(0.5, 2, 0.1), (1 + 0.5 + 0.25) / 1.2, 1e-12);
  EXPECT_NEAR(speculative_speedup(0.8, 4, 0.05), (1 - std::pow(0.8, 5)) / 0.2 / 1.2, 1e-12);
}

TEST(SuitePlots, EachPlotIsValidSvgWithTheExpectedSeries) {
  const auto plots = suite_plots(sample_results());
  std::vector<std::string> names;
  for (const auto& [name, svg] : plots) {
    names.push_back(name);
    std::string why;
    EXPECT_TRUE(well_formed_xml(svg, &why)) << name << ": " << why;
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << name;
    EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos) << name;
  }
  ASSERT_EQ(names, (std::vector<std::string>{"throughput.svg", "speculation.svg",
                                             "itl_timeline.svg", "kv_capacity.svg"}));
  const std::string& throughput = plots[0].second;
  EXPECT_NE(throughput.find(">tern<"), std::string::npos);
  EXPECT_NE(throughput.find(">llama.cpp<"), std::string::npos);
  EXPECT_NE(throughput.find(">ceiling (bandwidth / bytes a token reads)<"), std::string::npos);
  EXPECT_NE(throughput.find("<title>llama.cpp: 75</title>"), std::string::npos);
  EXPECT_NE(throughput.find(">Q4_0<"), std::string::npos);
  const std::string& speculation = plots[1].second;
  EXPECT_NE(speculation.find(">theory, K = 4, c = 0.020<"), std::string::npos);
  EXPECT_NE(speculation.find(">theory, K = 8, c = 0.020<"), std::string::npos);
  EXPECT_NE(speculation.find(">draft model (K = 4) (tern)<"), std::string::npos);
  EXPECT_EQ(speculation.find(">plain decoding (tern)<"), std::string::npos);  // no α, no point
  const std::string& itl = plots[2].second;
  EXPECT_NE(itl.find(">whole<"), std::string::npos);
  EXPECT_NE(itl.find(">chunked 256<"), std::string::npos);
  EXPECT_NE(itl.find("fill=\"#eeeeee\""), std::string::npos);  // the long prefills shaded
  EXPECT_NE(plots[3].second.find(">int8<"), std::string::npos);
}

TEST(SuitePlots, TextIsEscaped) {
  BarChart chart;
  chart.title = "a < b & \"c\"";
  chart.categories = {"x<y"};
  chart.series = {{"s&t", {1.0}, "#000"}};
  std::string why;
  const std::string svg = bar_chart_svg(chart);
  EXPECT_TRUE(well_formed_xml(svg, &why)) << why;
  EXPECT_NE(svg.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos);
}

}  // namespace
}  // namespace tern::bench
