// `tern inspect`: what a model file holds: format, metadata, the model config tern derives from
// it, and the tensor table (name, type, shape, bytes).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"
#include "tern/formats/model_config.h"
#include "tern/formats/safetensors.h"
#include "tern/formats/tensor_info.h"
#include "tern/hub/resolve_model.h"
#include "tern/models/model_path.h"

namespace tern::cli {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// 1234567 → "1,234,567": byte counts people read at a glance.
std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

void print_tensor_table(const std::vector<TensorInfo>& tensors) {
  size_t name_width = 4;
  for (const auto& t : tensors) name_width = std::max(name_width, t.name.size());
  uint64_t total = 0, params = 0;
  std::printf("tensors (%zu), shapes outermost dimension first:\n", tensors.size());
  std::printf("  %-*s  %-5s  %-20s  %14s\n", static_cast<int>(name_width), "name", "type", "shape",
              "bytes");
  for (const auto& t : tensors) {
    std::printf("  %-*s  %-5s  %-20s  %14s\n", static_cast<int>(name_width), t.name.c_str(),
                std::string(dtype_name(t.dtype)).c_str(), shape_string(t.shape).c_str(),
                grouped(t.nbytes).c_str());
    total += t.nbytes;
    params += t.nelements();
  }
  std::printf("total: %s parameters, %s bytes\n", grouped(params).c_str(), grouped(total).c_str());
}

void print_config(const ModelConfig& c) {
  std::printf(
      "model: %s (%s), %lld layers, hidden %lld, ffn %lld, heads %lld / kv %lld x %lld, vocab "
      "%lld, context %lld, rope theta %g (%s), eps %g%s%s%s\n",
      std::string(model_arch_name(c.arch)).c_str(), c.arch_name.c_str(),
      static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
      static_cast<long long>(c.intermediate_size), static_cast<long long>(c.num_heads),
      static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
      static_cast<long long>(c.vocab_size), static_cast<long long>(c.max_position_embeddings),
      c.rope_theta, std::string(rope_scaling_name(c.rope_scaling.type)).c_str(), c.rms_norm_eps,
      c.tie_word_embeddings ? ", tied embeddings" : "", c.attention_bias ? ", qkv bias" : "",
      c.qk_norm ? ", q/k norm" : "");
}

// A file's metadata need not describe a model tern runs (a vocab-only GGUF, a gpt2 file):
// then the config line says why instead of failing the whole inspection.
template <typename LoadConfig>
void print_config_or_reason(LoadConfig load) {
  try {
    print_config(load());
  } catch (const Error& e) {
    std::printf("model: not a model tern runs: %s\n", e.what());
  }
}

void inspect_gguf(const std::string& path) {
  GgufFile file = GgufFile::open(path);
  std::printf("file: %s\nformat: GGUF v%u, %s bytes, alignment %llu, tensor data at byte %s\n",
              path.c_str(), file.version(), grouped(file.file_size()).c_str(),
              static_cast<unsigned long long>(file.alignment()),
              grouped(file.data_offset()).c_str());
  std::printf("metadata (%zu):\n", file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    std::printf("  %-40s %-8s %s\n", key.c_str(), std::string(gguf_type_name(value.type)).c_str(),
                value.to_display().c_str());
  }
  print_config_or_reason([&] { return ModelConfig::from_gguf(file); });
  print_tensor_table(file.tensors());
}

void inspect_safetensors(const std::string& path) {
  SafetensorsModel model = SafetensorsModel::open(path);
  std::printf("file: %s\nformat: safetensors, %zu file%s%s\n", path.c_str(), model.shards().size(),
              model.shards().size() == 1 ? "" : "s",
              model.sharded() ? " (sharded, with index)" : "");
  for (const auto& shard : model.shards()) {
    std::printf("  %s: %s bytes, header %s bytes\n", shard.path().c_str(),
                grouped(shard.file_size()).c_str(), grouped(shard.header_bytes()).c_str());
  }
  std::printf("metadata (%zu):\n", model.metadata().size());
  for (const auto& [key, value] : model.metadata())
    std::printf("  %-40s %s\n", key.c_str(), value.c_str());
  std::filesystem::path dir = std::filesystem::is_directory(path)
                                  ? std::filesystem::path(path)
                                  : std::filesystem::path(path).parent_path();
  if (std::filesystem::exists(dir / "config.json"))
    print_config_or_reason([&] { return ModelConfig::from_hf_dir(dir.string()); });
  print_tensor_table(model.tensors());
}

void run(const std::string& path) {
  switch (model_path_kind(path)) {
    case ModelPathKind::Gguf:
      inspect_gguf(path);
      return;
    case ModelPathKind::ConfigJson:
      std::printf("file: %s (config.json, no weights)\n", path.c_str());
      print_config(ModelConfig::from_hf_json(read_text_file(path), path));
      return;
    case ModelPathKind::Folder:
      if (!std::filesystem::exists(path + "/model.safetensors") &&
          !std::filesystem::exists(path + "/model.safetensors.index.json") &&
          std::filesystem::exists(path + "/config.json")) {
        // A folder with only a config (e.g. for --load-format dummy): show what it describes.
        std::printf("folder: %s (config.json, no weights)\n", path.c_str());
        print_config(ModelConfig::from_hf_dir(path));
        return;
      }
      break;
    case ModelPathKind::Safetensors:
      break;
  }
  inspect_safetensors(path);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto revision = std::make_shared<std::string>("main");
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model file's metadata and tensors (GGUF, safetensors, or a folder)");
  cmd->add_option("model", *path,
                  "GGUF file, .safetensors file, model folder, or Hugging Face ORG/NAME, "
                  "ORG/NAME/FILE.gguf, ORG/NAME:QUANT")
      ->required();
  cmd->add_option("--revision", *revision, "Branch, tag or commit of a Hugging Face model");
  cmd->callback([path, revision] { run(hub::resolve_model(*path, {*revision})); });
}

}  // namespace tern::cli
