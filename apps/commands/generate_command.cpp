// `tern generate`: one prompt through one model: prefill in one forward, then decode token by
// token, streaming text as it is produced; prompt and generation speed on stderr.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/engine/sampler.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/decoder.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"
#include "tern/tokenizer/incremental_detokenizer.h"

namespace tern::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The CLI keeps temperature 0 (greedy) as its default; the API default is 1.
SamplingParams greedy_by_default() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

struct GenerateOptions {
  ModelOptions model;
  std::string prompt;
  int max_tokens = 128;
  SamplingParams sampling = greedy_by_default();
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool json = false;
  std::string save_gguf;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void run(const GenerateOptions& opt) {
  if (opt.max_tokens < 0) throw Error("-n must be >= 0, got " + std::to_string(opt.max_tokens));
  opt.sampling.validate();
  LoadedModel m = load_model(opt.model.load_options());
  if (!opt.save_gguf.empty()) {
    save_gguf(opt.save_gguf, m.weights, m.config, m.tokenizer ? &*m.tokenizer : nullptr);
    std::fprintf(stderr, "wrote %s\n", opt.save_gguf.c_str());
  }
  if (!m.tokenizer) throw Error(opt.model.model + ": no tokenizer found; give one with --tokenizer");
  const Tokenizer& tok = *m.tokenizer;

  const std::vector<int32_t> prompt = tok.encode(opt.prompt);  // BOS as the tokenizer says
  if (prompt.empty()) throw Error("the prompt is empty and the tokenizer adds no BOS token");
  const int64_t total = static_cast<int64_t>(prompt.size()) + opt.max_tokens;
  if (total > m.config.max_position_embeddings)
    throw Error("prompt (" + std::to_string(prompt.size()) + " tokens) + -n " +
                std::to_string(opt.max_tokens) + " exceeds the model's context of " +
                std::to_string(m.config.max_position_embeddings) + " tokens");
  std::vector<int32_t> stop_ids = tok.eos_ids();
  for (int32_t id : m.config.eos_token_ids)
    if (std::find(stop_ids.begin(), stop_ids.end(), id) == stop_ids.end()) stop_ids.push_back(id);

  Decoder decoder(m.config, m.weights);
  SequenceRunner runner(decoder, std::max<int64_t>(total, 1));
  Sampler sampler(opt.sampling, opt.seed, prompt, {});
  // After a prompt that shows text, a leading space of the continuation is real.
  IncrementalDetokenizer detok(tok, /*skip_special_tokens=*/true, tok.decode(prompt).empty());
  std::fprintf(stderr, "model: %s, %zu prompt tokens\n", m.description.c_str(), prompt.size());
  if (!opt.json) {
    std::cout << opt.prompt << std::flush;
  }

  std::vector<int32_t> generated;
  std::string text, piece;
  std::string finish_reason = "length";
  double prefill_s = 0, decode_s = 0;
  int decode_steps = 0;
  if (opt.max_tokens > 0) {
    Clock::time_point start = Clock::now();
    std::span<const float> logits = runner.feed(prompt);
    prefill_s = seconds_since(start);
    while (true) {
      const int32_t next = sampler.sample(logits).token;
      generated.push_back(next);
      piece.clear();
      detok.push(next, piece);
      text += piece;
      if (!opt.json) std::cout << piece << std::flush;
      if (!opt.ignore_eos && std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) {
        finish_reason = "stop";
        break;
      }
      if (static_cast<int>(generated.size()) >= opt.max_tokens) break;
      start = Clock::now();
      logits = runner.feed(next);
      decode_s += seconds_since(start);
      ++decode_steps;
    }
  }
  piece.clear();
  detok.flush(piece);
  text += piece;
  if (!opt.json) std::cout << piece << '\n' << std::flush;

  const double pp_tps = prefill_s > 0 ? static_cast<double>(prompt.size()) / prefill_s : 0.0;
  const double tg_tps = decode_s > 0 ? decode_steps / decode_s : 0.0;
  std::fprintf(stderr,
               "prompt processing: %zu tokens in %.2f ms (%.2f tokens/s)\n"
               "generation: %d tokens in %.2f ms (%.2f tokens/s)\n",
               prompt.size(), prefill_s * 1e3, pp_tps, decode_steps, decode_s * 1e3, tg_tps);
  if (opt.json) {
    nlohmann::json out;
    out["prompt_token_ids"] = prompt;
    out["token_ids"] = generated;
    out["text"] = text;
    out["finish_reason"] = finish_reason;
    out["timings"] = {{"prompt_tokens", prompt.size()},
                      {"prompt_ms", prefill_s * 1e3},
                      {"prompt_tokens_per_s", pp_tps},
                      {"decode_tokens", decode_steps},
                      {"decode_ms", decode_s * 1e3},
                      {"decode_tokens_per_s", tg_tps}};
    // Invalid UTF-8 cannot occur (the detokenizer replaces it), but never throw on output.
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt with one model");
  cmd->add_option("--model,-m", opt->model.model,
                  "GGUF file, Hugging Face folder, or (dummy) config.json / folder")
      ->required();
  cmd->add_option("--prompt,-p", opt->prompt, "Prompt text (BOS is added as the tokenizer says)");
  cmd->add_option("-n,--max-tokens", opt->max_tokens, "Tokens to generate at most");
  cmd->add_option("--temperature", opt->sampling.temperature, "0: greedy");
  cmd->add_option("--top-k", opt->sampling.top_k, "Keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", opt->sampling.top_p, "Nucleus sampling mass (1: all)");
  cmd->add_option("--seed", opt->seed, "Sampling seed");
  cmd->add_flag("--ignore-eos", opt->ignore_eos, "Keep generating past end-of-sequence tokens");
  cmd->add_flag("--json", opt->json,
                "Print only one JSON line: prompt_token_ids, token_ids, text, finish_reason, timings");
  cmd->add_option("--save-gguf", opt->save_gguf, "Write the loaded weights as a GGUF file first");
  opt->model.add_to(cmd);
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
