// `tern quantize IN OUT TYPE`: llama-quantize's interface. IN is a GGUF, a Hugging Face
// safetensors folder or a Hugging Face name; OUT a GGUF that llama.cpp loads, its metadata
// (tokenizer, chat template, general.*) carried over from a GGUF input. Matrices go through the
// weight quantizers, importance-weighted with --imatrix (by GPTQ where it has second moments);
// a progress line per matrix on stderr and a closing summary of sizes, bits per weight and
// seconds.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "commands/commands.h"
#include "commands/model_options.h"
#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/hub/resolve_model.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"
#include "tern/models/model_path.h"
#include "tern/quant/importance_matrix.h"
#include "tern/quant/quant_recipe.h"

namespace tern::cli {
namespace {

namespace fs = std::filesystem;

struct QuantizeOptions {
  std::string input, output, type;
  std::string imatrix;
  std::string output_tensor_type, token_embedding_type;
  bool pure = false;
  bool allow_requantize = false;
  int threads = 0;
  std::string tokenizer;
  std::string revision = "main";
};

constexpr const char* kTypes =
    "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, f16, bf16, f32";

FileType parse_file_type(const std::string& name) {
  if (auto ft = file_type_from_name(name)) return *ft;
  throw Error("unknown quantization type '" + name + "' (one of " + kTypes + ")");
}

DType parse_tensor_type(const std::string& flag, const std::string& name) {
  if (auto d = dtype_from_name(name)) return *d;
  throw Error(
      flag + " '" + name +
      "' is not a tensor type (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, f16, bf16, f32)");
}

// Every matrix of the model, the embedding (and untied lm_head) included.
template <typename Fn>
void for_each_matrix(const ModelWeights& w, Fn fn) {
  fn(w.token_embedding);
  if (!w.tied_embeddings) fn(w.lm_head);
  for (const LayerWeights& l : w.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      fn(*m);
}

struct MatrixTotals {
  uint64_t bytes = 0, elements = 0;
  std::optional<DType> quantized;  // a matrix's type when some matrix is quantized
};

MatrixTotals matrix_totals(const ModelWeights& w) {
  MatrixTotals t;
  for_each_matrix(w, [&](const WeightMatrix& m) {
    t.bytes += m.row_bytes * static_cast<uint64_t>(m.rows);
    t.elements += static_cast<uint64_t>(m.rows * m.cols);
    if (dtype_traits(m.dtype).block_elems > 1 && !t.quantized) t.quantized = m.dtype;
  });
  return t;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
double bits_per_weight(const MatrixTotals& t) {
  return t.elements > 0 ? 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.elements)
                        : 0.0;
}

// One line per matrix, redrawn in place on a terminal.
class Progress {
 public:
  Progress() : tty_(isatty(2)) {}
  void update(const std::string& name, DType from, DType to, int64_t done, int64_t total) {
    const int width = 30;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "%s[%s%s] %3lld/%lld %-28s %5s -> %-5s%s", tty_ ? "\r" : "",
                 std::string(static_cast<size_t>(filled), '=').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), name.c_str(),
                 std::string(dtype_name(from)).c_str(), std::string(dtype_name(to)).c_str(),
                 tty_ && done < total ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
};

// The input GGUF's keys that travel to the output: all but those naming what it was quantized
// as (llama-quantize rewrites the same ones).
std::vector<std::pair<std::string, GgufValue>> carried_metadata(const GgufFile& in) {
  std::vector<std::pair<std::string, GgufValue>> keys;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version" ||
        key.rfind("quantize.", 0) == 0)
      continue;
    keys.emplace_back(key, value);
  }
  return keys;
}

void run(const QuantizeOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  check_threads(opt.threads);
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  const FileType file_type = parse_file_type(opt.type);
  QuantRecipe recipe = opt.pure ? QuantRecipe::pure(file_type) : QuantRecipe::mixture(file_type);
  if (!opt.output_tensor_type.empty())
    recipe.set_output_type(parse_tensor_type("--output-tensor-type", opt.output_tensor_type));
  if (!opt.token_embedding_type.empty())
    recipe.set_token_embedding_type(
        parse_tensor_type("--token-embedding-type", opt.token_embedding_type));

  LoadOptions load;
  load.model = hub::resolve_model(opt.input, {opt.revision, hub::RepoFiles::All});
  load.tokenizer = opt.tokenizer.empty()
                       ? ""
                       : hub::resolve_model(opt.tokenizer, {"main", hub::RepoFiles::Tokenizer});
  std::error_code ec;
  if (fs::exists(opt.output, ec) && fs::equivalent(load.model, opt.output, ec))
    throw Error(opt.output +
                ": is the input; quantizing in place would overwrite it while reading it");
  const LoadedModel model = load_model(load);
  const MatrixTotals before = matrix_totals(model.weights);
  if (before.quantized) {
    if (!opt.allow_requantize)
      throw Error(
          opt.input + ": is already quantized (" + std::string(dtype_name(*before.quantized)) +
          "); quantizing it again compounds the error. Quantize the F32/F16/BF16 original, or "
          "pass --allow-requantize");
    std::fprintf(stderr,
                 "warning: requantizing %s weights: the error of the first quantization stays and "
                 "the second adds its own; quality will be worse than quantizing the original\n",
                 std::string(dtype_name(*before.quantized)).c_str());
  }

  std::optional<ImportanceMatrix> imatrix;
  if (!opt.imatrix.empty()) {
    imatrix = ImportanceMatrix::read(opt.imatrix);
    imatrix->check_fits(model.weights, opt.imatrix);
    size_t with_moments = 0;
    for (const auto& [name, e] : imatrix->entries) with_moments += e.sum_outer.empty() ? 0 : 1;
    std::fprintf(
        stderr, "imatrix: %zu entries from %s, computed on %lld chunks of %lld tokens%s\n",
        imatrix->entries.size(), opt.imatrix.c_str(), static_cast<long long>(imatrix->chunk_count),
        static_cast<long long>(imatrix->chunk_size),
        with_moments > 0
            ? ("; " + std::to_string(with_moments) + " with second moments, quantized by GPTQ")
                  .c_str()
            : "");
  }
  std::fprintf(stderr, "quantizing %s (%s) to %s with %d threads\n", opt.input.c_str(),
               model.description.c_str(), recipe.name().c_str(), omp_get_max_threads());

  Progress progress;
  tern::QuantizeOptions qopt;
  qopt.imatrix = imatrix ? &*imatrix : nullptr;
  qopt.on_matrix = [&](const std::string& name, DType from, DType to, int64_t done, int64_t total) {
    progress.update(name, from, to, done, total);
  };
  const double load_seconds = seconds_since(start);
  const ModelWeights quantized = quantize_weights(model.weights, model.config, recipe, qopt);
  const double quantize_seconds = seconds_since(start) - load_seconds;

  std::vector<std::pair<std::string, GgufValue>> metadata;
  const bool gguf_input = model_path_kind(load.model) == ModelPathKind::Gguf;
  std::optional<GgufFile> source;
  if (gguf_input) {
    source = GgufFile::open(load.model);
    metadata = carried_metadata(*source);
  }
  if (imatrix) {
    // llama-quantize's record of the calibration.
    metadata.emplace_back("quantize.imatrix.file", GgufValue::string(opt.imatrix));
    if (!imatrix->datasets.empty())
      metadata.emplace_back("quantize.imatrix.dataset",
                            GgufValue::string(imatrix->datasets.front()));
    metadata.emplace_back("quantize.imatrix.entries_count",
                          GgufValue::i32(static_cast<int32_t>(imatrix->entries.size())));
    metadata.emplace_back("quantize.imatrix.chunks_count",
                          GgufValue::i32(static_cast<int32_t>(imatrix->chunk_count)));
  }
  // A GGUF's own tokenizer keys travel as they are; a folder's tokenizer is written by tern.
  const Tokenizer* tokenizer = gguf_input || !model.tokenizer ? nullptr : &*model.tokenizer;
  if (!gguf_input && !model.tokenizer)
    std::fprintf(
        stderr,
        "warning: %s has no tokenizer; llama.cpp will refuse the output (tern takes --tokenizer)\n",
        opt.input.c_str());
  save_gguf(opt.output, quantized, model.config, tokenizer, "", metadata);

  const MatrixTotals after = matrix_totals(quantized);
  const double seconds = seconds_since(start);
  std::fprintf(stderr,
               "matrices: %.2f MiB (%.2f bits per weight) -> %.2f MiB (%.2f bits per weight)\n"
               "file: %s, %.2f MiB, %s\n"
               "done in %.2f s (load %.2f s, quantize %.2f s, write %.2f s)\n",
               mib(before.bytes), bits_per_weight(before), mib(after.bytes), bits_per_weight(after),
               opt.output.c_str(), mib(fs::file_size(opt.output)), recipe.name().c_str(), seconds,
               load_seconds, quantize_seconds, seconds - load_seconds - quantize_seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opt = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a model to a GGUF file (llama-quantize's interface: IN OUT TYPE)");
  cmd->add_option("input", opt->input,
                  "GGUF (F32/F16/BF16), Hugging Face safetensors folder, or ORG/NAME")
      ->required();
  cmd->add_option("output", opt->output, "The GGUF to write")->required();
  cmd->add_option("type", opt->type, std::string("File type: ") + kTypes)->required();
  cmd->add_option(
      "--imatrix", opt->imatrix,
      "Importance matrix (GGUF, from tern imatrix or llama-imatrix): minimise the "
      "importance-weighted error; by GPTQ where it has second moments (tern imatrix --hessian)");
  cmd->add_option("--output-tensor-type", opt->output_tensor_type, "Type of output.weight");
  cmd->add_option("--token-embedding-type", opt->token_embedding_type, "Type of token_embd.weight");
  cmd->add_flag("--pure", opt->pure, "Every matrix the type's base type (no k-quant mixture)");
  cmd->add_flag("--allow-requantize", opt->allow_requantize,
                "Accept an already quantized input (its error compounds)");
  cmd->add_option("--threads,-t", opt->threads, "Threads (0: all cores)");
  cmd->add_option("--tokenizer", opt->tokenizer, "Tokenizer for a folder without one");
  cmd->add_option("--revision", opt->revision, "Branch, tag or commit of a Hugging Face model");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
