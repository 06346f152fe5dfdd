// load_model: finds out what the path is, reads config, weights and tokenizer accordingly.
#include "tern/models/model_loader.h"

#include <filesystem>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/decoder.h"
#include "tern/models/model_path.h"

namespace tern {
namespace fs = std::filesystem;
namespace {

bool has_tokenizer_files(const fs::path& dir) {
  for (const char* f : {"tokenizer.json", "vocab.json", "encoder.json", "tokenizer.model"})
    if (fs::is_regular_file(dir / f)) return true;
  return false;
}

std::string weight_types(const ModelWeights& w) {
  if (w.layers.empty()) return std::string(dtype_name(w.token_embedding.dtype));
  const LayerWeights& l = w.layers[0];
  std::string s(dtype_name(l.wq.dtype));
  const DType down = l.moe ? l.moe->down.front().dtype : l.w_down.dtype;
  if (down != l.wq.dtype) s += "/" + std::string(dtype_name(down));
  return s;
}

}  // namespace

std::optional<CheckpointQuantization> folder_quantization(const std::string& dir,
                                                          std::optional<QuantMethod> wanted) {
  const fs::path config = fs::path(dir) / "config.json",
                 older = fs::path(dir) / "quantize_config.json";
  const bool has_older = fs::is_regular_file(older);
  std::optional<CheckpointQuantization> q = parse_checkpoint_quantization(
      read_text_file(config.string()), config.string(),
      has_older ? read_text_file(older.string()) : std::string(), older.string());
  if (wanted && (!q || q->method != *wanted))
    throw Error(dir + ": --quantization " + std::string(quant_method_name(*wanted)) +
                " was asked for, but " +
                (q ? "the checkpoint is quantized by " + std::string(quant_method_name(q->method))
                   : std::string("the checkpoint is not quantized (its config.json has no "
                                 "quantization_config)")));
  return q;
}

DType torch_dtype_weight_type(const std::string& torch_dtype) {
  if (torch_dtype == "bfloat16") return DType::BF16;
  if (torch_dtype == "float16") return DType::F16;
  return DType::F32;
}

std::unique_ptr<LanguageModel> make_language_model(const LoadedModel& model) {
  if (model.device == nullptr)
    throw Error("internal: a model was not loaded for a device (LoadedModel::device)");
  return std::make_unique<Decoder>(model.config, model.weights, *model.device);
}

LoadedModel load_model(const LoadOptions& opt) {
  LoadedModel m;
  m.device = &find_device(opt.device);  // an unknown device fails before any loading
  const fs::path path(opt.model);
  const ModelPathKind kind = model_path_kind(opt.model);
  if (kind == ModelPathKind::Safetensors)
    throw Error(opt.model + ": a .safetensors file needs its config.json: give the folder (" +
                path.parent_path().string() + ")");
  const bool dir = kind == ModelPathKind::Folder;
  const bool gguf = kind == ModelPathKind::Gguf;

  std::optional<GgufFile> gguf_file;
  if (gguf) {
    gguf_file = GgufFile::open(opt.model);
    m.config = ModelConfig::from_gguf(*gguf_file);
  } else if (dir) {
    m.config = ModelConfig::from_hf_dir(opt.model);
  } else {
    m.config = ModelConfig::from_hf_json(read_text_file(opt.model), opt.model);  // a config.json
  }

  if (opt.quantization && (!dir || opt.format == LoadFormat::Dummy))
    throw Error(opt.model + ": --quantization " +
                std::string(quant_method_name(*opt.quantization)) +
                " reads the weights of a Hugging Face checkpoint folder" +
                (dir ? ", not dummy ones" : ", and this is not one"));
  // --weight-type f16 --dtype bf16 would ask for two types of the same matrices.
  if (opt.dtype && opt.weight_recipe && opt.weight_recipe->is_uniform()) {
    const std::optional<DType> all = dtype_from_name(opt.weight_recipe->name());
    if ((all == DType::F32 || all == DType::F16 || all == DType::BF16) && all != opt.dtype)
      throw Error("--weight-type " + opt.weight_recipe->name() + " and --dtype " +
                  std::string(dtype_name(*opt.dtype)) +
                  " ask for two float types: give one (--dtype converts only float matrices)");
  }
  std::string source;
  if (opt.format == LoadFormat::Dummy) {
    const QuantRecipe recipe = opt.weight_recipe.value_or(
        QuantRecipe::uniform(opt.dtype.value_or(torch_dtype_weight_type(m.config.torch_dtype))));
    m.weights = make_dummy_weights(m.config, recipe, opt.seed);
    source = "dummy";
  } else if (gguf) {
    m.weights = load_gguf_weights(*gguf_file, m.config);
    source = "GGUF";
  } else if (dir) {
    const std::optional<CheckpointQuantization> q =
        folder_quantization(opt.model, opt.quantization);
    m.weights =
        load_safetensors_weights(SafetensorsModel::open(opt.model), m.config, q ? &*q : nullptr);
    source = q ? "safetensors, " + std::string(quant_method_name(q->method)) : "safetensors";
  } else {
    throw Error(opt.model + ": a config.json alone has no weights (use --load-format dummy)");
  }
  if (opt.format != LoadFormat::Dummy && opt.weight_recipe)
    m.weights = quantize_weights(m.weights, m.config, *opt.weight_recipe);
  if (opt.dtype) convert_float_matrices(m.weights, *opt.dtype);
  m.device->prepare_weights(m.weights);

  if (!opt.tokenizer.empty()) {
    m.tokenizer = Tokenizer::load(opt.tokenizer);
  } else if (gguf && gguf_file->find("tokenizer.ggml.tokens") != nullptr) {
    m.tokenizer = Tokenizer::from_gguf(*gguf_file);
  } else if (const fs::path d = dir ? path : path.parent_path(); has_tokenizer_files(d)) {
    m.tokenizer = Tokenizer::load(d.string());
  }
  if (m.tokenizer && m.tokenizer->vocab_size() > m.config.vocab_size)
    throw Error((opt.tokenizer.empty() ? opt.model : opt.tokenizer) + ": the tokenizer has " +
                std::to_string(m.tokenizer->vocab_size()) +
                " tokens, more than the model's vocab_size " + std::to_string(m.config.vocab_size));
  // A mixture is known by its name ("Q4_K_M"), not by its first layer's types.
  const bool mixture = opt.weight_recipe && !opt.weight_recipe->is_uniform();
  m.description = std::string(model_arch_name(m.config.arch)) + " (" + source + ", " +
                  (mixture ? opt.weight_recipe->name() : weight_types(m.weights)) + ")";
  return m;
}

}  // namespace tern
