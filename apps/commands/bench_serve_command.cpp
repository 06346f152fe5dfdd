// `tern bench serve`: the serving benchmark client. Sends a dataset of streaming requests to
// an OpenAI-compatible server (tern serve, vLLM, llama.cpp's llama-server) on an arrival
// schedule and reports TTFT, TPOT, ITL, E2EL, throughput and goodput exactly as
// `vllm bench serve` defines them, so the figures compare across servers and tools.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/output_paths.h"
#include "tern/bench/arrivals.h"
#include "tern/bench/datasets.h"
#include "tern/bench/interference.h"
#include "tern/bench/metrics.h"
#include "tern/bench/openai_stream.h"
#include "tern/bench/report.h"
#include "tern/bench/spec_decode_metrics.h"
#include "tern/bench/stream_client.h"
#include "tern/bench/svg_plot.h"
#include "tern/core/error.h"
#include "tern/hub/http_client.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

struct ServeBenchOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;
  std::string tokenizer;
  std::string api_key;
  std::string dataset_name = "random";
  std::string dataset_path;
  int64_t num_prompts = 1000;
  std::string request_rate = "inf";
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0 = no limit
  int64_t random_input_len = 1024;
  int64_t random_output_len = 128;
  double random_range_ratio = 0.0;
  int64_t random_prefix_len = 0;
  int64_t prefix_len = 256, suffix_len = 256, num_prefixes = 10, prefix_output_len = 128;
  int64_t sharegpt_output_len = 0;  // 0 = the reply's own length
  // vLLM's general lengths: --input-len sets the random dataset's, --output-len every dataset's.
  std::optional<int64_t> input_len, output_len;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<std::string> goodput;
  std::string percentile_metrics = "ttft,tpot,itl,e2el";
  std::string metric_percentiles = "90,99";
  bool save_result = false;
  std::string result_dir;
  std::string result_filename;
  std::string plot;
  bool disable_tqdm = false;
  double temperature = NAN, top_p = NAN;
  int top_k = 0;
  // The interference experiment: long prompts that arrive now and then beside the dataset's
  // requests (their own random dataset and Poisson arrivals); the report's figures stay the
  // dataset's, with the worst gap and the long ones' TTFT beside them.
  int64_t long_num_prompts = 0;
  int64_t long_input_len = 3000;
  int64_t long_output_len = 16;
  double long_request_rate = 0.05;
  std::string plot_itl_timeline;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

double parse_number(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw Error(flag + " '" + text + "' is not a number");
  return v;
}

std::string now_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &local);
  return buf;
}

std::vector<bench::SampleRequest> load_dataset(const ServeBenchOptions& o, const Tokenizer& tok) {
  const std::string& name = o.dataset_name;
  const bool synthetic =
      name == "random" || name == "prefix-repetition" || name == "prefix_repetition";
  if (synthetic && !o.dataset_path.empty())
    throw Error("--dataset-name " + name + " takes no --dataset-path (it is generated)");
  if (name == "random") {
    bench::RandomDatasetOptions r;
    r.num_prompts = o.num_prompts;
    r.input_len = o.random_input_len;
    r.output_len = o.random_output_len;
    r.prefix_len = o.random_prefix_len;
    r.range_ratio = o.random_range_ratio;
    r.seed = o.seed;
    return bench::random_dataset(tok, r);
  }
  if (name == "sharegpt") {
    if (o.dataset_path.empty())
      throw Error("--dataset-name sharegpt needs --dataset-path FILE.json");
    bench::ShareGptOptions s;
    s.path = o.dataset_path;
    s.num_prompts = o.num_prompts;
    if (o.sharegpt_output_len > 0) s.output_len = o.sharegpt_output_len;
    s.seed = o.seed;
    return bench::sharegpt_dataset(tok, s);
  }
  if (name == "prefix-repetition" || name == "prefix_repetition") {
    bench::PrefixRepetitionOptions p;
    p.num_prompts = o.num_prompts;
    p.prefix_len = o.prefix_len;
    p.suffix_len = o.suffix_len;
    p.num_prefixes = o.num_prefixes;
    p.output_len = o.prefix_output_len;
    p.seed = o.seed;
    return bench::prefix_repetition_dataset(tok, p);
  }
  throw Error("--dataset-name '" + name + "': expected random, sharegpt or prefix-repetition");
}

// The server's speculative-decoding counters now; none found when /metrics is not there (a
// server without it, or llama-server without --metrics).
bench::SpecDecodeCounters scrape_spec_decode(const ServeBenchOptions& o) {
  const hub::HttpResponse r = hub::HttpClient(o.api_key).get_text(o.base_url + "/metrics");
  if (r.status != 200) return {};
  return bench::parse_spec_decode_counters(r.body);
}

// Output files are checked before the run, so that a mistyped folder does not cost a whole
// benchmark (and end it with an error under a printed report).
void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path + ": cannot write");
}

// A flag of one dataset (or of the long prompts) given with another would be silently ignored:
// the run would measure something else than the command line says.
void check_partner_flags(const CLI::App& cmd, const std::string& dataset) {
  const std::string name = dataset == "prefix_repetition" ? "prefix-repetition" : dataset;
  const std::vector<std::pair<std::string, std::vector<const char*>>> groups = {
      {"random",
       {"--random-input-len", "--random-output-len", "--random-range-ratio",
        "--random-prefix-len"}},
      {"sharegpt", {"--sharegpt-output-len"}},
      {"prefix-repetition",
       {"--prefix-repetition-prefix-len", "--prefix-repetition-suffix-len",
        "--prefix-repetition-num-prefixes", "--prefix-repetition-output-len"}}};
  for (const auto& [owner, flags] : groups)
    for (const char* flag : flags)
      if (cmd.count(flag) > 0 && name != owner)
        throw Error(std::string(flag) + " applies to --dataset-name " + owner +
                    " (the dataset is " + dataset + ")");
  if (cmd.count("--long-num-prompts") == 0)
    for (const char* flag : {"--long-input-len", "--long-output-len", "--long-request-rate"})
      if (cmd.count(flag) > 0) throw Error(std::string(flag) + " goes with --long-num-prompts N");
}

void run(ServeBenchOptions o) {
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  const bench::Endpoint endpoint = bench::endpoint_of(o.endpoint);
  const double request_rate =
      o.request_rate == "inf" ? INFINITY : parse_number(o.request_rate, "--request-rate");
  if (!(request_rate > 0)) throw Error("--request-rate must be positive (or inf)");
  if (o.max_concurrency < 0) throw Error("--max-concurrency must be greater than 0");
  const bench::GoodputSlos slos = bench::parse_goodput(o.goodput);
  std::vector<std::string> metrics = split_commas(o.percentile_metrics);
  for (const std::string& m : metrics)
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el")
      throw Error("--percentile-metrics: unknown metric '" + m + "' (ttft, tpot, itl, e2el)");
  std::vector<double> percentiles;
  for (const std::string& p : split_commas(o.metric_percentiles)) {
    const double v = parse_number(p, "--metric-percentiles");
    if (!(v >= 0 && v <= 100)) throw Error("--metric-percentiles: " + p + " is not in [0, 100]");
    percentiles.push_back(v);
  }
  std::string tokenizer_path = o.tokenizer;
  if (tokenizer_path.empty() && std::filesystem::exists(o.model)) tokenizer_path = o.model;
  if (tokenizer_path.empty())
    throw Error(
        "--tokenizer PATH is needed (a GGUF file or tokenizer folder): it builds the "
        "prompts and counts tokens");
  if (o.model.empty()) throw Error("--model NAME is needed (the model name the server serves)");
  if (o.input_len) {
    if (*o.input_len <= 0) throw Error("--input-len must be positive");
    if (o.dataset_name != "random")
      throw Error("--input-len sets the random dataset's prompt length; --dataset-name " +
                  o.dataset_name + " has its own");
    o.random_input_len = *o.input_len;
  }
  if (o.output_len) {
    if (*o.output_len <= 0) throw Error("--output-len must be positive");
    o.random_output_len = o.sharegpt_output_len = o.prefix_output_len = *o.output_len;
  }
  // Every output file is checked now, not after the run.
  if (!o.result_filename.empty() || !o.result_dir.empty()) o.save_result = true;
  if (!o.result_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.result_dir, ec);
    if (ec) throw Error("--result-dir " + o.result_dir + ": cannot create it: " + ec.message());
  }
  if (!o.result_filename.empty())
    check_output_file((std::filesystem::path(o.result_dir) / o.result_filename).string(),
                      "--result-filename");
  else if (o.save_result)
    check_output_folder(o.result_dir.empty() ? "." : o.result_dir, "--save-result");
  if (!o.plot.empty()) check_output_file(o.plot, "--plot");
  if (!o.plot_itl_timeline.empty()) check_output_file(o.plot_itl_timeline, "--plot-itl-timeline");

  const Tokenizer tokenizer = Tokenizer::load(tokenizer_path);
  // vLLM ignores EOS for the random dataset so every request generates its full length.
  const bool ignore_eos = o.ignore_eos || o.dataset_name == "random";
  const std::vector<bench::SampleRequest> samples = load_dataset(o, tokenizer);

  bench::RequestBodyOptions body;
  body.model = o.model;
  body.ignore_eos = ignore_eos;
  if (!std::isnan(o.temperature)) body.temperature = o.temperature;
  if (!std::isnan(o.top_p)) body.top_p = o.top_p;
  if (o.top_k != 0) body.top_k = o.top_k;
  const std::vector<double> arrivals = bench::arrival_times(static_cast<int64_t>(samples.size()),
                                                            request_rate, o.burstiness, o.seed);
  std::vector<bench::PlannedRequest> planned;
  for (size_t i = 0; i < samples.size(); ++i)
    planned.push_back(
        {bench::request_body(endpoint, body, samples[i].prompt, samples[i].expected_output_len),
         samples[i].prompt_len, arrivals[i]});
  // Long prompts join the schedule in arrival order; is_long says which record is whose.
  std::vector<bool> is_long(planned.size(), false);
  if (o.long_num_prompts > 0) {
    if (!(o.long_request_rate > 0)) throw Error("--long-request-rate must be positive");
    bench::RandomDatasetOptions r;
    r.num_prompts = o.long_num_prompts;
    r.input_len = o.long_input_len;
    r.output_len = o.long_output_len;
    r.seed = o.seed + 1;
    const std::vector<bench::SampleRequest> long_samples = bench::random_dataset(tokenizer, r);
    const std::vector<double> long_arrivals =
        bench::arrival_times(o.long_num_prompts, o.long_request_rate, 1.0, o.seed + 1);
    bench::RequestBodyOptions long_body = body;
    long_body.ignore_eos = true;
    std::vector<std::pair<bench::PlannedRequest, bool>> merged;
    for (size_t i = 0; i < planned.size(); ++i) merged.push_back({std::move(planned[i]), false});
    for (size_t i = 0; i < long_samples.size(); ++i)
      merged.push_back({{bench::request_body(endpoint, long_body, long_samples[i].prompt,
                                             long_samples[i].expected_output_len),
                         long_samples[i].prompt_len, long_arrivals[i]},
                        true});
    std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
      return a.first.arrival < b.first.arrival;
    });
    planned.clear();
    is_long.clear();
    for (auto& [request, long_one] : merged) {
      planned.push_back(std::move(request));
      is_long.push_back(long_one);
    }
  }

  std::printf("Traffic request rate: %s\n", bench::python_float(request_rate).c_str());
  std::printf("Burstiness factor: %s (%s)\n", bench::python_float(o.burstiness).c_str(),
              o.burstiness == 1.0 ? "Poisson process" : "Gamma distribution");
  if (o.max_concurrency > 0)
    std::printf("Maximum request concurrency: %lld\n", static_cast<long long>(o.max_concurrency));
  else
    std::printf("Maximum request concurrency: None\n");
  std::fflush(stdout);

  bench::ClientOptions client;
  client.url = o.base_url + o.endpoint;
  client.endpoint = endpoint;
  client.api_key = o.api_key;
  if (o.max_concurrency > 0) client.max_concurrency = o.max_concurrency;
  client.progress = !o.disable_tqdm;
  const bench::SpecDecodeCounters spec_before = scrape_spec_decode(o);
  bench::RunResult run = bench::run_requests(planned, client);
  const bench::SpecDecodeCounters spec_after = scrape_spec_decode(o);
  std::vector<bench::RequestRecord> long_records;
  if (o.long_num_prompts > 0) {
    std::vector<bench::RequestRecord> streams;
    for (size_t i = 0; i < run.records.size(); ++i)
      (is_long[i] ? long_records : streams).push_back(std::move(run.records[i]));
    run.records = std::move(streams);
  }

  const bench::BenchmarkMetrics m = bench::compute_metrics(
      run.records, run.duration_s, slos, percentiles, [&](const std::string& text) {
        return static_cast<int64_t>(tokenizer.encode(text, /*add_special_tokens=*/false).size());
      });
  bench::ReportConfig config;
  config.backend = bench::backend_name(endpoint);
  config.model_id = o.model;
  config.tokenizer_id = tokenizer_path;
  config.num_prompts = o.num_prompts;
  config.request_rate = request_rate;
  config.burstiness = o.burstiness;
  if (o.max_concurrency > 0) config.max_concurrency = o.max_concurrency;
  config.percentile_metrics = metrics;
  config.percentiles = percentiles;
  config.goodput = !slos.empty();

  std::fputs(bench::failure_lines(run.records).c_str(), stdout);
  std::fputs(bench::summary_table(m, config, run.duration_s).c_str(), stdout);
  std::fputs(bench::spec_decode_section(spec_before, spec_after).c_str(), stdout);
  if (o.long_num_prompts > 0 || !o.plot_itl_timeline.empty())
    std::fputs(bench::interference_section(run.records, long_records, percentiles).c_str(), stdout);
  std::fflush(stdout);

  std::fputs(bench::metric_notes(m, run.duration_s).c_str(), stderr);

  const std::string date = now_stamp();
  if (o.save_result) {
    std::string path = o.result_filename.empty() ? bench::default_result_filename(config, date)
                                                 : o.result_filename;
    if (!o.result_dir.empty()) {
      std::filesystem::create_directories(o.result_dir);
      path = (std::filesystem::path(o.result_dir) / path).string();
    }
    nlohmann::ordered_json result =
        bench::result_json(m, config, run.records, run.duration_s, date);
    const nlohmann::ordered_json spec = bench::spec_decode_json(spec_before, spec_after);
    if (!spec.is_null()) result.update(spec);
    if (o.long_num_prompts > 0 || !o.plot_itl_timeline.empty())
      result.update(bench::interference_json(run.records, long_records, percentiles));
    write_file(path, result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::fprintf(stderr, "tern bench serve: results saved to %s\n", path.c_str());
  }
  if (!o.plot.empty()) {
    std::vector<bench::LatencySeries> series = {
        {"TTFT", m.ttfts}, {"TPOT", m.tpots}, {"ITL", m.itls}, {"E2EL", m.e2els}};
    std::string title =
        o.model + " — " + o.dataset_name + ", " + std::to_string(m.completed) + " requests, rate " +
        o.request_rate +
        (o.max_concurrency > 0 ? ", concurrency " + std::to_string(o.max_concurrency) : "");
    write_file(o.plot, bench::latency_cdf_svg(series, title));
    std::fprintf(stderr, "tern bench serve: latency plot saved to %s\n", o.plot.c_str());
  }
  if (!o.plot_itl_timeline.empty()) {
    std::string title = o.model + " — inter-token latency over time, " +
                        std::to_string(m.completed) + " streams at rate " + o.request_rate;
    if (o.long_num_prompts > 0)
      title += ", " + std::to_string(long_records.size()) + " long prompts of " +
               std::to_string(o.long_input_len) + " tokens";
    write_file(o.plot_itl_timeline, bench::itl_timeline_svg(run.records, long_records, title));
    std::fprintf(stderr, "tern bench serve: ITL timeline saved to %s\n",
                 o.plot_itl_timeline.c_str());
  }
  // A run with no successful request measured nothing: it fails, as a test would, after its
  // report. Some failures leave figures of the successes, so the run passes with a warning.
  const size_t total = run.records.size();
  if (m.completed == 0)
    throw Error("all " + std::to_string(total) +
                " requests failed (their errors are above the table); check --base-url, "
                "--endpoint and --model");
  if (m.failed > 0)
    std::fprintf(stderr,
                 "tern bench serve: warning: %lld of %zu requests failed; the figures cover the "
                 "%lld that succeeded\n",
                 static_cast<long long>(m.failed), total, static_cast<long long>(m.completed));
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto opt = std::make_shared<ServeBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "serve", "Serving benchmark of an OpenAI-compatible server, defined as vllm bench serve");
  cmd->add_option("--base-url", opt->base_url, "Server URL, e.g. http://127.0.0.1:8000")
      ->capture_default_str();
  cmd->add_option("--endpoint", opt->endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd->add_option("--model", opt->model, "Model name sent in the requests")->required();
  cmd->add_option("--tokenizer", opt->tokenizer,
                  "Tokenizer: GGUF file or tokenizer folder (default: --model if it is a path)");
  cmd->add_option("--api-key", opt->api_key, "Bearer token (default: $OPENAI_API_KEY)")
      ->envname("OPENAI_API_KEY");
  cmd->add_option("--dataset-name", opt->dataset_name, "random, sharegpt or prefix-repetition")
      ->capture_default_str();
  cmd->add_option("--dataset-path", opt->dataset_path, "ShareGPT JSON file");
  cmd->add_option("--num-prompts", opt->num_prompts, "Number of requests")->capture_default_str();
  cmd->add_option("--request-rate", opt->request_rate, "Requests per second (inf: all at once)")
      ->capture_default_str();
  cmd->add_option("--burstiness", opt->burstiness, "Gamma shape of the arrival gaps (1 = Poisson)")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", opt->max_concurrency, "Most requests in flight at once")
      ->check([](const std::string& text) -> std::string {
        try {
          return std::stoll(text) > 0 ? "" : "must be greater than 0";
        } catch (const std::exception&) {
          return "must be a whole number";
        }
      });
  CLI::Option* random_input =
      cmd->add_option("--random-input-len", opt->random_input_len)->capture_default_str();
  CLI::Option* random_output =
      cmd->add_option("--random-output-len", opt->random_output_len)->capture_default_str();
  cmd->add_option("--input-len", opt->input_len, "vLLM's general prompt length: --random-input-len")
      ->excludes(random_input);
  cmd->add_option("--random-range-ratio", opt->random_range_ratio,
                  "Lengths uniform in [len*(1-r), len*(1+r)]")
      ->capture_default_str();
  cmd->add_option("--random-prefix-len", opt->random_prefix_len, "Shared random prefix tokens")
      ->capture_default_str();
  cmd->add_option("--prefix-repetition-prefix-len", opt->prefix_len)->capture_default_str();
  cmd->add_option("--prefix-repetition-suffix-len", opt->suffix_len)->capture_default_str();
  cmd->add_option("--prefix-repetition-num-prefixes", opt->num_prefixes)->capture_default_str();
  CLI::Option* prefix_output =
      cmd->add_option("--prefix-repetition-output-len", opt->prefix_output_len)
          ->capture_default_str();
  CLI::Option* sharegpt_output = cmd->add_option("--sharegpt-output-len", opt->sharegpt_output_len,
                                                 "Override each reply's output length");
  cmd->add_option("--output-len", opt->output_len,
                  "vLLM's general output length: the random, sharegpt or prefix-repetition one")
      ->excludes(random_output)
      ->excludes(prefix_output)
      ->excludes(sharegpt_output);
  cmd->add_option("--seed", opt->seed)->capture_default_str();
  cmd->add_flag("--ignore-eos", opt->ignore_eos,
                "Send ignore_eos (always on for the random dataset)");
  cmd->add_option("--goodput", opt->goodput, "SLOs as KEY:MS pairs, KEY in ttft, tpot, e2el");
  cmd->add_option("--percentile-metrics", opt->percentile_metrics,
                  "Comma list of ttft,tpot,itl,e2el")
      ->capture_default_str();
  cmd->add_option("--metric-percentiles", opt->metric_percentiles, "Comma list of percentiles")
      ->capture_default_str();
  cmd->add_flag("--save-result", opt->save_result, "Write the results as JSON");
  cmd->add_option("--result-dir", opt->result_dir,
                  "Folder for the result JSON (implies --save-result)");
  cmd->add_option("--result-filename", opt->result_filename,
                  "Result JSON file name (implies --save-result)");
  cmd->add_option("--plot", opt->plot, "Write an SVG of the latency distributions");
  cmd->add_flag("--disable-tqdm", opt->disable_tqdm, "No progress bar");
  cmd->add_option("--temperature", opt->temperature, "Sent when given");
  cmd->add_option("--top-p", opt->top_p, "Sent when given");
  cmd->add_option("--top-k", opt->top_k, "Sent when given");
  cmd->add_option("--long-num-prompts", opt->long_num_prompts,
                  "Long prompts that arrive beside the dataset (the interference experiment)")
      ->capture_default_str();
  cmd->add_option("--long-input-len", opt->long_input_len)->capture_default_str();
  cmd->add_option("--long-output-len", opt->long_output_len)->capture_default_str();
  cmd->add_option("--long-request-rate", opt->long_request_rate,
                  "Long prompts per second (Poisson)")
      ->capture_default_str();
  cmd->add_option("--plot-itl-timeline", opt->plot_itl_timeline,
                  "Write an SVG of every inter-token gap over time, long arrivals marked");
  cmd->footer(
      "Exit status: 1 when every request failed (after the report), else 0; some failures give "
      "a warning on stderr.");
  cmd->callback([opt, cmd] {
    check_partner_flags(*cmd, opt->dataset_name);
    run(*opt);
  });
}

}  // namespace tern::cli
