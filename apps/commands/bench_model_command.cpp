// `tern bench-model`: llama-bench's two numbers for one model: prompt processing (one forward
// of -p random tokens) and text generation (-n single-token forwards), mean ± sd over -r reps
// after one warm-up run of each, at each depth -d (tokens already in the KV cache).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/engine_options.h"
#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/model_loader.h"

namespace tern::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  ModelArgument model_argument;
  ModelOptions model;
  int prompt_tokens = 512;
  int gen_tokens = 128;
  int reps = 5;
  std::vector<int> depths{0};  // -d: tokens in the cache before each pp and tg run
  std::string kv_cache_dtype = "auto";
  int verify = -1;         // > = 0: time verify steps of 1 + k tokens, k = 0 … verify
  int verify_depth = 128;  // of the verify steps: tokens already in the cache
  bool json = false;
};

struct Stats {
  double mean = 0, sd = 0;
  std::vector<double> samples;  // tokens/s per rep
};

Stats stats_of(std::vector<double> samples) {
  Stats s;
  s.samples = std::move(samples);
  if (s.samples.empty()) return s;
  for (double x : s.samples) s.mean += x;
  s.mean /= static_cast<double>(s.samples.size());
  if (s.samples.size() > 1) {
    double var = 0;
    for (double x : s.samples) var += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(var / static_cast<double>(s.samples.size() - 1));
  }
  return s;
}

uint64_t matrix_bytes(const ModelWeights& w) {
  auto bytes = [](const WeightMatrix& m) { return static_cast<uint64_t>(m.row_bytes) * m.rows; };
  uint64_t total = bytes(w.token_embedding) + (w.tied_embeddings ? 0 : bytes(w.lm_head));
  for (const LayerWeights& l : w.layers)
    l.for_each_matrix([&](const WeightMatrix& m) { total += bytes(m); });
  return total;
}

// pp and tg at one depth.
struct DepthResult {
  int depth = 0;
  std::vector<double> pp, tg;  // tokens/s per rep
};

// Tokens are fed to fill the cache in chunks of this many (a prefill as the engine's chunked
// prefill would run it, and activations of a bounded size).
constexpr int kFillChunk = 512;

void run(const BenchOptions& opt) {
  if (opt.prompt_tokens < 0 || opt.gen_tokens < 0 || opt.reps < 1)
    throw Error("-p and -n must be >= 0 and -r >= 1");
  if (opt.verify > 64 || opt.verify_depth < 0)
    throw Error("--verify must be <= 64 and --verify-depth >= 0");
  if (opt.depths.empty()) throw Error("-d needs at least one depth");
  for (int d : opt.depths)
    if (d < 0) throw Error("-d: depths must be >= 0, got " + std::to_string(d));
  const KvDtype kv_dtype = parse_kv_cache_dtype(opt.kv_cache_dtype);
  LoadedModel m = load_model_announced(opt.model.load_options());
  const std::unique_ptr<LanguageModel> model = make_language_model(m);
  LanguageModel& decoder = *model;
  // Deepest first: the cache is filled once to the deepest depth and each shallower test
  // rewinds to its depth, which keeps the first `depth` tokens of that fill.
  std::vector<int> depths = opt.depths;
  std::sort(depths.begin(), depths.end(), std::greater<>());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  const int max_depth = depths.front();
  const int64_t max_tokens = std::max(
      {static_cast<int64_t>(max_depth) + std::max(opt.prompt_tokens, opt.gen_tokens),
       opt.verify >= 0 ? int64_t{opt.verify_depth} + opt.verify + 1 : int64_t{1}, int64_t{1}});
  SequenceRunner runner(decoder, max_tokens, 16, kv_dtype);
  std::mt19937_64 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.config.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int32_t& t : prompt) t = token(rng);
  std::vector<int32_t> context(static_cast<size_t>(std::max(max_depth, opt.verify_depth)) +
                               static_cast<size_t>(std::max(opt.verify, 0)) + 1);
  for (int32_t& t : context) t = token(rng);
  decoder.reserve(std::max({opt.prompt_tokens, kFillChunk, 1}),
                  opt.verify >= 0 ? opt.verify + 1 : 1);

  // Feeds context[length .. depth) in chunks (nothing when the runner already holds them).
  auto fill_to = [&](int depth) {
    runner.rewind(depth);
    while (runner.length() < depth) {
      const int64_t n = std::min<int64_t>(kFillChunk, depth - runner.length());
      runner.feed(std::span<const int32_t>(context).subspan(static_cast<size_t>(runner.length()),
                                                            static_cast<size_t>(n)));
    }
  };
  auto run_pp = [&](int depth) {
    runner.rewind(depth);
    const auto start = Clock::now();
    runner.feed(prompt);
    return opt.prompt_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  };
  auto run_tg = [&](int depth) {
    runner.rewind(depth);
    int32_t next = prompt.empty() ? token(rng) : prompt[0];
    const auto start = Clock::now();
    for (int i = 0; i < opt.gen_tokens; ++i) {
      std::span<const float> logits = runner.feed(next);
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    return opt.gen_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<DepthResult> results;
  runner.reset();
  fill_to(max_depth);
  for (int depth : depths) {
    DepthResult r{depth, {}, {}};
    if (opt.prompt_tokens > 0) {
      run_pp(depth);  // warm-up: page the weights in, grow the buffers
      for (int i = 0; i < opt.reps; ++i) r.pp.push_back(run_pp(depth));
    }
    if (opt.gen_tokens > 0) {
      run_tg(depth);
      for (int i = 0; i < opt.reps; ++i) r.tg.push_back(run_tg(depth));
    }
    results.push_back(std::move(r));
  }
  std::reverse(results.begin(), results.end());  // shallowest first, as asked
  // A speculative verify's shape: 1 + k tokens of one sequence at a depth, every row's logits.
  // The k alternate within each rep, so a change of the host's speed touches them alike.
  std::vector<std::vector<double>> verify_ms(static_cast<size_t>(std::max(opt.verify + 1, 0)));
  if (opt.verify >= 0) {
    runner.reset();
    fill_to(opt.verify_depth);
    for (int r = -1; r < opt.reps; ++r)  // rep -1 warms up
      for (int k = 0; k <= opt.verify; ++k) {
        runner.rewind(opt.verify_depth);
        const auto start = Clock::now();
        runner.feed(std::span<const int32_t>(context).subspan(static_cast<size_t>(opt.verify_depth),
                                                              static_cast<size_t>(k + 1)),
                    /*all_logits=*/true);
        const double ms = 1e3 * std::chrono::duration<double>(Clock::now() - start).count();
        if (r >= 0) verify_ms[static_cast<size_t>(k)].push_back(ms);
      }
  }
  const int threads = omp_get_max_threads();
  const double size_mib = static_cast<double>(matrix_bytes(m.weights)) / (1024.0 * 1024.0);
  const std::string kv_name(kv_dtype_name(kv_dtype));
  if (opt.json) {
    // One line per depth.
    for (const DepthResult& r : results) {
      const Stats pps = stats_of(r.pp), tgs = stats_of(r.tg);
      nlohmann::json out;
      out["model"] = opt.model.model;
      out["description"] = m.description;
      out["weights_mib"] = size_mib;
      out["kv_cache_dtype"] = kv_name;
      out["threads"] = threads;
      out["reps"] = opt.reps;
      out["depth"] = r.depth;
      out["pp_tokens"] = opt.prompt_tokens;
      out["tg_tokens"] = opt.gen_tokens;
      out["pp_tokens_per_s"] = r.pp.empty() ? nlohmann::json(nullptr) : nlohmann::json(pps.mean);
      out["pp_tokens_per_s_sd"] = pps.sd;
      out["pp_samples"] = pps.samples;
      out["tg_tokens_per_s"] = r.tg.empty() ? nlohmann::json(nullptr) : nlohmann::json(tgs.mean);
      out["tg_tokens_per_s_sd"] = tgs.sd;
      out["tg_samples"] = tgs.samples;
      if (opt.verify >= 0 && &r == &results.back()) {
        out["verify_depth"] = opt.verify_depth;
        out["verify_ms"] = nlohmann::json::array();
        out["verify_ratio"] = nlohmann::json::array();
        for (const auto& samples : verify_ms) {
          out["verify_ms"].push_back(stats_of(samples).mean);
          out["verify_ratio"].push_back(stats_of(samples).mean / stats_of(verify_ms[0]).mean);
        }
      }
      std::cout << out.dump() << '\n';
    }
    return;
  }
  std::printf(
      "| model | weights | kv cache | threads | test | t/s |\n|---|---:|---|---:|---|---:|\n");
  for (const DepthResult& r : results) {
    const std::string at = r.depth > 0 ? " @ d" + std::to_string(r.depth) : "";
    const Stats pps = stats_of(r.pp), tgs = stats_of(r.tg);
    if (!r.pp.empty())
      std::printf("| %s | %.1f MiB | %s | %d | pp%d%s | %.2f ± %.2f |\n", m.description.c_str(),
                  size_mib, kv_name.c_str(), threads, opt.prompt_tokens, at.c_str(), pps.mean,
                  pps.sd);
    if (!r.tg.empty())
      std::printf("| %s | %.1f MiB | %s | %d | tg%d%s | %.2f ± %.2f |\n", m.description.c_str(),
                  size_mib, kv_name.c_str(), threads, opt.gen_tokens, at.c_str(), tgs.mean, tgs.sd);
  }
  if (opt.verify < 0) return;
  std::printf("\n| verify at depth %d | ms | ratio to k = 0 |\n|---|---:|---:|\n",
              opt.verify_depth);
  const double base = stats_of(verify_ms[0]).mean;
  for (size_t k = 0; k < verify_ms.size(); ++k) {
    const Stats s = stats_of(verify_ms[k]);
    std::printf("| 1 + %zu tokens | %.2f ± %.2f | %.3f |\n", k, s.mean, s.sd, s.mean / base);
  }
}

}  // namespace

void add_bench_model_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench-model", "Prompt-processing and generation speed of one model (like llama-bench)");
  opt->model_argument.add_to(cmd,
                             "GGUF file, Hugging Face folder, or (dummy) config.json / folder");
  cmd->add_option("-p,--n-prompt", opt->prompt_tokens, "Prompt tokens per pp run (0: skip)");
  cmd->add_option("-n,--n-gen", opt->gen_tokens, "Tokens per tg run (0: skip)");
  cmd->add_option("-r,--repetitions", opt->reps, "Measured runs of each test");
  cmd->add_option("-d,--n-depth", opt->depths,
                  "Tokens in the cache before each pp and tg run (llama-bench's -d), e.g. "
                  "-d 512,4096,16384")
      ->delimiter(',')
      ->capture_default_str();
  add_kv_cache_dtype_option(cmd, opt->kv_cache_dtype);
  cmd->add_option(
      "--verify", opt->verify,
      "Also time speculative verify steps of 1 + k tokens (every row's logits), k = 0 … K");
  cmd->add_option("--verify-depth", opt->verify_depth,
                  "Tokens in the cache before each verify step")
      ->capture_default_str();
  cmd->add_flag("--json", opt->json,
                "One JSON line per depth: pp_tokens_per_s, tg_tokens_per_s, …");
  opt->model.add_to(cmd);
  cmd->callback([opt] {
    opt->model.model = opt->model_argument.get("tern bench-model MODEL");
    run(*opt);
  });
}

}  // namespace tern::cli
