// `tern generate`: one prompt streamed to the terminal, or a JSONL file of requests run as one
// batch through the engine (continuous batching, chunked prefill, prefix caching) into a JSONL
// file of results in input order, with a progress bar on stderr.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/engine_options.h"
#include "commands/model_options.h"
#include "commands/output_paths.h"
#include "tern/core/error.h"
#include "tern/engine/llm.h"
#include "tern/models/gguf_export.h"
#include "tern/server/openai_protocol.h"

namespace tern::cli {
namespace {

using nlohmann::json;

struct GenerateOptions {
  ModelOptions model;
  EngineOptions engine;
  std::string prompt;
  bool has_prompt = false;  // --prompt '' is a prompt (BOS alone)
  std::string prompts_path;
  std::string output_path;
  SamplingParams sampling;
  std::vector<std::string> stop;
  int32_t logprobs = -1;
  bool json = false;
  std::string save_gguf;
};

json logprobs_json(const std::vector<SampledToken>& tokens) {
  json out = json::array();
  for (const SampledToken& t : tokens) {
    json top = json::array();
    for (const TokenLogprob& l : t.top)
      top.push_back({{"token_id", l.token}, {"logprob", l.logprob}});
    out.push_back({{"token_id", t.token}, {"logprob", t.logprob}, {"top_logprobs", top}});
  }
  return out;
}

json completion_json(const CompletionOutput& c, bool logprobs) {
  json j;
  j["token_ids"] = c.token_ids;
  j["text"] = c.text;
  j["finish_reason"] = c.finish_reason.value_or("");
  if (const auto* id = std::get_if<int32_t>(&c.stop_reason))
    j["stop_reason"] = *id;
  else if (const auto* s = std::get_if<std::string>(&c.stop_reason))
    j["stop_reason"] = *s;
  else
    j["stop_reason"] = nullptr;
  if (logprobs) {
    j["logprobs"] = logprobs_json(c.logprobs);
    j["cumulative_logprob"] = c.cumulative_logprob;
  }
  return j;
}

std::string dump(const json& j) {
  // Invalid UTF-8 cannot come out of the detokenizer, but never throw on output.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Redraws one line on stderr: a bar, requests done, tokens out, output tokens/s.
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total) : total_(total), start_(LLMEngine::now()), tty_(isatty(2)) {}
  void update(int64_t done, int64_t tokens_out, bool last = false) {
    const double now = LLMEngine::now();
    if (!last && now - last_draw_ < (tty_ ? 0.2 : 10.0)) return;
    last_draw_ = now;
    const int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
    const double elapsed = now - start_;
    std::fprintf(stderr, "%s[%s%s] %lld/%lld requests, %lld tokens out, %.1f tokens/s, %.1f s%s",
                 tty_ ? "\r" : "", std::string(static_cast<size_t>(filled), '=').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_),
                 static_cast<long long>(tokens_out), elapsed > 0 ? tokens_out / elapsed : 0.0,
                 elapsed, tty_ && !last ? "" : "\n");
  }

 private:
  int64_t total_;
  double start_;
  bool tty_;
  double last_draw_ = -1e9;
};

// Reads one request per line, checked as the server checks a /v1/completions body (the same
// fields, the same limits), so a misspelled field is an error naming it, never ignored. A line
// may give its prompt as `prompt_token_ids` (tern's JSONL) instead of OpenAI's `prompt`; the
// flags' sampling is what a line's missing fields take.
void read_requests(const std::string& path, const server::ModelContext& model,
                   const SamplingParams& defaults, std::vector<std::vector<int32_t>>& prompts,
                   std::vector<SamplingParams>& params) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    try {
      json body = server::parse_body(line);
      if (const auto ids = body.find("prompt_token_ids"); ids != body.end()) {
        if (body.contains("prompt")) throw Error("give 'prompt' or 'prompt_token_ids', not both");
        body["prompt"] = *ids;
        body.erase("prompt_token_ids");
      }
      for (const char* unfit : {"stream", "stream_options", "kv_transfer_params"})
        if (body.contains(unfit) && !body[unfit].is_null())
          throw Error(std::string("'") + unfit + "' is for the server, not for a --prompts line");
      server::GenerationRequest r = server::parse_completion_request(body, model, &defaults);
      if (r.prompts.size() != 1)
        throw Error("one prompt per line ('prompt' is a list of " +
                    std::to_string(r.prompts.size()) + " prompts)");
      prompts.push_back(std::move(r.prompts[0]));
      params.push_back(std::move(r.params[0]));
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
  }
}

void run_batch(const GenerateOptions& opt, LLM& llm, const SamplingParams& defaults) {
  server::ModelContext model;
  model.tokenizer = &llm.tokenizer();
  model.max_model_len = llm.engine().max_model_len();
  model.max_model_len_limit = llm.engine().max_model_len_limit();
  model.served_model_name = opt.model.model;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  read_requests(opt.prompts_path, model, defaults, prompts, params);
  if (prompts.empty()) throw Error(opt.prompts_path + ": no requests");
  std::ofstream out(opt.output_path);
  if (!out) throw Error(opt.output_path + ": cannot write");
  std::fprintf(stderr, "%zu requests\n", prompts.size());

  ProgressBar bar(static_cast<int64_t>(prompts.size()));
  const double start = LLMEngine::now();
  std::vector<RequestOutput> results = llm.generate(prompts, params, [&](int64_t done, int64_t) {
    bar.update(done, llm.engine().stats().generation_tokens);
  });
  const double seconds = LLMEngine::now() - start;
  const EngineStats stats = llm.engine().stats();
  bar.update(static_cast<int64_t>(results.size()), stats.generation_tokens, true);

  for (size_t i = 0; i < results.size(); ++i) {
    const bool logprobs = params[i].logprobs.has_value();
    json line = {{"index", i}, {"prompt_token_ids", prompts[i]}};
    line.update(completion_json(results[i].outputs.at(0), logprobs));
    if (results[i].outputs.size() > 1) {
      line["outputs"] = json::array();
      for (const CompletionOutput& c : results[i].outputs) {
        json o = {{"index", c.index}};
        o.update(completion_json(c, logprobs));
        line["outputs"].push_back(o);
      }
    }
    out << dump(line) << '\n';
  }
  if (!out.flush()) throw Error(opt.output_path + ": write failed");
  std::fprintf(
      stderr,
      "%lld prompt tokens (%lld of %lld queried tokens from the prefix cache), %lld tokens out "
      "in %.2f s: %.2f output tokens/s, %lld steps, %lld preemptions\n",
      static_cast<long long>(stats.prompt_tokens), static_cast<long long>(stats.prefix_cache_hits),
      static_cast<long long>(stats.prefix_cache_queries),
      static_cast<long long>(stats.generation_tokens), seconds,
      seconds > 0 ? stats.generation_tokens / seconds : 0.0,
      static_cast<long long>(stats.num_steps), static_cast<long long>(stats.num_preemptions));
  if (stats.speculative)
    std::fprintf(stderr, "speculative decoding: %s\n", speculative_summary(stats).c_str());
}

void run_one(const GenerateOptions& opt, LLM& llm, const SamplingParams& params) {
  const Tokenizer& tok = llm.tokenizer();
  std::vector<int32_t> prompt = tok.encode(opt.prompt);  // BOS as the tokenizer says
  if (prompt.empty()) throw Error("the prompt is empty and the tokenizer adds no BOS token");
  LLMEngine& engine = llm.engine();
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  engine.add_request("prompt", prompt, params);
  if (!opt.json) std::cout << opt.prompt << std::flush;

  CompletionOutput final;
  double prefill_end = -1, last_token = -1;
  const double start = LLMEngine::now();
  while (engine.has_unfinished_requests()) {
    for (RequestOutput& out : engine.step()) {
      for (CompletionOutput& c : out.outputs) {
        if (!opt.json) std::cout << c.new_text << std::flush;
        if (c.finished()) final = std::move(c);
      }
      if (prefill_end < 0) prefill_end = out.metrics.first_token_time;
      last_token = out.metrics.last_token_time;
    }
  }
  if (!opt.json) std::cout << '\n' << std::flush;

  const double prefill_s = prefill_end - start;
  const int64_t decode_steps =
      std::max<int64_t>(0, static_cast<int64_t>(final.token_ids.size()) - 1);
  const double decode_s = last_token - prefill_end;
  const double pp_tps = prefill_s > 0 ? prompt_len / prefill_s : 0.0;
  const double tg_tps = decode_s > 0 ? decode_steps / decode_s : 0.0;
  std::fprintf(stderr,
               "prompt processing: %lld tokens in %.2f ms (%.2f tokens/s)\n"
               "generation: %lld tokens in %.2f ms (%.2f tokens/s)\n",
               static_cast<long long>(prompt_len), prefill_s * 1e3, pp_tps,
               static_cast<long long>(decode_steps), decode_s * 1e3, tg_tps);
  const EngineStats stats = engine.stats();
  if (stats.speculative)
    std::fprintf(stderr, "speculative decoding: %s\n", speculative_summary(stats).c_str());
  if (opt.json) {
    json out = {{"prompt_token_ids", prompt}};
    out.update(completion_json(final, params.logprobs.has_value()));
    out["timings"] = {{"prompt_tokens", prompt_len},   {"prompt_ms", prefill_s * 1e3},
                      {"prompt_tokens_per_s", pp_tps}, {"decode_tokens", decode_steps},
                      {"decode_ms", decode_s * 1e3},   {"decode_tokens_per_s", tg_tps}};
    if (stats.speculative)
      out["speculative"] = {{"num_drafts", stats.spec.num_drafts},
                            {"num_draft_tokens", stats.spec.num_draft_tokens},
                            {"num_accepted_tokens", stats.spec.num_accepted_tokens},
                            {"accepted_per_position", stats.spec.accepted_per_position},
                            {"acceptance_rate", stats.spec.acceptance_rate()},
                            {"mean_acceptance_length", stats.spec.mean_acceptance_length()}};
    std::cout << dump(out) << '\n';
  }
}

void run(GenerateOptions opt) {
  SamplingParams params = opt.sampling;
  params.stop = opt.stop;
  if (opt.logprobs >= 0) params.logprobs = opt.logprobs;
  const bool batch = !opt.prompts_path.empty();
  if (batch && opt.has_prompt) throw Error("give --prompt or --prompts, not both");
  if (!batch && !opt.has_prompt && opt.save_gguf.empty())
    throw Error("give --prompt TEXT or --prompts FILE.jsonl");
  if (!batch && !opt.output_path.empty())
    throw Error("--output goes with --prompts FILE.jsonl (one --prompt prints to stdout)");
  if (batch && opt.output_path.empty()) throw Error("--prompts needs --output FILE.jsonl");
  if (batch) check_output_file(opt.output_path, "--output");
  if (!opt.save_gguf.empty()) check_output_file(opt.save_gguf, "--save-gguf");
  if (!batch) params.validate();

  EngineConfig config = opt.engine.engine_config();
  // The engine's start-up steps (the KV cache, timing forwards) are told as tern serve tells
  // them: a long start-up of generate is no more silent than one of serve.
  config.announce = [](const std::string& step) { std::fprintf(stderr, "%s\n", step.c_str()); };
  const LoadOptions load = opt.model.load_options();
  LoadedModel model = load_model_announced(load);
  if (!opt.save_gguf.empty()) {
    save_gguf(opt.save_gguf, model.weights, model.config,
              model.tokenizer ? &*model.tokenizer : nullptr);
    std::fprintf(stderr, "wrote %s\n", opt.save_gguf.c_str());
    if (!batch && !opt.has_prompt) return;
  }
  if (!model.tokenizer)
    throw Error(opt.model.model + ": no tokenizer found; give one with --tokenizer");
  std::optional<LoadedModel> draft = load_draft(config.speculative, load);
  if (!batch) {
    // One sequence: a cache for it alone, as long as it can grow.
    const int64_t need =
        static_cast<int64_t>(model.tokenizer->encode(opt.prompt).size()) + params.max_tokens;
    if (need > model.config.max_position_embeddings)
      throw Error("prompt + -n " + std::to_string(params.max_tokens) + " = " +
                  std::to_string(need) + " tokens exceeds the model's context of " +
                  std::to_string(model.config.max_position_embeddings) + " tokens");
    config.scheduler.max_num_seqs = 1;
    if (config.max_model_len == 0) config.max_model_len = need;
  }
  const std::string description = model.description;
  const std::string draft_description = draft ? ", draft: " + draft->description : "";
  LLM llm(std::move(model), config, std::move(draft));
  std::fprintf(stderr, "model: %s%s, %d threads\n", description.c_str(), draft_description.c_str(),
               omp_get_max_threads());
  if (config.speculative.enabled())
    std::fprintf(stderr, "speculative decoding: %s\n", config.speculative.describe().c_str());
  warn_about_draft(llm.engine());
  if (batch)
    run_batch(opt, llm, params);
  else
    run_one(opt, llm, params);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  opt->sampling.temperature =
      0.0f;  // greedy unless asked (llama.cpp's CLI samples; we show the model)
  opt->sampling.max_tokens = 128;
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text: one prompt streamed, or a JSONL file of requests as one batch");
  cmd->add_option("--model,-m", opt->model.model,
                  "GGUF file, Hugging Face folder, or (dummy) config.json / folder")
      ->required();
  CLI::Option* prompt = cmd->add_option("--prompt,-p", opt->prompt,
                                        "Prompt text (BOS is added as the tokenizer says)");
  cmd->add_option(
      "--prompts", opt->prompts_path,
      "JSONL file: one {\"prompt\" or \"prompt_token_ids\", sampling fields…} per line");
  cmd->add_option("--output,-o", opt->output_path,
                  "JSONL results of --prompts, in input order: index, prompt_token_ids, token_ids, "
                  "text, finish_reason");
  cmd->add_option("-n,--max-tokens", opt->sampling.max_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--temperature,--temp", opt->sampling.temperature, "0: greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", opt->sampling.top_k, "Keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", opt->sampling.top_p, "Nucleus sampling mass (1: all)");
  cmd->add_option("--min-p", opt->sampling.min_p, "Drop tokens below min-p × the top probability");
  cmd->add_option("--presence-penalty", opt->sampling.presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", opt->sampling.frequency_penalty,
                  "OpenAI frequency penalty");
  cmd->add_option("--repetition-penalty", opt->sampling.repetition_penalty, "1: off");
  cmd->add_option("--min-tokens", opt->sampling.min_tokens, "No EOS/stop before this many tokens");
  cmd->add_option("--stop", opt->stop, "Stop string (repeatable)");
  cmd->add_option("--logprobs", opt->logprobs, "Return logprobs with this many top tokens");
  cmd->add_option("--seed", opt->sampling.seed, "Sampling seed");
  cmd->add_flag("--ignore-eos", opt->sampling.ignore_eos,
                "Keep generating past end-of-sequence tokens");
  cmd->add_flag(
      "--json", opt->json,
      "Print only one JSON line: prompt_token_ids, token_ids, text, finish_reason, timings");
  cmd->add_option("--save-gguf", opt->save_gguf, "Write the loaded weights as a GGUF file first");
  opt->model.add_to(cmd);
  opt->engine.add_to(cmd);
  cmd->callback([opt, prompt] {
    opt->has_prompt = prompt->count() > 0;
    run(*opt);
  });
}

}  // namespace tern::cli
