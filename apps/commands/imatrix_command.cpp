// `tern imatrix -m MODEL -f calib.txt -o imatrix.gguf`: llama-imatrix's importance matrix (the
// mean squared activation of every input column of every matrix over the calibration text),
// written in llama.cpp's GGUF imatrix format for `tern quantize --imatrix` and llama-quantize.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "commands/commands.h"
#include "commands/model_options.h"
#include "commands/output_paths.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/eval/imatrix_collector.h"
#include "tern/models/model_loader.h"

namespace tern::cli {
namespace {

struct ImatrixOptions {
  ModelOptions model;
  std::string text_file;
  std::string output = "imatrix.gguf";
  int64_t ctx = 512;
  int64_t chunks = -1;
  bool process_output = false;
  bool hessian = false;
};

void run(const ImatrixOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  if (opt.ctx < 2) throw Error("--ctx must be at least 2, got " + std::to_string(opt.ctx));
  const std::string text = read_text_file(opt.text_file);
  check_output_file(opt.output, "--output");
  LoadedModel model = load_model(opt.model.load_options());
  if (!model.tokenizer) throw Error(opt.model.model + ": has no tokenizer (give --tokenizer)");
  const std::vector<int32_t> tokens = model.tokenizer->encode(text);
  const std::unique_ptr<LanguageModel> language_model = make_language_model(model);
  LanguageModel& decoder = *language_model;

  tern::ImatrixOptions o;
  o.ctx = opt.ctx;
  o.max_chunks = opt.chunks;
  if (model.tokenizer->add_bos()) o.bos = model.tokenizer->bos_id();
  o.process_output = opt.process_output;
  o.keep_outer = opt.hessian;
  const bool tty = isatty(2);
  o.on_chunk = [&](int64_t done, int64_t total) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%schunk %lld/%lld, %.1f s%s", tty ? "\r" : "",
                 static_cast<long long>(done), static_cast<long long>(total), s,
                 tty && done < total ? "" : "\n");
  };
  std::fprintf(stderr, "%s: %zu tokens, windows of %lld\n", opt.text_file.c_str(), tokens.size(),
               static_cast<long long>(opt.ctx));
  ImportanceMatrix m = compute_importance_matrix(decoder, tokens, o);
  m.datasets = {opt.text_file};
  m.write(opt.output);
  std::fprintf(stderr, "wrote %s: %zu entries, %lld chunks of %lld tokens\n", opt.output.c_str(),
               m.entries.size(), static_cast<long long>(m.chunk_count),
               static_cast<long long>(m.chunk_size));
}

}  // namespace

void add_imatrix_command(CLI::App& app) {
  auto opt = std::make_shared<ImatrixOptions>();
  CLI::App* cmd = app.add_subcommand(
      "imatrix",
      "Compute an importance matrix over calibration text (llama-imatrix's GGUF format)");
  cmd->add_option("--model,-m", opt->model.model, "GGUF file, Hugging Face folder, or ORG/NAME")
      ->required();
  cmd->add_option("--file,-f", opt->text_file, "Calibration text")->required();
  cmd->add_option("--output,-o", opt->output, "The imatrix GGUF to write (default imatrix.gguf)");
  cmd->add_option("--ctx,-c", opt->ctx, "Tokens per window (default 512)");
  cmd->add_option("--chunks", opt->chunks, "At most this many windows (default: all)");
  cmd->add_flag("--process-output", opt->process_output, "Also collect output.weight");
  cmd->add_flag("--hessian", opt->hessian,
                "Also keep each matrix input's sums of x xT (cols² floats a matrix; llama.cpp "
                "skips them): tern quantize then quantizes by GPTQ");
  opt->model.add_to(cmd);
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
