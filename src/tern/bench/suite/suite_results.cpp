// results.json both ways, the Markdown page and its headline figures.
#include "tern/bench/suite/suite_results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "tern/bench/machine_load.h"
#include "tern/core/error.h"

namespace tern::bench {
namespace {

using nlohmann::json;
using oj = nlohmann::ordered_json;

const std::map<std::string, std::vector<SuiteColumn>>& all_columns() {
  // The weights and the shapes sections measure the same things of a file at batch 1.
  static const std::vector<SuiteColumn> batch1 = {{"weight_bytes", "size (MiB)", "mib"},
                                                  {"decode_tokens_per_s", "decode tok/s", "%.1f"},
                                                  {"ceiling_tokens_per_s", "ceiling tok/s", "%.1f"},
                                                  {"ceiling_pct", "% of ceiling", "%.0f%%"},
                                                  {"prefill_tokens_per_s", "prefill tok/s", "%.1f"},
                                                  {"ttft_ms", "TTFT (ms)", "%.0f"}};
  static const std::map<std::string, std::vector<SuiteColumn>> columns = {
      {"weights", batch1},
      {"speculative",
       {{"num_speculative_tokens", "K", "%.0f"},
        {"decode_tokens_per_s", "decode tok/s", "%.1f"},
        {"speedup", "speedup", "%.2f×"},
        {"acceptance_rate", "α", "%.2f"},
        {"mean_acceptance_length", "mean acceptance length", "%.2f"}}},
      {"kv_cache",
       {{"context", "context", "%.0f"},
        {"kv_bytes_per_token", "KV bytes/token", "%.0f"},
        {"tokens_per_gib", "tokens per GiB", "%.0f"},
        {"decode_tokens_per_s", "decode tok/s at context", "%.1f"}}},
      {"mixed_load",
       {{"itl_p50_ms", "streams' ITL p50 (ms)", "%.1f"},
        {"itl_p99_ms", "ITL p99 (ms)", "%.1f"},
        {"max_itl_ms", "worst gap (ms)", "%.0f"},
        {"ttft_p50_ms", "streams' TTFT p50 (ms)", "%.0f"},
        {"long_ttft_mean_ms", "long TTFT mean (ms)", "%.0f"},
        {"long_ttft_max_ms", "long TTFT max (ms)", "%.0f"},
        {"failed", "failed", "%.0f"}}},
      {"serving",
       {{"concurrency", "concurrency", "%.0f"},
        {"output_tokens_per_s", "output tok/s", "%.1f"},
        {"requests_per_s", "requests/s", "%.2f"},
        {"ttft_p50_ms", "TTFT p50 (ms)", "%.0f"},
        {"tpot_p50_ms", "TPOT p50 (ms)", "%.1f"},
        {"failed", "failed", "%.0f"}}},
      {"shapes", batch1},
  };
  return columns;
}

// What each section's table measures, above it on the page.
const char* section_heading(const std::string& section) {
  if (section == "weights") return "Weight types (batch 1)";
  if (section == "speculative") return "Speculative decoding";
  if (section == "kv_cache") return "KV-cache dtypes at long context";
  if (section == "mixed_load") return "Chunked prefill and P + D under a mixed load";
  if (section == "serving") return "Serving throughput by concurrency";
  return "Real model shapes (dummy weights, batch 1)";
}

const char* section_intro(const std::string& section) {
  if (section == "weights")
    return "Each weight type made from the same model by `tern quantize`; the engines alternate, "
           "medians of the rounds (`rounds` in the config). Decode: tokens/s of one "
           "sequence; the ceiling: the run's bandwidth over the bytes `tern plan` says a token "
           "reads. Prefill: one forward of the whole prompt. TTFT: that prefill's time, what "
           "a lone request waits for its first token.";
  if (section == "speculative")
    return "Greedy generation of one prompt, the runs of each configuration alternating, medians. "
           "α: drafted tokens accepted; mean acceptance length: tokens a verify step yields.";
  if (section == "kv_cache")
    return "Decode with the context already in the cache, per KV dtype; tokens per GiB is what one "
           "GiB of cache holds for this model.";
  if (section == "mixed_load")
    return "Short streams at a steady rate while long prompts arrive (`tern bench serve "
           "--long-num-prompts`): the streams' inter-token latency, their worst gap (a long "
           "prefill shows as one), and the long prompts' time to first token. Whole: one "
           "instance, every prompt prefilled in one step; chunked: `tern serve`'s default, prefill "
           "in "
           "chunks beside the decodes, each step sized to about 200 ms; P + D: a prefill and a "
           "decode instance (one thread each) behind `tern "
           "router`, the KV cache moving over UCX.";
  if (section == "serving")
    return "`tern bench serve` with all requests at once, at most `concurrency` in flight.";
  return "Dummy weights of real shapes, written to GGUF once and read by each engine; the "
         "engines alternate, medians of the rounds.";
}

std::string format_value(const json& v, const char* format) {
  if (v.is_null()) return "—";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return v.dump();
  const double x = v.get<double>();
  char buf[64];
  if (std::string(format) == "mib")
    std::snprintf(buf, sizeof buf, x < 100 * 1048576.0 ? "%.1f" : "%.0f", x / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

double number_or_nan(const oj& metrics, const char* key) {
  const auto it = metrics.find(key);
  return it != metrics.end() && it->is_number() ? it->get<double>() : std::nan("");
}

const SuiteRow* find_row(const SuiteResults& r, const std::string& section,
                         const std::string& name_prefix, const std::string& engine = "tern") {
  for (const SuiteRow& row : r.rows)
    if (row.section == section && row.engine == engine && row.name.rfind(name_prefix, 0) == 0)
      return &row;
  return nullptr;
}

std::string fmt(const char* format, double v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

template <typename T>
T required(const json& doc, const char* key, const std::string& where) {
  const auto it = doc.find(key);
  if (it == doc.end()) throw Error(where + ": missing '" + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(where + ": '" + key + "' has the wrong type");
  }
}

}  // namespace

const std::vector<SuiteColumn>& suite_columns(const std::string& section) {
  const auto it = all_columns().find(section);
  if (it == all_columns().end()) throw Error("unknown suite section '" + section + "'");
  return it->second;
}

oj empty_metrics(const std::string& section) {
  oj m = oj::object();
  for (const SuiteColumn& c : suite_columns(section)) m[c.key] = nullptr;
  return m;
}

oj results_json(const SuiteResults& r) {
  oj j;
  j["date"] = r.date;
  j["commit"] = r.commit;
  j["machine"] = {{"cpu", r.cpu},
                  {"cores", r.cores},
                  {"threads", r.threads},
                  {"device", r.device},
                  {"bandwidth_bytes_per_s", r.bandwidth_bytes_per_s},
                  {"bandwidth_source", r.bandwidth_source}};
  j["draft_cost_ratio"] = r.draft_cost_ratio;
  j["config"] = r.config;
  j["rows"] = oj::array();
  for (const SuiteRow& row : r.rows)
    j["rows"].push_back({{"section", row.section},
                         {"name", row.name},
                         {"engine", row.engine},
                         {"commands", row.commands},
                         {"metrics", row.metrics}});
  j["itl_timelines"] = oj::array();
  for (const ItlTimeline& t : r.timelines)
    j["itl_timelines"].push_back(
        {{"setup", t.setup}, {"gaps", t.gaps}, {"long_requests", t.long_requests}});
  j["errors"] = r.errors;
  j["notes"] = r.notes;
  j["machine_load"] = oj::array();
  for (const SectionLoad& l : r.machine_load)
    j["machine_load"].push_back({{"section", l.section}, {"before", l.before}, {"after", l.after}});
  return j;
}

SuiteResults results_from_json(const json& doc) {
  if (!doc.is_object()) throw Error("results: expected a JSON object");
  SuiteResults r;
  r.date = required<std::string>(doc, "date", "results");
  r.commit = required<std::string>(doc, "commit", "results");
  const json machine = required<json>(doc, "machine", "results");
  r.cpu = required<std::string>(machine, "cpu", "results.machine");
  r.cores = required<int>(machine, "cores", "results.machine");
  r.threads = required<int>(machine, "threads", "results.machine");
  r.bandwidth_bytes_per_s = required<double>(machine, "bandwidth_bytes_per_s", "results.machine");
  // Results written before the suite ran on devices: the CPU, its bandwidth source unsaid.
  if (machine.contains("device"))
    r.device = required<std::string>(machine, "device", "results.machine");
  if (machine.contains("bandwidth_source"))
    r.bandwidth_source = required<std::string>(machine, "bandwidth_source", "results.machine");
  r.draft_cost_ratio = required<double>(doc, "draft_cost_ratio", "results");
  r.config = required<oj>(doc, "config", "results");
  for (const json& row : required<json>(doc, "rows", "results")) {
    SuiteRow s;
    s.section = required<std::string>(row, "section", "results.rows[]");
    s.name = required<std::string>(row, "name", "results.rows[]");
    s.engine = required<std::string>(row, "engine", "results.rows[]");
    s.commands = required<std::vector<std::string>>(row, "commands", "results.rows[]");
    // In the columns' order, whatever order the document has.
    const json metrics = required<json>(row, "metrics", "results.rows[]");
    s.metrics = empty_metrics(s.section);
    for (const SuiteColumn& c : suite_columns(s.section)) {
      if (!metrics.contains(c.key))
        throw Error("results.rows[] '" + s.name + "': metrics lack '" + c.key + "'");
      s.metrics[c.key] = metrics.at(c.key);
    }
    if (metrics.size() != s.metrics.size())
      throw Error("results.rows[] '" + s.name + "': metrics have keys the " + s.section +
                  " section does not");
    r.rows.push_back(std::move(s));
  }
  for (const json& t : required<json>(doc, "itl_timelines", "results")) {
    ItlTimeline tl;
    tl.setup = required<std::string>(t, "setup", "results.itl_timelines[]");
    tl.gaps =
        required<std::vector<std::pair<double, double>>>(t, "gaps", "results.itl_timelines[]");
    tl.long_requests = required<std::vector<std::pair<double, double>>>(t, "long_requests",
                                                                        "results.itl_timelines[]");
    r.timelines.push_back(std::move(tl));
  }
  r.errors = required<std::vector<std::string>>(doc, "errors", "results");
  r.notes = required<std::vector<std::string>>(doc, "notes", "results");
  if (doc.contains("machine_load"))  // absent from results written before it was measured
    for (const json& l : required<json>(doc, "machine_load", "results")) {
      SectionLoad s;
      s.section = required<std::string>(l, "section", "results.machine_load[]");
      s.before = required<double>(l, "before", "results.machine_load[]");
      s.after = required<double>(l, "after", "results.machine_load[]");
      r.machine_load.push_back(std::move(s));
    }
  return r;
}

Headlines headlines(const SuiteResults& r) {
  Headlines h;
  const SuiteRow* f16 = find_row(r, "weights", "F16");
  const SuiteRow* best_q4 = nullptr;
  for (const SuiteRow& row : r.rows)
    if (row.section == "weights" && row.engine == "tern" &&
        (row.name.rfind("Q4", 0) == 0 || row.name.rfind("GPTQ", 0) == 0 ||
         row.name.rfind("AWQ", 0) == 0) &&
        (best_q4 == nullptr || number_or_nan(row.metrics, "decode_tokens_per_s") >
                                   number_or_nan(best_q4->metrics, "decode_tokens_per_s")))
      best_q4 = &row;
  if (f16 != nullptr && best_q4 != nullptr) {
    const double a = number_or_nan(f16->metrics, "decode_tokens_per_s");
    const double b = number_or_nan(best_q4->metrics, "decode_tokens_per_s");
    if (a > 0 && b > 0)
      h.quantization = best_q4->name + " decodes " + fmt("%.1f×", b / a) + " as fast as F16 (" +
                       fmt("%.1f", b) + " vs " + fmt("%.1f", a) + " tokens/s), in " +
                       fmt("%.0f%%", 100 * number_or_nan(best_q4->metrics, "weight_bytes") /
                                         number_or_nan(f16->metrics, "weight_bytes")) +
                       " of the bytes";
  }
  const SuiteRow* best_spec = nullptr;
  for (const SuiteRow& row : r.rows)
    if (row.section == "speculative" && row.engine == "tern" &&
        number_or_nan(row.metrics, "acceptance_rate") >= 0 &&
        (best_spec == nullptr ||
         number_or_nan(row.metrics, "speedup") > number_or_nan(best_spec->metrics, "speedup")))
      best_spec = &row;
  if (best_spec != nullptr)
    h.speculation = "speculative decoding (" + best_spec->name + ") decodes " +
                    fmt("%.2f×", number_or_nan(best_spec->metrics, "speedup")) +
                    " as fast as plain decoding at α = " +
                    fmt("%.2f", number_or_nan(best_spec->metrics, "acceptance_rate"));
  const SuiteRow* whole = find_row(r, "mixed_load", "whole");
  const SuiteRow* chunked = find_row(r, "mixed_load", "chunked");
  if (whole != nullptr && chunked != nullptr) {
    const double a = number_or_nan(whole->metrics, "max_itl_ms");
    const double b = number_or_nan(chunked->metrics, "max_itl_ms");
    if (a > 0 && b > 0)
      h.chunked_prefill = "under a mixed load, chunked prefill cuts the streams' worst gap from " +
                          fmt("%.0f", a) + " ms to " + fmt("%.0f", b) + " ms (" +
                          fmt("%.1f×", a / b) + "), ITL p99 " +
                          fmt("%.1f", number_or_nan(whole->metrics, "itl_p99_ms")) + " → " +
                          fmt("%.1f", number_or_nan(chunked->metrics, "itl_p99_ms")) + " ms";
  }
  return h;
}

bool SectionLoad::idle() const { return before < kIdleBusyCpusLimit && after < kIdleBusyCpusLimit; }

namespace {

// What the header may say of the machine: only what was measured.
std::string load_sentence(const SuiteResults& r) {
  const std::string ran = "The configurations and engines ran one after another";
  if (r.machine_load.empty()) return ran + " (this run did not measure what else the machine ran)";
  double most = 0;
  bool idle = true;
  for (const SectionLoad& l : r.machine_load) {
    most = std::max({most, l.before, l.after});
    idle = idle && l.idle();
  }
  if (idle)
    return ran + " on a machine other programs left idle (at most " + fmt("%.2f", most) +
           " CPUs busy in the second before and after each section)";
  return ran +
         "; other programs kept the CPUs busy around the sections marked ⚠, whose figures "
         "are not an idle machine's";
}

}  // namespace

std::string results_markdown(const SuiteResults& r, const std::vector<std::string>& plots) {
  std::string md = "# What each technique buys: tern's benchmark suite\n\n";
  // On a device the ceilings are the device memory's (tern plan's copy on the device).
  const bool on_device = r.device != "cpu";
  md += "Measured by `tern bench suite` on " + r.date + ", tern " + r.commit + ", " + r.cpu + " (" +
        std::to_string(r.cores) + " cores, " + std::to_string(r.threads) + " threads)" +
        (on_device ? ", tern's models on `--device " + r.device + "`" : "") + ", memory " +
        (on_device ? "" : "read ") + "bandwidth " + fmt("%.1f", r.bandwidth_bytes_per_s / 1e9) +
        " GB/s (" + (r.bandwidth_source.empty() ? "" : r.bandwidth_source + "; ") +
        "the best of the measurements `tern plan` made during the run; every ceiling is "
        "this bandwidth over the bytes a token reads). " +
        load_sentence(r) +
        "; each "
        "figure is from this one run (speculation's: the median of its runs), so read "
        "differences under about 10% as noise.\n\n"
        "Rerun it with `make results` (`LLAMA_CPP=<llama.cpp's build/bin>` adds llama.cpp's "
        "figures), or any matrix with `tern bench suite --config FILE --out DIR`; `tern bench "
        "suite --render DIR/results.json` draws the page and plots again. Under each table are "
        "the commands its rows came from.\n\n";
  const Headlines h = headlines(r);
  if (!h.quantization.empty() || !h.speculation.empty() || !h.chunked_prefill.empty()) {
    md += "## Headlines\n\n";
    for (const std::string* line : {&h.quantization, &h.speculation, &h.chunked_prefill})
      if (!line->empty()) md += "- " + *line + ".\n";
    md += "\n";
  }
  auto plot_for = [&plots](const std::string& section) -> std::string {
    static const std::map<std::string, std::string> kPlotOf = {{"weights", "throughput.svg"},
                                                               {"speculative", "speculation.svg"},
                                                               {"kv_cache", "kv_capacity.svg"},
                                                               {"mixed_load", "itl_timeline.svg"}};
    const auto it = kPlotOf.find(section);
    if (it == kPlotOf.end()) return "";
    for (const std::string& p : plots)
      if (p.size() >= it->second.size() &&
          p.compare(p.size() - it->second.size(), it->second.size(), it->second) == 0)
        return p;
    return "";
  };
  for (const char* section : kSuiteSections) {
    std::vector<const SuiteRow*> rows;
    for (const SuiteRow& row : r.rows)
      if (row.section == section) rows.push_back(&row);
    if (rows.empty()) continue;
    const std::vector<SuiteColumn>& columns = suite_columns(section);
    md += "## " + std::string(section_heading(section)) + "\n\n" + section_intro(section) + "\n\n";
    for (const SectionLoad& l : r.machine_load)
      if (l.section == section && !l.idle())
        md += "⚠ Other programs kept " + fmt("%.2f", l.before) +
              " CPUs busy in the second before "
              "this section and " +
              fmt("%.2f", l.after) +
              " in the second after: these figures are not an idle machine's.\n\n";
    md += "| configuration | engine |";
    for (const SuiteColumn& c : columns) md += " " + std::string(c.heading) + " |";
    md += " commands |\n|---|---|";
    for (size_t i = 0; i < columns.size(); ++i) md += "---:|";
    md += "---|\n";
    std::vector<std::string> commands;
    for (const SuiteRow* row : rows) {
      md += "| " + row->name + " | " + row->engine + " |";
      for (const SuiteColumn& c : columns) {
        const auto it = row->metrics.find(c.key);
        md.append(" ")
            .append(format_value(it == row->metrics.end() ? json() : json(*it), c.format))
            .append(" |");
      }
      std::string refs;
      for (const std::string& cmd : row->commands) {
        const auto it = std::find(commands.begin(), commands.end(), cmd);
        const size_t index = static_cast<size_t>(it - commands.begin()) + 1;
        if (it == commands.end()) commands.push_back(cmd);
        if (!refs.empty()) refs += ", ";
        refs += std::to_string(index);
      }
      md += " " + refs + " |\n";
    }
    md += "\n<details><summary>Commands</summary>\n\n";
    for (size_t i = 0; i < commands.size(); ++i)
      md += std::to_string(i + 1) + ". `" + commands[i] + "`\n";
    md += "\n</details>\n\n";
    const std::string plot = plot_for(section);
    if (!plot.empty()) md += "![" + std::string(section_heading(section)) + "](" + plot + ")\n\n";
  }
  auto list = [&md](const std::string& heading, const std::string& intro,
                    const std::vector<std::string>& items) {
    if (items.empty()) return;
    md += "## " + heading + "\n\n" + intro + "\n\n";
    for (std::string item : items) {
      std::replace(item.begin(), item.end(), '\n', ' ');
      std::replace(item.begin(), item.end(), '`', '\'');
      md += "- `" + item + "`\n";
    }
    md += "\n";
  };
  list("Not measured by another engine",
       "Rows with dashes where the other engine's command failed on this model:", r.notes);
  list("Not measured", "These sections stopped at an error; their rows are missing.", r.errors);
  return md;
}

}  // namespace tern::bench
