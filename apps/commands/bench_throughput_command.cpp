// `tern bench throughput`: offline throughput like vLLM's `bench throughput` and nano-vllm's
// bench.py: N requests of random token ids, ignore_eos, all given to the engine at once; reports
// output tokens/s. Lengths are fixed unless --random-range-ratio asks for a range, as in vLLM.
// `--max-num-seqs 1` runs the same requests one at a time, the baseline that batching is
// measured against.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "commands/commands.h"
#include "commands/engine_options.h"
#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/engine/llm.h"

namespace tern::cli {
namespace {

struct ThroughputOptions {
  ModelOptions model;
  EngineOptions engine;
  int num_prompts = 64;
  int input_len = 306;
  int output_len = 306;
  // vLLM's default: every request --input-len and --output-len tokens long. nano-vllm's bench.py
  // mix (uniform in [100, 512]) is --random-range-ratio 0.673.
  double range_ratio = 0.0;
  uint64_t seed = 0;
  bool json = false;
};

// vLLM's random dataset range: [floor(len·(1−r)), ceil(len·(1+r))], at least 1.
std::pair<int, int> length_range(int len, double ratio) {
  return {std::max(1, static_cast<int>(std::floor(len * (1.0 - ratio)))),
          std::max(1, static_cast<int>(std::ceil(len * (1.0 + ratio))))};
}

// "32" for a fixed length, "10-54" for a range.
std::string range_text(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

void run(const ThroughputOptions& opt) {
  if (opt.num_prompts < 1) throw Error("--num-prompts must be >= 1");
  if (opt.input_len < 1 || opt.output_len < 1)
    throw Error("--input-len and --output-len must be >= 1");
  if (!(opt.range_ratio >= 0.0 && opt.range_ratio < 1.0))
    throw Error("--random-range-ratio must be in [0, 1)");
  const EngineConfig config = opt.engine.engine_config();
  const LoadOptions load = opt.model.load_options();
  LLM llm(load_model(load), config, load_draft(config.speculative, load));
  const int64_t vocab = llm.model().config.vocab_size;
  const auto [in_lo, in_hi] = length_range(opt.input_len, opt.range_ratio);
  const auto [out_lo, out_hi] = length_range(opt.output_len, opt.range_ratio);
  // The engine would stop such a request at max_model_len: fewer tokens than asked, silently.
  if (in_hi + out_hi > llm.engine().max_model_len())
    throw Error("--input-len " + std::to_string(opt.input_len) + " and --output-len " +
                std::to_string(opt.output_len) + " make requests of up to " +
                std::to_string(in_hi + out_hi) + " tokens, over max_model_len " +
                std::to_string(llm.engine().max_model_len()) + " (see --max-model-len)");

  std::mt19937_64 rng(opt.seed);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  int64_t prompt_tokens = 0;
  for (int i = 0; i < opt.num_prompts; ++i) {
    const int in_len = std::uniform_int_distribution<int>(in_lo, in_hi)(rng);
    std::vector<int32_t> p(static_cast<size_t>(in_len));
    // Ids from the first 10,000 (nano-vllm's choice): ordinary tokens, no specials.
    for (auto& t : p)
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(vocab, 10000)));
    prompt_tokens += in_len;
    prompts.push_back(std::move(p));
    SamplingParams s;
    s.temperature = 0.6f;
    s.seed = opt.seed + static_cast<uint64_t>(i);
    s.ignore_eos = true;
    s.max_tokens = std::uniform_int_distribution<int>(out_lo, out_hi)(rng);
    params.push_back(s);
  }
  std::fprintf(stderr, "model: %s, %d threads\n%s\n%d requests, input %s, output %s tokens\n",
               llm.model().description.c_str(), omp_get_max_threads(),
               llm.engine().kv_cache_summary().c_str(), opt.num_prompts,
               range_text(in_lo, in_hi).c_str(), range_text(out_lo, out_hi).c_str());
  warn_about_draft(llm.engine());

  const double start = LLMEngine::now();
  const std::vector<RequestOutput> outputs = llm.generate(prompts, params);
  const double seconds = LLMEngine::now() - start;
  int64_t output_tokens = 0;
  for (const RequestOutput& r : outputs)
    for (const CompletionOutput& c : r.outputs)
      output_tokens += static_cast<int64_t>(c.token_ids.size());
  const EngineStats stats = llm.engine().stats();
  nlohmann::json result = {
      {"num_requests", opt.num_prompts},
      {"input_len", opt.input_len},
      {"output_len", opt.output_len},
      {"random_range_ratio", opt.range_ratio},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", output_tokens},
      {"elapsed_s", seconds},
      {"requests_per_s", opt.num_prompts / seconds},
      {"output_tokens_per_s", output_tokens / seconds},
      {"total_tokens_per_s", (prompt_tokens + output_tokens) / seconds},
      {"steps", stats.num_steps},
      {"preemptions", stats.num_preemptions},
      {"max_num_seqs", llm.engine().config().scheduler.max_num_seqs},
      {"max_num_batched_tokens", llm.engine().config().scheduler.max_num_batched_tokens}};
  if (stats.speculative)
    result["speculative"] = {{"config", config.speculative.describe()},
                             {"num_drafts", stats.spec.num_drafts},
                             {"num_draft_tokens", stats.spec.num_draft_tokens},
                             {"num_accepted_tokens", stats.spec.num_accepted_tokens},
                             {"acceptance_rate", stats.spec.acceptance_rate()},
                             {"mean_acceptance_length", stats.spec.mean_acceptance_length()}};
  if (opt.json) {
    std::cout << result.dump() << '\n';
  } else {
    std::printf(
        "Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n"
        "%lld prompt + %lld output tokens in %.2f s, %lld steps, %lld preemptions\n",
        opt.num_prompts / seconds, (prompt_tokens + output_tokens) / seconds,
        output_tokens / seconds, static_cast<long long>(prompt_tokens),
        static_cast<long long>(output_tokens), seconds, static_cast<long long>(stats.num_steps),
        static_cast<long long>(stats.num_preemptions));
    if (stats.speculative)
      std::printf("speculative decoding: %s\n", speculative_summary(stats).c_str());
  }
}

}  // namespace

void add_bench_throughput_command(CLI::App& bench) {
  auto opt = std::make_shared<ThroughputOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "throughput",
      "Offline throughput: random requests through the engine at once (vLLM's bench throughput)");
  cmd->add_option("--model,-m", opt->model.model,
                  "GGUF file, Hugging Face folder, or (dummy) config")
      ->required();
  cmd->add_option("--num-prompts", opt->num_prompts, "Requests")->capture_default_str();
  cmd->add_option("--input-len", opt->input_len,
                  "Prompt tokens per request (the middle of the range with --random-range-ratio)")
      ->capture_default_str();
  cmd->add_option("--output-len", opt->output_len,
                  "Output tokens per request (the middle of the range with --random-range-ratio)")
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", opt->range_ratio,
                  "Lengths uniform in [len·(1−r), len·(1+r)]; 0: fixed lengths")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of the lengths, the ids and the sampling");
  cmd->add_flag("--json", opt->json, "Print one JSON object");
  opt->model.add_to(cmd);
  opt->engine.add_to(cmd);
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
