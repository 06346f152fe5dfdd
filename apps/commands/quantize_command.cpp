// `tern quantize IN OUT TYPE`: llama-quantize's interface. IN is a GGUF, a Hugging Face
// safetensors folder or a Hugging Face name; OUT a GGUF that llama.cpp loads, its metadata
// (tokenizer, chat template, general.*) carried over from a GGUF input. Matrices go through the
// weight quantizers, importance-weighted with --imatrix (by GPTQ where it has second moments);
// a progress line per matrix on stderr and a closing summary of sizes, bits per weight and
// seconds.
// `tern quantize IN OUT_DIR --output-format gptq|awq|mlx` writes a checkpoint folder that vLLM
// (GPTQ, AWQ) or mlx-lm (MLX) loads instead (models/checkpoint_export.h): the layers' matrices
// in affine groups of --bits and --group-size, by GPTQ where the importance matrix has second
// moments (with act-order under --desc-act), after AWQ's scale search for awq.
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
#include "commands/output_paths.h"
#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/gguf.h"
#include "tern/hub/resolve_model.h"
#include "tern/models/checkpoint_export.h"
#include "tern/models/gguf_export.h"
#include "tern/models/imatrix_fits.h"
#include "tern/models/model_loader.h"
#include "tern/models/model_path.h"
#include "tern/quant/importance_matrix.h"
#include "tern/quant/quant_recipe.h"

namespace tern::cli {
namespace {

namespace fs = std::filesystem;

struct QuantizeOptions {
  std::string input, output, type;
  std::string output_format = "gguf";
  int bits = 0, group_size = 0;  // 0: the format's default
  bool sym = false, desc_act = false;
  std::string imatrix;
  std::string output_tensor_type, token_embedding_type;
  bool pure = false;
  bool allow_requantize = false;
  int threads = 0;
  std::string tokenizer;
  std::string revision = "main";
};

constexpr const char* kTypes =
    "q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q2_k_s, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, "
    "q5_k_m, q6_k, iq4_nl, iq4_xs, iq3_xxs, iq3_xs, iq3_s, iq3_m, iq2_xxs, iq2_xs, iq2_s, iq2_m, "
    "iq1_s, iq1_m, mxfp4_moe, f16, bf16, f32";

FileType parse_file_type(const std::string& name) {
  if (auto ft = file_type_from_name(name)) return *ft;
  throw Error("unknown quantization type '" + name + "' (one of " + kTypes + ")");
}

DType parse_tensor_type(const std::string& flag, const std::string& name) {
  if (auto d = dtype_from_name(name)) return *d;
  throw Error(
      flag + " '" + name +
      "' is not a tensor type (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
      "iq4_xs, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m, mxfp4, f16, bf16, f32)");
}

// Every matrix of the model, the embedding (and untied lm_head) included.
template <typename Fn>
void for_each_matrix(const ModelWeights& w, Fn fn) {
  fn(w.token_embedding);
  if (!w.tied_embeddings) fn(w.lm_head);
  for (const LayerWeights& l : w.layers) l.for_each_matrix(fn);
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

// A GPTQ, AWQ or MLX checkpoint's settings from the flags, each refused where the format has
// no such setting.
CheckpointQuantization checkpoint_settings(const QuantizeOptions& opt, QuantMethod method) {
  const std::string format(quant_method_name(method));
  if (!opt.type.empty())
    throw Error("--output-format " + format + " takes no TYPE ('" + opt.type +
                "'): the checkpoint's type is --bits and --group-size");
  for (const auto& [set, flag] : {std::pair{opt.pure, "--pure"},
                                  {!opt.output_tensor_type.empty(), "--output-tensor-type"},
                                  {!opt.token_embedding_type.empty(), "--token-embedding-type"}})
    if (set) throw Error(std::string(flag) + " is for GGUF output, not --output-format " + format);
  CheckpointQuantization q;
  q.method = method;
  q.bits = opt.bits != 0 ? opt.bits : 4;
  // mlx-lm's and AutoGPTQ's / AutoAWQ's defaults.
  q.group_size = opt.group_size != 0 ? opt.group_size : method == QuantMethod::Mlx ? 64 : 128;
  if (q.bits != 4 && q.bits != 8)
    throw Error("--bits " + std::to_string(q.bits) + ": tern writes 4- and 8-bit checkpoints");
  if (method == QuantMethod::Awq && q.bits != 4)
    throw Error("--bits " + std::to_string(q.bits) + ": AWQ's GEMM checkpoints are 4-bit");
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    throw Error("--group-size " + std::to_string(q.group_size) + ": one of 32, 64, 128");
  if (opt.sym && method != QuantMethod::Gptq)
    throw Error("--sym is GPTQ's setting; " + format + " stores a zero point or bias per group");
  if (opt.desc_act && method != QuantMethod::Gptq)
    throw Error("--desc-act is GPTQ's act-order; " + format + " has no g_idx to store it");
  q.sym = opt.sym;
  q.desc_act = opt.desc_act;
  // GPTQ: AutoGPTQ's v1 zeros, which every GPTQ loader reads.
  q.zeros_minus_one = method == QuantMethod::Gptq;
  return q;
}

quant::AffineRule affine_rule(const CheckpointQuantization& q) {
  switch (q.method) {
    case QuantMethod::Gptq:
      return q.sym ? quant::AffineRule::SymmetricZero : quant::AffineRule::ZeroPointFromOne;
    case QuantMethod::Awq:
      return quant::AffineRule::ZeroPoint;
    case QuantMethod::Mlx:
      return quant::AffineRule::HalfBias;
  }
  return quant::AffineRule::ZeroPoint;
}

uint64_t bytes_of_files(const std::vector<std::string>& files) {
  uint64_t total = 0;
  for (const std::string& f : files) total += fs::file_size(f);
  return total;
}

void run(const QuantizeOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  check_threads(opt.threads);
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  std::optional<CheckpointQuantization> checkpoint;
  QuantRecipe recipe = QuantRecipe::uniform(DType::F32);
  if (opt.output_format != "gguf") {
    const std::optional<QuantMethod> method = quant_method_from_name(opt.output_format);
    if (!method)
      throw Error("--output-format '" + opt.output_format + "': one of gguf, gptq, awq, mlx");
    checkpoint = checkpoint_settings(opt, *method);
    recipe = QuantRecipe::uniform(checkpoint->dtype());
    if (*method != QuantMethod::Mlx) {  // GPTQ and AWQ leave the embedding and head float
      recipe.set_token_embedding_type(DType::F16);
      recipe.set_output_type(DType::F16);
    }
  } else {
    if (opt.bits != 0 || opt.group_size != 0 || opt.sym || opt.desc_act)
      throw Error(
          "--bits, --group-size, --sym and --desc-act are for --output-format gptq, awq or mlx; "
          "a GGUF's TYPE says its quantization");
    if (opt.type.empty()) throw Error(std::string("TYPE is required for GGUF output: ") + kTypes);
    const FileType file_type = parse_file_type(opt.type);
    recipe = opt.pure ? QuantRecipe::pure(file_type) : QuantRecipe::mixture(file_type);
    if (recipe.needs_importance_matrix() && opt.imatrix.empty())
      throw Error(std::string(file_type_name(file_type)) +
                  (file_type == FileType::Q2_K_S ? " fits its 2-bit matrices"
                                                 : " fits its lattice matrices") +
                  " to an importance matrix, and without one the result is garbage "
                  "(llama-quantize refuses it too): --imatrix F (from tern imatrix or "
                  "llama-imatrix), or " +
                  (file_type == FileType::Q2_K_S ? "Q2_K" : "IQ3_S, IQ3_M"));
    if (!opt.output_tensor_type.empty())
      recipe.set_output_type(parse_tensor_type("--output-tensor-type", opt.output_tensor_type));
    if (!opt.token_embedding_type.empty())
      recipe.set_token_embedding_type(
          parse_tensor_type("--token-embedding-type", opt.token_embedding_type));
  }

  LoadOptions load;
  load.model = hub::resolve_model(opt.input, {opt.revision, hub::RepoFiles::All});
  load.tokenizer = opt.tokenizer.empty()
                       ? ""
                       : hub::resolve_model(opt.tokenizer, {"main", hub::RepoFiles::Tokenizer});
  std::error_code ec;
  if (fs::exists(opt.output, ec) && fs::equivalent(load.model, opt.output, ec))
    throw Error(opt.output +
                ": is the input; quantizing in place would overwrite it while reading it");
  if (opt.output_format == "gguf")
    check_output_file(opt.output, "OUT");
  else
    check_output_folder(opt.output, "OUT_DIR");
  const LoadedModel model = load_model(load);
  if (checkpoint) check_checkpoint_shapes(model.config, *checkpoint);
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
  size_t with_moments = 0;
  if (!opt.imatrix.empty()) {
    imatrix = ImportanceMatrix::read(opt.imatrix);
    check_imatrix_fits(*imatrix, model.weights, opt.imatrix);
    for (const auto& [name, e] : imatrix->entries) with_moments += e.sum_outer.empty() ? 0 : 1;
    const bool awq = checkpoint && checkpoint->method == QuantMethod::Awq;
    std::fprintf(
        stderr, "imatrix: %zu entries from %s, computed on %lld chunks of %lld tokens%s\n",
        imatrix->entries.size(), opt.imatrix.c_str(), static_cast<long long>(imatrix->chunk_count),
        static_cast<long long>(imatrix->chunk_size),
        awq ? "; AWQ's scale search on its importances"
        : with_moments > 0
            ? ("; " + std::to_string(with_moments) + " with second moments, quantized by GPTQ")
                  .c_str()
            : "");
  }
  if (checkpoint && checkpoint->method == QuantMethod::Awq && !imatrix)
    throw Error(
        "--output-format awq: AWQ's scale search needs the inputs' statistics: --imatrix F (from "
        "tern imatrix or llama-imatrix)");
  if (checkpoint && checkpoint->desc_act && with_moments == 0)
    throw Error(
        "--desc-act: act-order is GPTQ's, and GPTQ needs the inputs' second moments: --imatrix F "
        "from tern imatrix --hessian");
  std::fprintf(stderr, "quantizing %s (%s) to %s with %d threads\n", opt.input.c_str(),
               model.description.c_str(),
               checkpoint ? (std::string(quant_method_name(checkpoint->method)) + " " +
                             std::string(dtype_name(checkpoint->dtype())))
                                .c_str()
                          : recipe.name().c_str(),
               omp_get_max_threads());

  Progress progress;
  tern::QuantizeOptions qopt;
  qopt.imatrix = imatrix ? &*imatrix : nullptr;
  qopt.on_matrix = [&](const std::string& name, DType from, DType to, int64_t done, int64_t total) {
    progress.update(name, from, to, done, total);
  };
  if (checkpoint) {
    qopt.affine_rule = affine_rule(*checkpoint);
    qopt.act_order = checkpoint->desc_act;
    qopt.awq = checkpoint->method == QuantMethod::Awq;
  }
  const double load_seconds = seconds_since(start);
  const ModelWeights quantized = quantize_weights(model.weights, model.config, recipe, qopt);
  const double quantize_seconds = seconds_since(start) - load_seconds;

  const bool gguf_input = model_path_kind(load.model) == ModelPathKind::Gguf;
  std::string written_name = opt.output;
  uint64_t written_bytes = 0;
  if (checkpoint) {
    CheckpointFolder folder;
    folder.quantization = *checkpoint;
    if (!gguf_input)
      folder.config_json = read_text_file((fs::path(load.model) / "config.json").string());
    // The tokenizer files of --tokenizer's folder, else of the input's.
    for (const std::string& dir : {load.tokenizer, gguf_input ? std::string() : load.model})
      if (!dir.empty() && fs::is_directory(dir, ec) && !tokenizer_files(dir).empty()) {
        folder.tokenizer_dir = dir;
        break;
      }
    if (folder.tokenizer_dir.empty())
      std::fprintf(stderr,
                   "warning: no tokenizer files to copy into %s (tern cannot write a GGUF's "
                   "tokenizer as tokenizer.json); pass --tokenizer with a Hugging Face folder, or "
                   "load the output with --tokenizer %s\n",
                   opt.output.c_str(), opt.input.c_str());
    written_bytes =
        bytes_of_files(save_quantized_checkpoint(opt.output, quantized, model.config, folder));
    written_name += "/";
  } else {
    std::vector<std::pair<std::string, GgufValue>> metadata;
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
      std::fprintf(stderr,
                   "warning: %s has no tokenizer; llama.cpp will refuse the output (tern takes "
                   "--tokenizer)\n",
                   opt.input.c_str());
    save_gguf(opt.output, quantized, model.config, tokenizer, "", metadata);
    written_bytes = fs::file_size(opt.output);
  }

  const MatrixTotals after = matrix_totals(quantized);
  const double seconds = seconds_since(start);
  std::fprintf(stderr,
               "matrices: %.2f MiB (%.2f bits per weight) -> %.2f MiB (%.2f bits per weight)\n"
               "%s: %s, %.2f MiB, %s\n"
               "done in %.2f s (load %.2f s, quantize %.2f s, write %.2f s)\n",
               mib(before.bytes), bits_per_weight(before), mib(after.bytes), bits_per_weight(after),
               checkpoint ? "folder" : "file", written_name.c_str(), mib(written_bytes),
               checkpoint ? std::string(quant_method_name(checkpoint->method)).c_str()
                          : recipe.name().c_str(),
               seconds, load_seconds, quantize_seconds, seconds - load_seconds - quantize_seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opt = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize a model to a GGUF file (llama-quantize's interface: IN OUT TYPE), or to a GPTQ, "
      "AWQ or MLX checkpoint folder (IN OUT_DIR --output-format gptq|awq|mlx)");
  cmd->add_option("input", opt->input,
                  "GGUF (F32/F16/BF16), Hugging Face safetensors folder, or ORG/NAME")
      ->required();
  cmd->add_option("output", opt->output, "The GGUF, or the checkpoint folder, to write")
      ->required();
  cmd->add_option("type", opt->type, std::string("GGUF file type: ") + kTypes);
  cmd->add_option("--output-format", opt->output_format,
                  "gguf (default), or a checkpoint folder: gptq (AutoGPTQ's layout), awq "
                  "(AutoAWQ's GEMM layout), mlx (mlx-lm's)");
  cmd->add_option("--bits", opt->bits, "Checkpoint: 4 (default) or 8 bits per weight");
  cmd->add_option("--group-size", opt->group_size,
                  "Checkpoint: inputs per group, 32, 64 or 128 (default 128; MLX 64)");
  cmd->add_flag("--sym", opt->sym, "GPTQ: symmetric groups (the zero point the middle code)");
  cmd->add_flag("--desc-act", opt->desc_act,
                "GPTQ: act-order (needs --imatrix with second moments: tern imatrix --hessian)");
  cmd->add_option(
      "--imatrix", opt->imatrix,
      "Importance matrix (GGUF, from tern imatrix or llama-imatrix): minimise the "
      "importance-weighted error; by GPTQ where it has second moments (tern imatrix --hessian); "
      "AWQ's scale search reads it (required for --output-format awq)");
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
