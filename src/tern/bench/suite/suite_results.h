// What `tern bench suite` measured: one row per configuration and engine, each with the
// commands that produced it, and the mixed load's inter-token gaps over time. Written as
// results.json, read back to render results.md and the plots again without rerunning.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tern::bench {

// The sections of the matrix, in the order the page shows them.
inline constexpr const char* kSuiteSections[] = {"weights",    "speculative", "kv_cache",
                                                 "mixed_load", "serving",     "shapes"};

struct SuiteRow {
  std::string section;  // one of kSuiteSections
  std::string name;     // the configuration: "Q4_0", "draft (adaptive K ≤ 8)", "chunked 256", …
  std::string engine;   // "tern", "llama.cpp" or "ik_llama.cpp"
  std::vector<std::string> commands;  // as a shell would run them, the binary's path shortened
  nlohmann::ordered_json metrics;     // every key of the section's columns; null: not measured
};

// The inter-token gaps of one mixed-load setup's short streams, and its long requests.
struct ItlTimeline {
  std::string setup;
  std::vector<std::pair<double, double>> gaps;           // (seconds since start, gap in ms)
  std::vector<std::pair<double, double>> long_requests;  // (arrival, first token), seconds
};

// The CPUs other programs kept busy in the second before a section and the second after it
// (machine_load.h).
struct SectionLoad {
  std::string section;
  double before = 0;
  double after = 0;
  bool idle() const;  // both under kIdleBusyCpusLimit
};

struct SuiteResults {
  std::string date;    // UTC, ISO 8601
  std::string commit;  // tern's version string
  std::string cpu;     // the CPU's model name
  int cores = 0;
  int threads = 0;
  std::string device = "cpu";        // tern's --device
  double bandwidth_bytes_per_s = 0;  // memory read bandwidth, as tern plan measured it
  std::string bandwidth_source;      // tern plan's words for where and how
  double draft_cost_ratio = 0;       // draft decode step / target decode step (the theory's c)
  nlohmann::ordered_json config;
  std::vector<SuiteRow> rows;
  std::vector<ItlTimeline> timelines;
  std::vector<std::string> errors;  // "section: what failed", for each section that stopped
  // What another engine could not measure (a feature it lacks for this model): its row keeps
  // nulls and the page says why.
  std::vector<std::string> notes;
  // One per section that ran; empty in results written before tern measured it.
  std::vector<SectionLoad> machine_load;
};

// One column of a section's table: the metric's key, its heading, and printf's format.
struct SuiteColumn {
  const char* key;
  const char* heading;
  const char* format;
};
// The columns of `section` (every metric key a row of it has). Throws for an unknown section.
const std::vector<SuiteColumn>& suite_columns(const std::string& section);

// A metrics object with every column of `section` set to null, to be filled in.
nlohmann::ordered_json empty_metrics(const std::string& section);

nlohmann::ordered_json results_json(const SuiteResults& results);
// Throws tern::Error naming what is missing or malformed.
SuiteResults results_from_json(const nlohmann::json& doc);

// The page: a header (date, commit, machine, bandwidth), the headline figures, and one table per
// section with the commands under it; `plots` are the SVG file names to show.
std::string results_markdown(const SuiteResults& results, const std::vector<std::string>& plots);

// The three headline figures (empty strings where the rows behind one are missing):
// quantization's decode speedup, speculation's, and chunked prefill's cut of the worst gap.
struct Headlines {
  std::string quantization, speculation, chunked_prefill;
};
Headlines headlines(const SuiteResults& results);

}  // namespace tern::bench
