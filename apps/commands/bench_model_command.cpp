// `tern bench-model`: llama-bench's two numbers for one model: prompt processing (one forward
// of -p random tokens) and text generation (-n single-token forwards), mean ± sd over -r reps
// after one warm-up run of each.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/decoder.h"
#include "tern/models/model_loader.h"

#include <omp.h>

namespace tern::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  ModelOptions model;
  int prompt_tokens = 512;
  int gen_tokens = 128;
  int reps = 5;
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
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      total += bytes(*m);
  return total;
}

void run(const BenchOptions& opt) {
  if (opt.prompt_tokens < 0 || opt.gen_tokens < 0 || opt.reps < 1)
    throw Error("-p and -n must be >= 0 and -r >= 1");
  LoadedModel m = load_model(opt.model.load_options());
  Decoder decoder(m.config, m.weights);
  const int64_t max_tokens = std::max({opt.prompt_tokens, opt.gen_tokens, 1});
  SequenceRunner runner(decoder, max_tokens);
  std::mt19937_64 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.config.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int32_t& t : prompt) t = token(rng);
  decoder.reserve(max_tokens, 1);

  auto run_pp = [&] {
    runner.reset();
    const auto start = Clock::now();
    runner.feed(prompt);
    return opt.prompt_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  };
  auto run_tg = [&] {
    runner.reset();
    int32_t next = prompt.empty() ? token(rng) : prompt[0];
    const auto start = Clock::now();
    for (int i = 0; i < opt.gen_tokens; ++i) {
      std::span<const float> logits = runner.feed(next);
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    return opt.gen_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<double> pp, tg;
  if (opt.prompt_tokens > 0) {
    run_pp();  // warm-up: page the weights in, grow the buffers
    for (int r = 0; r < opt.reps; ++r) pp.push_back(run_pp());
  }
  if (opt.gen_tokens > 0) {
    run_tg();
    for (int r = 0; r < opt.reps; ++r) tg.push_back(run_tg());
  }
  const Stats pps = stats_of(pp), tgs = stats_of(tg);
  const int threads = omp_get_max_threads();
  const double size_mib = static_cast<double>(matrix_bytes(m.weights)) / (1024.0 * 1024.0);
  if (opt.json) {
    nlohmann::json out;
    out["model"] = opt.model.model;
    out["description"] = m.description;
    out["weights_mib"] = size_mib;
    out["threads"] = threads;
    out["reps"] = opt.reps;
    out["pp_tokens"] = opt.prompt_tokens;
    out["tg_tokens"] = opt.gen_tokens;
    out["pp_tokens_per_s"] = pp.empty() ? nlohmann::json(nullptr) : nlohmann::json(pps.mean);
    out["pp_tokens_per_s_sd"] = pps.sd;
    out["pp_samples"] = pps.samples;
    out["tg_tokens_per_s"] = tg.empty() ? nlohmann::json(nullptr) : nlohmann::json(tgs.mean);
    out["tg_tokens_per_s_sd"] = tgs.sd;
    out["tg_samples"] = tgs.samples;
    std::cout << out.dump() << '\n';
    return;
  }
  std::printf("| model | weights | threads | test | t/s |\n|---|---:|---:|---|---:|\n");
  if (!pp.empty())
    std::printf("| %s | %.1f MiB | %d | pp%d | %.2f ± %.2f |\n", m.description.c_str(), size_mib,
                threads, opt.prompt_tokens, pps.mean, pps.sd);
  if (!tg.empty())
    std::printf("| %s | %.1f MiB | %d | tg%d | %.2f ± %.2f |\n", m.description.c_str(), size_mib,
                threads, opt.gen_tokens, tgs.mean, tgs.sd);
}

}  // namespace

void add_bench_model_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench-model", "Prompt-processing and generation speed of one model (like llama-bench)");
  cmd->add_option("model", opt->model.model,
                  "GGUF file, Hugging Face folder, or (dummy) config.json / folder")
      ->required();
  cmd->add_option("-p,--n-prompt", opt->prompt_tokens, "Prompt tokens per pp run (0: skip)");
  cmd->add_option("-n,--n-gen", opt->gen_tokens, "Tokens per tg run (0: skip)");
  cmd->add_option("-r,--repetitions", opt->reps, "Measured runs of each test");
  cmd->add_flag("--json", opt->json, "One JSON line: pp_tokens_per_s, tg_tokens_per_s, …");
  opt->model.add_to(cmd);
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
