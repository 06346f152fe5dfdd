// `tern perplexity`: llama-perplexity's perplexity of a text (windows of --ctx tokens scored on
// their second half, several windows per forward), and its KL-divergence mode: write the base
// model's log-probabilities (--kl-divergence-base FILE), then compare another model with them
// (--kl-divergence --kl-divergence-base FILE), printed with llama.cpp's labels.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands/commands.h"
#include "commands/engine_options.h"
#include "commands/model_options.h"
#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/eval/eval_windows.h"
#include "tern/eval/kl_divergence.h"
#include "tern/eval/kld_base_file.h"
#include "tern/eval/perplexity.h"
#include "tern/eval/window_runner.h"
#include "tern/models/model_loader.h"

namespace tern::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PerplexityOptions {
  ModelOptions model;
  std::string text_path;
  int64_t ctx = 512;
  bool ctx_given = false;
  int64_t chunks = -1;  // -1: every window
  int64_t batch_size = 2048;
  std::string kld_base;
  bool kl_divergence = false;
  std::string kv_cache_dtype = "auto";
  bool json = false;
};

json estimate_json(const Estimate& e) {
  return {{"value", e.value}, {"uncertainty", e.uncertainty}};
}

std::string percent_label(double fraction) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%4.1f%%", 100.0 * fraction);
  return buf;
}

json percentiles_json(const std::vector<Percentile>& ps) {
  json out = json::object();
  for (const Percentile& p : ps) {
    std::string label = percent_label(p.fraction);
    label.erase(0, label.find_first_not_of(' '));
    out[label] = p.value;
  }
  return out;
}

void print_plan(const char* what, const EvalWindows& windows, int64_t batch_size) {
  std::fprintf(stderr,
               "%s: %lld windows of %lld tokens (%lld scored each), %lld per forward (batch size "
               "%lld)\n",
               what, static_cast<long long>(windows.num_windows()),
               static_cast<long long>(windows.ctx),
               static_cast<long long>(windows.scored_per_window()),
               static_cast<long long>(windows_per_forward(windows.ctx, batch_size)),
               static_cast<long long>(batch_size));
}

// `windows` come from the text; `writer` (when --kl-divergence-base is given) was created
// before anything was printed.
void run_perplexity(const PerplexityOptions& opt, const EvalWindows& windows,
                    std::optional<KldBaseWriter>& writer, LoadedModel& m, LanguageModel& decoder) {
  print_plan("perplexity", windows, opt.batch_size);
  if (writer)
    std::fprintf(stderr, "perplexity: writing every scored log-probability row to %s\n",
                 opt.kld_base.c_str());
  const auto start = Clock::now();
  const PerplexityResult r =
      perplexity(decoder, windows, opt.batch_size, parse_kv_cache_dtype(opt.kv_cache_dtype),
                 writer ? &*writer : nullptr, [](int64_t w, double running_ppl) {
                   std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(w + 1), running_ppl);
                   std::fflush(stderr);
                 });
  const double seconds = seconds_since(start);
  if (writer) writer->finish();
  std::fprintf(stderr, "\nperplexity: %.2f s, %.1f tokens/s\n", seconds,
               static_cast<double>(windows.num_windows() * (windows.ctx - 1)) / seconds);
  std::fprintf(opt.json ? stderr : stdout, "Final estimate: PPL = %.4f +/- %.5f\n", r.ppl,
               r.uncertainty);
  if (!opt.json) return;
  json out = {{"model", m.description},
              {"text", opt.text_path},
              {"ppl", r.ppl},
              {"ppl_uncertainty", r.uncertainty},
              {"mean_nll", r.mean_nll},
              {"count", r.count},
              {"num_windows", r.num_windows},
              {"ctx", r.ctx},
              {"batch_size", opt.batch_size},
              {"kv_cache_dtype", kv_dtype_name(parse_kv_cache_dtype(opt.kv_cache_dtype))},
              {"text_tokens_used", windows.tokens.size()},
              {"running_ppl", r.running_ppl},
              {"window_ppl", r.window_ppl},
              {"seconds", seconds}};
  if (writer) out["kl_divergence_base"] = opt.kld_base;
  std::cout << out.dump() << '\n';
}

void print_kld_line(const KlDivergenceResult& r) {
  std::fprintf(stderr, "%4lld", static_cast<long long>(r.num_windows));
  std::fprintf(stderr, "    %9.4f ± %9.4f", r.ppl_q.value, r.ppl_q.uncertainty);
  std::fprintf(stderr, "    %10.5f ± %10.5f", r.log_ppl_ratio.value, r.log_ppl_ratio.uncertainty);
  std::fprintf(stderr, "    %10.5f ± %10.5f", r.kld.value, r.kld.uncertainty);
  std::fprintf(stderr, "    %6.3f ± %6.3f %%", 100.0 * r.rms_p_diff.value,
               100.0 * r.rms_p_diff.uncertainty);
  std::fprintf(stderr, "    %6.3f ± %6.3f %%\n", 100.0 * r.same_top.value,
               100.0 * r.same_top.uncertainty);
}

// llama-perplexity's closing report, label for label.
void print_kld_statistics(FILE* out, const KlDivergenceResult& r) {
  std::fprintf(out, "====== Perplexity statistics ======\n");
  std::fprintf(out, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", r.ppl_q.value,
               r.ppl_q.uncertainty);
  std::fprintf(out, "Mean PPL(base)                : %10.6f ± %10.6f\n", r.ppl_base.value,
               r.ppl_base.uncertainty);
  std::fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * r.log_ppl_correlation);
  std::fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.log_ppl_ratio.value,
               r.log_ppl_ratio.uncertainty);
  std::fprintf(out, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", r.ppl_ratio.value,
               r.ppl_ratio.uncertainty);
  std::fprintf(out, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", r.ppl_difference.value,
               r.ppl_difference.uncertainty);
  std::fprintf(out, "\n====== KL divergence statistics ======\n");
  std::fprintf(out, "Mean    KLD: %10.6f ± %10.6f\n", r.kld.value, r.kld.uncertainty);
  std::fprintf(out, "Maximum KLD: %10.6f\n", r.kld_maximum);
  for (const Percentile& p : r.kld_percentiles) {
    if (p.fraction < 0.5) continue;
    std::fprintf(out, "%s   KLD: %10.6f\n", percent_label(p.fraction).c_str(), p.value);
  }
  std::fprintf(out, "Median  KLD: %10.6f\n", r.kld_median);
  for (const Percentile& p : r.kld_percentiles)
    if (p.fraction < 0.5)
      std::fprintf(out, "%s   KLD: %10.6f\n", percent_label(p.fraction).c_str(), p.value);
  std::fprintf(out, "Minimum KLD: %10.6f\n", r.kld_minimum);
  std::fprintf(out, "\n====== Token probability statistics ======\n");
  std::fprintf(out, "Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * r.p_diff.value,
               100.0 * r.p_diff.uncertainty);
  std::fprintf(out, "Maximum Δp: %6.3f%%\n", 100.0 * r.p_diff_maximum);
  for (const Percentile& p : r.p_diff_percentiles)
    if (p.fraction > 0.5)
      std::fprintf(out, "%s   Δp: %6.3f%%\n", percent_label(p.fraction).c_str(), 100.0 * p.value);
  std::fprintf(out, "Median  Δp: %6.3f%%\n", 100.0 * r.p_diff_median);
  for (const Percentile& p : r.p_diff_percentiles)
    if (p.fraction < 0.5)
      std::fprintf(out, "%s   Δp: %6.3f%%\n", percent_label(p.fraction).c_str(), 100.0 * p.value);
  std::fprintf(out, "Minimum Δp: %6.3f%%\n", 100.0 * r.p_diff_minimum);
  std::fprintf(out, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * r.rms_p_diff.value,
               100.0 * r.rms_p_diff.uncertainty);
  std::fprintf(out, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * r.same_top.value,
               100.0 * r.same_top.uncertainty);
}

json kld_json(const KlDivergenceResult& r) {
  return {{"count", r.count},
          {"num_windows", r.num_windows},
          {"ctx", r.ctx},
          {"ppl_q", estimate_json(r.ppl_q)},
          {"ppl_base", estimate_json(r.ppl_base)},
          {"log_ppl_correlation", r.log_ppl_correlation},
          {"log_ppl_ratio", estimate_json(r.log_ppl_ratio)},
          {"ppl_ratio", estimate_json(r.ppl_ratio)},
          {"ppl_difference", estimate_json(r.ppl_difference)},
          {"kld", estimate_json(r.kld)},
          {"kld_maximum", r.kld_maximum},
          {"kld_percentiles", percentiles_json(r.kld_percentiles)},
          {"kld_median", r.kld_median},
          {"kld_minimum", r.kld_minimum},
          {"p_diff", estimate_json(r.p_diff)},
          {"p_diff_maximum", r.p_diff_maximum},
          {"p_diff_percentiles", percentiles_json(r.p_diff_percentiles)},
          {"p_diff_median", r.p_diff_median},
          {"p_diff_minimum", r.p_diff_minimum},
          {"rms_p_diff", estimate_json(r.rms_p_diff)},
          {"same_top", estimate_json(r.same_top)},
          {"same_top_count", r.same_top_count}};
}

void run_kl_divergence(const PerplexityOptions& opt, const KldBaseFile& base, LoadedModel& m,
                       LanguageModel& decoder) {
  if (!opt.text_path.empty())
    std::fprintf(stderr, "kl-divergence: %s is not read; the tokens come from %s\n",
                 opt.text_path.c_str(), base.path().c_str());
  print_plan("kl-divergence", base.windows(), opt.batch_size);
  std::fprintf(stderr,
               "\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence  "
               "            Δp RMS            Same top p\n");
  const auto start = Clock::now();
  const KlDivergenceResult r = kl_divergence(
      decoder, base, opt.batch_size, parse_kv_cache_dtype(opt.kv_cache_dtype), opt.chunks,
      [](int64_t, const KlDivergenceResult& so_far) { print_kld_line(so_far); });
  std::fprintf(stderr, "\nkl-divergence: %.2f s\n\n", seconds_since(start));
  print_kld_statistics(opt.json ? stderr : stdout, r);
  if (!opt.json) return;
  json out = kld_json(r);
  out["model"] = m.description;
  out["kl_divergence_base"] = base.path();
  out["kv_cache_dtype"] = kv_dtype_name(parse_kv_cache_dtype(opt.kv_cache_dtype));
  std::cout << out.dump() << '\n';
}

void run(const PerplexityOptions& opt) {
  if (opt.batch_size < 1)
    throw Error("--batch-size must be >= 1, got " + std::to_string(opt.batch_size));
  if (opt.chunks == 0 || opt.chunks < -1)
    throw Error("--chunks must be >= 1 (or -1: every window), got " + std::to_string(opt.chunks));
  if (opt.kl_divergence && opt.kld_base.empty())
    throw Error(
        "--kl-divergence needs --kl-divergence-base FILE (written by a run without "
        "--kl-divergence)");
  if (!opt.kl_divergence && opt.text_path.empty())
    throw Error("give the text with -f FILE (or --kl-divergence with a base file)");
  // Every input is checked before anything is printed, so that a refusal is the only output:
  // the base file and the text before the model is loaded, what needs the model right after.
  std::optional<KldBaseFile> base;
  std::string text;
  if (opt.kl_divergence) {
    base.emplace(KldBaseFile::open(opt.kld_base));
    if (opt.ctx_given && opt.ctx != base->windows().ctx)
      throw Error(base->path() + ": made with a context of " + std::to_string(base->windows().ctx) +
                  " tokens, not the --ctx " + std::to_string(opt.ctx) + " given");
  } else {
    text = read_text_file(opt.text_path);
  }
  LoadedModel m = load_model(opt.model.load_options());
  if (base && base->vocab_size() != m.config.vocab_size)
    throw Error(base->path() + ": made with a vocabulary of " + std::to_string(base->vocab_size()) +
                " tokens, the model under test (" + opt.model.model + ") has " +
                std::to_string(m.config.vocab_size));
  EvalWindows windows;
  std::optional<KldBaseWriter> writer;
  if (!base) {
    if (!m.tokenizer)
      throw Error(opt.model.model + ": no tokenizer found; give one with --tokenizer");
    try {
      windows = tokenize_eval_windows(*m.tokenizer, text, opt.ctx, opt.chunks);
    } catch (const Error& e) {
      throw Error(opt.text_path + ": " + e.what());
    }
    if (!opt.kld_base.empty()) writer.emplace(opt.kld_base, windows, m.config.vocab_size);
  }
  const std::unique_ptr<LanguageModel> model = make_language_model(m);
  LanguageModel& decoder = *model;
  std::fprintf(stderr, "model: %s, %d threads\n", m.description.c_str(), omp_get_max_threads());
  if (base)
    run_kl_divergence(opt, *base, m, decoder);
  else
    run_perplexity(opt, windows, writer, m, decoder);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto opt = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text, and KL divergence against a base model (like llama-perplexity)");
  cmd->add_option("--model,-m", opt->model.model,
                  "GGUF file, Hugging Face folder, or (dummy) config.json / folder")
      ->required();
  cmd->add_option("--file,-f", opt->text_path, "The text to score (UTF-8)");
  CLI::Option* ctx = cmd->add_option("--ctx,-c,--ctx-size", opt->ctx,
                                     "Tokens per window; each scores its second half")
                         ->capture_default_str();
  cmd->add_option("--chunks", opt->chunks, "Score at most this many windows (-1: all)")
      ->capture_default_str();
  cmd->add_option("--batch-size,-b", opt->batch_size,
                  "Tokens per forward: batch-size / ctx windows side by side, or one window in "
                  "chunks when it is under ctx")
      ->capture_default_str();
  add_kv_cache_dtype_option(cmd, opt->kv_cache_dtype);
  cmd->add_option("--kl-divergence-base", opt->kld_base,
                  "Without --kl-divergence: write every scored log-probability row here; with "
                  "it: the base model's file to compare with");
  cmd->add_flag("--kl-divergence", opt->kl_divergence,
                "Compare the model with --kl-divergence-base (the tokens come from that file)");
  cmd->add_flag("--json", opt->json, "Print the results as one JSON object on stdout");
  opt->model.add_to(cmd);
  cmd->callback([opt, ctx] {
    opt->ctx_given = ctx->count() > 0;
    run(*opt);
  });
}

}  // namespace tern::cli
