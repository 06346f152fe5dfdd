// The matrix, section by section. Every figure comes from a command a person could run alone
// (its line is kept in the row): tern's own subcommands as processes of this binary, so each
// configuration loads its model afresh and leaves no memory behind for the next.
#include "tern/bench/suite/suite_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "tern/bench/machine_load.h"
#include "tern/bench/report.h"
#include "tern/bench/suite/suite_process.h"
#include "tern/core/error.h"
#include "tern/core/subprocess.h"

namespace tern::bench {
namespace {

using nlohmann::json;
using oj = nlohmann::ordered_json;
namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double number(const json& doc, const json::json_pointer& at) {
  if (!doc.contains(at) || !doc.at(at).is_number())
    throw Error("a command's JSON lacks the number " + at.to_string());
  return doc.at(at).get<double>();
}

json nullable(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The row name of a weight type: "Q4_K_M", "GPTQ INT4 g128".
std::string type_label(const std::string& type, int group_size) {
  if (type == "gptq" || type == "awq") return upper(type) + " INT4 g" + std::to_string(group_size);
  return upper(type);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// How long the machine's load is watched before and after each section: long enough to see a
// program that keeps a core busy, short beside a section's minutes.
constexpr std::chrono::milliseconds kLoadWindow{1000};

class Runner {
 public:
  Runner(const SuiteConfig& c, const fs::path& work, std::ostream& log)
      : c_(c),
        work_(work),
        models_(work / "models"),
        logs_(work / "logs"),
        log_(log),
        tern_(self_executable()) {
    fs::create_directories(models_);
    fs::create_directories(logs_);
    threads_ = c.threads > 0 ? c.threads
                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    r_.date = utc_now();
    r_.cpu = cpu_name();
    r_.cores = static_cast<int>(std::thread::hardware_concurrency());
    r_.threads = threads_;
    r_.device = c.device.empty() ? "cpu" : c.device;
    r_.config = suite_config_json(c);
  }

  SuiteResults run() {
    if (c_.model.empty()) throw Error("the suite needs a model: --model or the config's \"model\"");
    if (!fs::exists(c_.model)) throw Error(c_.model.string() + ": no such model file");
    measure_bandwidth();
    // A section that fails is recorded and the next one runs: one missing feature or broken
    // file costs its rows, not the whole run.
    const std::pair<bool, void (Runner::*)()> sections[] = {
        {c_.weights.enabled, &Runner::weights},   {c_.speculative.enabled, &Runner::speculative},
        {c_.kv_cache.enabled, &Runner::kv_cache}, {c_.mixed_load.enabled, &Runner::mixed_load},
        {c_.serving.enabled, &Runner::serving},   {c_.shapes.enabled, &Runner::shapes}};
    for (size_t i = 0; i < std::size(sections); ++i) {
      if (!sections[i].first) continue;
      SectionLoad load{kSuiteSections[i]};
      load.before = other_programs_busy_cpus(kLoadWindow);
      try {
        (this->*sections[i].second)();
      } catch (const Error& e) {
        log_ << "suite: section " << kSuiteSections[i] << " failed: " << e.what() << std::endl;
        r_.errors.push_back(std::string(kSuiteSections[i]) + ": " + e.what());
      }
      load.after = other_programs_busy_cpus(kLoadWindow);
      if (!load.idle())
        log_ << "suite: other programs kept " << load.before << " CPUs busy before section "
             << load.section << " and " << load.after
             << " after: its figures are marked as not an idle machine's" << std::endl;
      r_.machine_load.push_back(std::move(load));
    }
    measure_bandwidth();
    set_ceilings();
    return std::move(r_);
  }

 private:
  Argv tern(std::initializer_list<std::string> args) const {
    Argv argv{tern_};
    argv.insert(argv.end(), args);
    return argv;
  }
  // A tern command that runs the model: on the suite's device.
  Argv engine(std::initializer_list<std::string> args) const {
    Argv argv = tern(args);
    if (!c_.device.empty()) argv.insert(argv.end(), {"--device", c_.device});
    return argv;
  }
  bool on_device() const { return !c_.device.empty() && c_.device != "cpu"; }
  // What llama.cpp's commands add to run on the device too: every layer offloaded (its build
  // must have the device's backend, e.g. -DGGML_VULKAN=ON).
  Argv offload() const { return on_device() ? Argv{"-ngl", "99"} : Argv{}; }
  std::string threads() const { return std::to_string(threads_); }
  static std::string str(int v) { return std::to_string(v); }

  // "[12:34] $ command": minutes and seconds since the suite started.
  void log_command(const Argv& argv) {
    const auto s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_)
            .count();
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%02lld:%02lld] $ ", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
    log_ << stamp << display_command(argv) << std::endl;
  }

  json run_json(const Argv& argv, SuiteRow* row) {
    log_command(argv);
    if (row != nullptr) row->commands.push_back(display_command(argv));
    return run_for_json(argv);
  }
  void run_prepare(const Argv& argv) {
    log_command(argv);
    run_checked(argv);
  }

  SuiteRow& add_row(const std::string& section, const std::string& name,
                    const std::string& engine) {
    r_.rows.push_back({section, name, engine, {}, empty_metrics(section)});
    return r_.rows.back();
  }

  // Another engine's measurement: when its command fails (a feature it lacks for this model),
  // the row keeps its nulls, the page says why, and the suite goes on.
  template <typename Measure>
  void other_engine(const std::string& what, Measure&& measure) {
    try {
      measure();
    } catch (const Error& e) {
      log_ << "suite: " << what << ": " << e.what() << std::endl;
      r_.notes.push_back(what + ": " + e.what());
    }
  }

  // --- weight files -----------------------------------------------------------------------

  std::string stem() const { return c_.model.stem().string(); }

  // The file (or checkpoint folder) of `type`, made from the model on first use. Its making
  // command goes into `row` (a row's commands then rebuild it from the model alone).
  fs::path weights_file(const std::string& type, SuiteRow* row) {
    const bool checkpoint = type == "gptq" || type == "awq";
    const fs::path file = models_ / (stem() + "-" + type + (checkpoint ? "" : ".gguf"));
    Argv argv;
    if (checkpoint) {
      const fs::path imat = imatrix(row);
      argv = tern({"quantize", c_.model.string(), file.string(), "--output-format", type,
                   "--group-size", str(c_.weights.group_size), "--imatrix", imat.string(), "-t",
                   threads()});
    } else {
      argv = tern({"quantize", c_.model.string(), file.string(), type, "-t", threads()});
    }
    if (row != nullptr) row->commands.push_back(display_command(argv));
    if (!fs::exists(file)) run_prepare(argv);
    return file;
  }

  // GPTQ's and AWQ's importance matrix (with second moments) over text the model wrote itself.
  fs::path imatrix(SuiteRow* row) {
    const fs::path text = models_ / "calibration.txt", imat = models_ / (stem() + "-imatrix.gguf");
    const Argv write_text =
        tern({"generate", "-m", c_.model.string(), "-p", c_.prompt, "-n", "512", "--temperature",
              "1", "--seed", "1", "--ignore-eos", "--json", "-t", threads()});
    const Argv make_imatrix = tern({"imatrix", "-m", c_.model.string(), "-f", text.string(), "-o",
                                    imat.string(), "-c", "128", "--hessian", "-t", threads()});
    if (row != nullptr) {
      row->commands.push_back(display_command(write_text) +
                              " (its text: " + text.filename().string() + ")");
      row->commands.push_back(display_command(make_imatrix));
    }
    if (!fs::exists(text)) {
      log_command(write_text);
      const json out = run_for_json(write_text);
      std::ofstream(text) << out.at("text").get<std::string>();
    }
    if (!fs::exists(imat)) run_prepare(make_imatrix);
    return imat;
  }

  // The memory read bandwidth every ceiling is figured from: the best of every measurement
  // tern plan made in the run, three more at its start and three at its end (on this VM one
  // measurement alone moved by a third between runs, and a low one put decode above its
  // "ceiling"): the ceiling is what the machine can do, not what it did in a slow moment.
  void measure_bandwidth() {
    for (int i = 0; i < 3; ++i) plan(c_.model, nullptr);
  }

  // tern plan's JSON for `file`; its bandwidth measurement counts towards the run's.
  json plan(const fs::path& file, SuiteRow* row, const std::string& kv_dtype = "") {
    Argv argv = engine({"plan", file.string(), "--json", "--threads", threads()});
    if (!kv_dtype.empty()) argv.insert(argv.end(), {"--kv-cache-dtype", kv_dtype});
    const json p = run_json(argv, row);
    r_.bandwidth_bytes_per_s =
        std::max(r_.bandwidth_bytes_per_s, number(p, "/decode/bandwidth_bytes_per_s"_json_pointer));
    r_.bandwidth_source = p.at("/decode/bandwidth_source"_json_pointer).get<std::string>();
    return p;
  }

  // Each batch-1 row's ceiling at the run's bandwidth: bandwidth / plan's bytes read per token.
  void set_ceilings() {
    for (SuiteRow& row : r_.rows) {
      const auto it = bytes_per_token_.find(row.section + "/" + row.name);
      if (it == bytes_per_token_.end()) continue;
      const double ceiling = r_.bandwidth_bytes_per_s / it->second;
      row.metrics["ceiling_tokens_per_s"] = ceiling;
      const json& tg = row.metrics["decode_tokens_per_s"];
      row.metrics["ceiling_pct"] = tg.is_number() ? json(100 * tg.get<double>() / ceiling) : json();
    }
  }

  // tern bench-model: {pp, tg} tokens/s (NaN where not run).
  std::pair<double, double> bench_model(const fs::path& file, int p, int n, int reps, SuiteRow* row,
                                        const Argv& extra = {}) {
    Argv argv = engine({"bench-model", file.string(), "-p", str(p), "-n", str(n), "-r", str(reps),
                        "-t", threads(), "--json"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    const json out = run_json(argv, row);
    auto get = [&](const char* key) {
      return out.contains(key) && out[key].is_number() ? out[key].get<double>() : std::nan("");
    };
    return {get("pp_tokens_per_s"), get("tg_tokens_per_s")};
  }

  // llama-bench of `bin_dir`: {pp, tg} tokens/s.
  std::pair<double, double> llama_bench(const fs::path& bin_dir, const fs::path& file, int p, int n,
                                        int reps, SuiteRow* row, const Argv& extra = {}) {
    Argv argv{(bin_dir / "llama-bench").string(),
              "-m",
              file.string(),
              "-p",
              str(p),
              "-n",
              str(n),
              "-r",
              str(reps),
              "-t",
              threads(),
              "-o",
              "json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const Argv device = offload();
    argv.insert(argv.end(), device.begin(), device.end());
    const json out = run_json(argv, row);
    double pp = std::nan(""), tg = std::nan("");
    for (const json& test : out) {
      // A build without the device's backend runs on the CPU without a word: not the device's
      // figure.
      if (on_device() && test.contains("backends") && test["backends"] == "CPU")
        throw Error(bin_dir.string() +
                    "'s llama-bench has only the CPU backend; build llama.cpp "
                    "with the device's (-DGGML_VULKAN=ON) to compare on " +
                    c_.device);
      const int64_t n_prompt = test.value("n_prompt", int64_t{0}),
                    n_gen = test.value("n_gen", int64_t{0});
      if (n_gen > 0)
        tg = test.at("avg_ts").get<double>();
      else if (n_prompt > 0)
        pp = test.at("avg_ts").get<double>();
    }
    return {pp, tg};
  }

  // The other engines asked for, with their llama-bench's extra flags.
  std::vector<std::tuple<std::string, fs::path, Argv>> other_engines() const {
    std::vector<std::tuple<std::string, fs::path, Argv>> engines;
    if (!c_.llama_cpp.empty()) engines.emplace_back("llama.cpp", c_.llama_cpp, Argv{});
    if (!c_.ik_llama_cpp.empty())
      engines.emplace_back("ik_llama.cpp", c_.ik_llama_cpp, Argv{"-rtr", "1"});
    return engines;
  }

  // One batch-1 row of a file: plan's size, bench-model's speeds (the ceiling is set at the
  // end, from the run's bandwidth and the bytes read per token kept here).
  void fill_speed_row(SuiteRow& row, const json& p, double pp, double tg, int prompt_tokens) {
    bytes_per_token_[row.section + "/" + row.name] =
        number(p, "/decode/weight_bytes_per_token"_json_pointer);
    row.metrics["weight_bytes"] = number(p, "/weights/bytes"_json_pointer);
    row.metrics["decode_tokens_per_s"] = nullable(tg);
    row.metrics["prefill_tokens_per_s"] = nullable(pp);
    row.metrics["ttft_ms"] = nullable(1e3 * prompt_tokens / pp);
  }

  // A file at batch 1 by tern and by each other engine that reads it (GGUF only), the engines
  // alternating for `rounds` rounds; each figure the median of its rounds.
  void speed_rows(const std::string& section, const std::string& name, const fs::path& file,
                  const std::vector<std::string>& prepare, int p, int n, int reps, int rounds) {
    const bool gguf = file.extension() == ".gguf";
    std::vector<std::tuple<std::string, fs::path, Argv>> engines{{"tern", {}, {}}};
    if (gguf)
      for (const auto& other : other_engines()) engines.push_back(other);
    std::vector<SuiteRow> rows;
    for (const auto& engine : engines)
      rows.push_back({section, name, std::get<0>(engine), prepare, empty_metrics(section)});
    const json pl = plan(file, &rows[0]);
    std::vector<std::vector<double>> pp(engines.size()), tg(engines.size());
    std::vector<bool> failed(engines.size(), false);
    for (int round = 0; round < rounds; ++round)
      for (size_t e = 0; e < engines.size(); ++e) {
        SuiteRow* record = round == 0 ? &rows[e] : nullptr;
        if (e == 0) {
          const auto [a, b] = bench_model(file, p, n, reps, record);
          pp[0].push_back(a), tg[0].push_back(b);
          continue;
        }
        if (failed[e]) continue;
        const auto& [engine, dir, extra] = engines[e];
        failed[e] = true;
        other_engine(engine + ", " + name, [&, &dir = dir, &extra = extra] {
          const auto [a, b] = llama_bench(dir, file, p, n, reps, record, extra);
          pp[e].push_back(a), tg[e].push_back(b);
          failed[e] = false;
        });
      }
    for (size_t e = 0; e < engines.size(); ++e) {
      fill_speed_row(rows[e], pl, median(pp[e]), median(tg[e]), p);
      r_.rows.push_back(std::move(rows[e]));
    }
  }

  // --- sections ---------------------------------------------------------------------------

  void weights() {
    const WeightsSection& s = c_.weights;
    for (const std::string& type : s.types) {
      SuiteRow scratch;
      const fs::path file = weights_file(type, &scratch);
      speed_rows("weights", type_label(type, s.group_size), file, scratch.commands, s.prompt_tokens,
                 s.decode_tokens, s.reps, s.rounds);
    }
  }

  void speculative() {
    const SpeculativeSection& s = c_.speculative;
    SuiteRow scratch;
    const fs::path target = weights_file(s.type, &scratch);
    const Argv base =
        engine({"generate", "-m", target.string(), "-p", c_.prompt, "-n", str(s.decode_tokens),
                "--ignore-eos", "--temperature", "0", "-t", threads(), "--json"});
    struct Case {
      std::string name;
      Argv extra;
      int k = 0;  // 0: plain; negative: adaptive up to -k
      std::vector<double> tps, alpha, length;
    };
    std::vector<Case> cases{{"plain decoding", {}, 0, {}, {}, {}}};
    const std::string draft = c_.draft.string();
    for (const std::string& m : s.methods) {
      if (m == "ngram")
        cases.push_back(
            {"n-gram (adaptive K ≤ 8)",
             {"--speculative-config",
              R"({"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":4,"prompt_lookup_min":2})"},
             -8,
             {},
             {},
             {}});
      else if (draft.empty())
        log_ << "speculative: no draft model given, '" << m << "' skipped" << std::endl;
      else if (m == "draft")
        cases.push_back({"draft model (adaptive K ≤ 8)",
                         {"--speculative-model", draft, "--num-speculative-tokens", "8"},
                         -8,
                         {},
                         {},
                         {}});
      else
        cases.push_back(
            {"draft model (K = 4)",
             {"--speculative-config",
              json{{"model", draft}, {"num_speculative_tokens", 4}, {"adaptive", false}}.dump()},
             4,
             {},
             {},
             {}});
    }
    std::vector<SuiteRow> rows;
    for (const Case& c : cases) {
      rows.push_back(
          {"speculative", c.name, "tern", scratch.commands, empty_metrics("speculative")});
    }
    // The configurations alternate within each run, so drift of the machine spreads evenly.
    for (int run = 0; run < s.runs; ++run)
      for (size_t i = 0; i < cases.size(); ++i) {
        Argv argv = base;
        argv.insert(argv.end(), cases[i].extra.begin(), cases[i].extra.end());
        const json out = run_json(argv, run == 0 ? &rows[i] : nullptr);
        cases[i].tps.push_back(number(out, "/timings/decode_tokens_per_s"_json_pointer));
        if (out.contains("speculative") &&
            number(out, "/speculative/num_draft_tokens"_json_pointer) > 0) {
          cases[i].alpha.push_back(number(out, "/speculative/acceptance_rate"_json_pointer));
          cases[i].length.push_back(
              number(out, "/speculative/mean_acceptance_length"_json_pointer));
        }
      }
    const double plain = median(cases[0].tps);
    for (size_t i = 0; i < cases.size(); ++i) {
      oj& m = rows[i].metrics;
      m["num_speculative_tokens"] = cases[i].k == 0 ? json(nullptr) : json(std::abs(cases[i].k));
      m["decode_tokens_per_s"] = median(cases[i].tps);
      m["speedup"] = median(cases[i].tps) / plain;
      m["acceptance_rate"] = nullable(median(cases[i].alpha));
      m["mean_acceptance_length"] = nullable(median(cases[i].length));
      r_.rows.push_back(std::move(rows[i]));
    }
    if (!draft.empty()) {
      // The theory's c: a draft step's time over a target step's.
      SuiteRow& row =
          add_row("speculative", "draft model alone (" + c_.draft.stem().string() + ")", "tern");
      const auto [pp, tg] = bench_model(c_.draft, 0, 64, 3, &row);
      row.metrics["decode_tokens_per_s"] = nullable(tg);
      r_.draft_cost_ratio = plain / tg;
    }
    for (const auto& [engine, dir, extra] : other_engines()) {
      if (engine != "llama.cpp" || draft.empty()) continue;
      other_engine("llama.cpp, speculative decoding",
                   [&, &dir = dir] { llama_speculative(dir, target, scratch.commands); });
    }
  }

  // llama.cpp's plain decoding (llama-bench tg) and its draft-model speculation
  // (llama-speculative) on the same target and draft.
  void llama_speculative(const fs::path& dir, const fs::path& target,
                         const std::vector<std::string>& prepare) {
    const SpeculativeSection& s = c_.speculative;
    SuiteRow& plain = add_row("speculative", "plain decoding", "llama.cpp");
    plain.commands = prepare;
    std::vector<double> plain_tps;
    for (int run = 0; run < s.runs; ++run)
      plain_tps.push_back(
          llama_bench(dir, target, 0, s.decode_tokens, 1, run == 0 ? &plain : nullptr).second);
    const double base = median(plain_tps);
    plain.metrics["decode_tokens_per_s"] = base;
    plain.metrics["speedup"] = 1.0;
    SuiteRow& spec = add_row("speculative", "draft model (K ≤ 8)", "llama.cpp");
    spec.commands = prepare;
    std::vector<double> tps, alpha;
    for (int run = 0; run < s.runs; ++run) {
      Argv argv{(dir / "llama-speculative").string(),
                "-m",
                target.string(),
                "-md",
                c_.draft.string(),
                "-p",
                c_.prompt,
                "-n",
                str(s.decode_tokens),
                "--spec-draft-n-max",
                "8",
                "--temp",
                "0",
                "-t",
                threads(),
                "-td",
                threads(),
                "--ignore-eos",
                "-s",
                "1"};
      if (on_device()) argv.insert(argv.end(), {"-ngl", "99", "-ngld", "99"});
      log_command(argv);
      if (run == 0) spec.commands.push_back(display_command(argv));
      const ProcessResult out = run_process(argv);
      if (out.exit_code != 0)
        throw Error("`" + display_command(argv) + "` failed:\n" +
                    out.err.substr(out.err.size() > 2000 ? out.err.size() - 2000 : 0));
      const auto [speed, accept] = parse_llama_speculative(out.err + out.out);
      tps.push_back(speed);
      alpha.push_back(accept);
    }
    spec.metrics["num_speculative_tokens"] = 8;
    spec.metrics["decode_tokens_per_s"] = nullable(median(tps));
    spec.metrics["speedup"] = nullable(median(tps) / base);
    spec.metrics["acceptance_rate"] = nullable(median(alpha));
  }

  // llama-speculative's summary on stderr: "decoded N tokens in S seconds, speed: X t/s" and
  // "accept    = P%" (each line after a timestamp).
  static std::pair<double, double> parse_llama_speculative(const std::string& text) {
    static const std::regex kSpeed(
        R"(decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+))");
    static const std::regex kAccept(R"(accept\s+=\s+([0-9.]+)%)");
    std::smatch m;
    const double speed = std::regex_search(text, m, kSpeed) ? std::stod(m[1]) : std::nan("");
    const double accept =
        std::regex_search(text, m, kAccept) ? std::stod(m[1]) / 100 : std::nan("");
    return {speed, accept};
  }

  void kv_cache() {
    const KvCacheSection& s = c_.kv_cache;
    SuiteRow scratch;
    const fs::path target =
        s.config.empty() ? weights_file(s.type, &scratch) : shape_file(s.config, s.type, &scratch);
    const std::string shape =
        s.config.empty() ? c_.model.stem().string() : s.config.filename().string();
    double f16_bytes = std::nan("");
    for (const std::string& dtype : s.dtypes) {
      SuiteRow& row = add_row("kv_cache", shape + " " + dtype, "tern");
      row.commands = scratch.commands;
      const json p = plan(target, &row, dtype);
      const double bytes = number(p, "/kv_cache/bytes_per_token"_json_pointer);
      if (dtype == "f16") f16_bytes = bytes;
      const auto [pp, tg] = bench_model(target, 0, s.decode_tokens, s.reps, &row,
                                        {"-d", str(s.context), "--kv-cache-dtype", dtype});
      row.metrics["context"] = s.context;
      row.metrics["kv_bytes_per_token"] = bytes;
      row.metrics["tokens_per_gib"] = std::floor(1073741824.0 / bytes);
      row.metrics["decode_tokens_per_s"] = nullable(tg);
    }
    // llama.cpp's caches of the same kinds: f16, and q8_0 for int8 (34 bytes per 32 values).
    for (const auto& [engine, dir, extra] : other_engines()) {
      for (const std::string& dtype : s.dtypes) {
        const std::string cache = dtype == "f16" ? "f16" : dtype == "int8" ? "q8_0" : "";
        if (cache.empty()) continue;
        SuiteRow& row =
            add_row("kv_cache", shape + " " + (dtype == "f16" ? "f16" : "int8 (q8_0)"), engine);
        row.commands = scratch.commands;
        const double bytes = cache == "f16" ? f16_bytes : f16_bytes / 2 * 34 / 32;
        row.metrics["context"] = s.context;
        row.metrics["kv_bytes_per_token"] = nullable(bytes);
        row.metrics["tokens_per_gib"] = nullable(std::floor(1073741824.0 / bytes));
        Argv flags = extra;
        flags.insert(flags.end(), {"-d", str(s.context), "-ctk", cache, "-ctv", cache, "-fa", "1"});
        other_engine(engine + ", " + cache + " KV cache", [&, &dir = dir] {
          row.metrics["decode_tokens_per_s"] =
              nullable(llama_bench(dir, target, 0, s.decode_tokens, s.reps, &row, flags).second);
        });
      }
    }
  }

  Argv serve_argv(const fs::path& file, int port, int threads) const {
    return engine({"serve", file.string(), "--port", str(port), "--threads", str(threads),
                   "--served-model-name", "m", "--disable-log-stats"});
  }

  // tern bench serve against `url`, its result JSON kept as `name`.json in the output folder.
  json bench_serve(const std::string& url, const fs::path& tokenizer, const std::string& name,
                   const Argv& load, SuiteRow& row) {
    const fs::path result = work_ / (name + ".json");
    Argv argv = tern({"bench", "serve", "--base-url", url, "--model", "m", "--tokenizer",
                      tokenizer.string(), "--seed", "0", "--disable-tqdm", "--result-filename",
                      result.string()});
    argv.insert(argv.end(), load.begin(), load.end());
    log_command(argv);
    row.commands.push_back(display_command(argv));
    run_checked(argv);
    std::ifstream in(result);
    if (!in) throw Error(result.string() + ": tern bench serve wrote no result");
    return json::parse(in);
  }

  void mixed_load() {
    const MixedLoadSection& s = c_.mixed_load;
    SuiteRow scratch;
    const fs::path target = weights_file(s.type, &scratch);
    const Argv load{"--num-prompts",        str(s.num_prompts),
                    "--request-rate",       python_float(s.request_rate),
                    "--random-input-len",   str(s.input_len),
                    "--random-output-len",  str(s.output_len),
                    "--long-num-prompts",   str(s.long_num_prompts),
                    "--long-input-len",     str(s.long_input_len),
                    "--long-output-len",    str(s.long_output_len),
                    "--long-request-rate",  python_float(s.long_request_rate),
                    "--metric-percentiles", "50,99"};
    const fs::path log_file = logs_ / "mixed_load.log";
    for (const std::string& setup : s.setups) {
      const std::string name = setup == "chunked"
                                   ? "chunked (≤ " + str(s.chunk_tokens) + " tokens, ~200 ms steps)"
                               : setup == "pd" ? "P + D (1 + 1 threads)"
                                               : "whole";
      SuiteRow& row = add_row("mixed_load", name, "tern");
      row.commands = scratch.commands;
      json result;
      if (setup == "pd") {
        const int prefill_port = free_port(), decode_port = free_port(), router_port = free_port();
        Argv prefill = serve_argv(target, prefill_port, 1);
        prefill.insert(prefill.end(),
                       {"--kv-transfer-config", json{{"kv_connector", "UcxConnector"},
                                                     {"kv_role", "kv_producer"},
                                                     {"kv_port", free_port()}}
                                                    .dump()});
        Argv decode = serve_argv(target, decode_port, 1);
        decode.insert(decode.end(), {"--role", "decode"});
        const ServerProcess p(prefill, prefill_port, log_file);
        const ServerProcess d(decode, decode_port, log_file);
        const Argv router_argv =
            tern({"router", "--prefill", p.url(), "--decode", d.url(), "--port", str(router_port)});
        const ServerProcess router(router_argv, router_port, log_file);
        for (const Argv* a : std::initializer_list<const Argv*>{&prefill, &decode, &router_argv})
          row.commands.push_back(display_command(*a) + " &");
        result = bench_serve(router.url(), target, "mixed-" + setup, load, row);
      } else {
        const int port = free_port();
        Argv serve = serve_argv(target, port, threads_);
        if (setup == "whole")
          serve.push_back("--no-enable-chunked-prefill");
        else  // tern serve's default step budget (--max-step-ms auto) sizes the chunks
          serve.insert(serve.end(), {"--max-num-batched-tokens", str(s.chunk_tokens)});
        const ServerProcess server(serve, port, log_file);
        row.commands.push_back(display_command(serve) + " &");
        result = bench_serve(server.url(), target, "mixed-" + setup, load, row);
      }
      oj& m = row.metrics;
      m["itl_p50_ms"] = result.at("median_itl_ms");
      m["itl_p99_ms"] = result.at("p99_itl_ms");
      m["max_itl_ms"] = result.at("max_itl_ms");
      m["ttft_p50_ms"] = result.at("median_ttft_ms");
      m["long_ttft_mean_ms"] = result.at("mean_long_ttft_ms");
      m["long_ttft_max_ms"] = result.at("max_long_ttft_ms");
      m["failed"] = result.at("failed").get<int64_t>() + result.at("long_failed").get<int64_t>();
      r_.timelines.push_back(timeline(name, result));
    }
  }

  // Every gap of the streams at the time it ended, and the long requests' waits.
  static ItlTimeline timeline(const std::string& setup, const json& result) {
    ItlTimeline t;
    t.setup = setup;
    const json& starts = result.at("start_times");
    const json& ttfts = result.at("ttfts");
    const json& itls = result.at("itls");
    for (size_t i = 0; i < starts.size(); ++i) {
      double at = starts[i].get<double>() + ttfts[i].get<double>();
      for (const json& gap : itls[i]) {
        at += gap.get<double>();
        t.gaps.emplace_back(at, gap.get<double>() * 1e3);
      }
    }
    const json& long_starts = result.at("long_start_times");
    const json& long_ttfts = result.at("long_ttfts");
    for (size_t i = 0; i < long_starts.size() && i < long_ttfts.size(); ++i)
      if (long_ttfts[i].is_number())
        t.long_requests.emplace_back(long_starts[i].get<double>(),
                                     long_starts[i].get<double>() + long_ttfts[i].get<double>());
    return t;
  }

  void serving() {
    const ServingSection& s = c_.serving;
    SuiteRow scratch;
    const fs::path target = weights_file(s.type, &scratch);
    const int most = *std::max_element(s.concurrency.begin(), s.concurrency.end());
    const fs::path log_file = logs_ / "serving.log";
    auto measure = [&](const std::string& engine, const std::string& url,
                       const std::string& server_command) {
      for (int c : s.concurrency) {
        SuiteRow& row = add_row("serving", "concurrency " + str(c), engine);
        row.commands = scratch.commands;
        row.commands.push_back(server_command + " &");
        const Argv load{"--num-prompts",       str(std::max(4, s.prompts_per_concurrency * c)),
                        "--request-rate",      "inf",
                        "--max-concurrency",   str(c),
                        "--random-input-len",  str(s.input_len),
                        "--random-output-len", str(s.output_len)};
        const json result =
            bench_serve(url, target, "serving-" + engine + "-c" + str(c), load, row);
        oj& m = row.metrics;
        m["concurrency"] = c;
        m["output_tokens_per_s"] = result.at("output_throughput");
        m["requests_per_s"] = result.at("request_throughput");
        m["ttft_p50_ms"] = result.at("median_ttft_ms");
        m["tpot_p50_ms"] = result.at("median_tpot_ms");
        m["failed"] = result.at("failed");
      }
    };
    {
      const int port = free_port();
      Argv serve = serve_argv(target, port, threads_);
      serve.insert(serve.end(), {"--max-num-seqs", str(std::max(most, 1))});
      const ServerProcess server(serve, port, log_file);
      measure("tern", server.url(), display_command(serve));
    }
    if (!c_.llama_cpp.empty()) {
      const int port = free_port();
      Argv serve{(c_.llama_cpp / "llama-server").string(),
                 "-m",
                 target.string(),
                 "--port",
                 str(port),
                 "-t",
                 threads(),
                 "-np",
                 str(most),
                 "-c",
                 str(most * (s.input_len + s.output_len + 16)),
                 "--alias",
                 "m"};
      const Argv device = offload();
      serve.insert(serve.end(), device.begin(), device.end());
      other_engine("llama.cpp, serving", [&] {
        const ServerProcess server(serve, port, log_file);
        measure("llama.cpp", server.url(), display_command(serve));
      });
    }
  }

  // A GGUF of a model config's shape with dummy weights of `type`, made on first use (its
  // making command into `row`); both engines then read the same file.
  fs::path shape_file(const fs::path& config, const std::string& type, SuiteRow* row) {
    if (!fs::exists(config)) throw Error(config.string() + ": no such model config");
    const fs::path file = models_ / (config.filename().string() + "-" + type + ".gguf");
    const Argv make = tern({"generate", "-m", config.string(), "--load-format", "dummy",
                            "--weight-type", type, "--tokenizer", c_.shapes.tokenizer.string(),
                            "--save-gguf", file.string(), "-p", "Hi", "-n", "1", "-t", threads()});
    if (row != nullptr) row->commands.push_back(display_command(make));
    if (!fs::exists(file)) run_prepare(make);
    return file;
  }

  void shapes() {
    const ShapesSection& s = c_.shapes;
    for (const fs::path& config : s.configs)
      for (const std::string& type : s.types) {
        SuiteRow scratch;
        const fs::path file = shape_file(config, type, &scratch);
        speed_rows("shapes", config.filename().string() + " " + type_label(type, 0), file,
                   scratch.commands, s.prompt_tokens, s.decode_tokens, s.reps, s.rounds);
      }
  }

  const SuiteConfig& c_;
  fs::path work_, models_, logs_;
  std::ostream& log_;
  std::string tern_;
  int threads_ = 1;
  std::map<std::string, double> bytes_per_token_;  // "section/name" → plan's bytes read per token
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  SuiteResults r_;
};

}  // namespace

SuiteResults run_suite(const SuiteConfig& config, const fs::path& work_dir, std::ostream& log) {
  return Runner(config, work_dir, log).run();
}

}  // namespace tern::bench
