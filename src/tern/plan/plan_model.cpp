// open_plan_model: one branch per kind of MODEL argument.
#include "tern/plan/plan_model.h"

#include <filesystem>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/hub/hub_model_info.h"
#include "tern/hub/model_spec.h"
#include "tern/hub/resolve_model.h"
#include "tern/models/checkpoint_weights.h"
#include "tern/models/model_loader.h"
#include "tern/models/model_path.h"

namespace tern::plan {
namespace fs = std::filesystem;
namespace {

std::vector<TensorInfo> without_data(std::vector<TensorInfo> tensors) {
  for (TensorInfo& t : tensors) t.data = nullptr;
  return tensors;
}

PlanModel open_local(const std::string& spec, const std::string& path) {
  PlanModel m;
  m.name = spec;
  std::error_code ec;
  switch (model_path_kind(path)) {
    case ModelPathKind::Folder: {
      m.config = ModelConfig::from_hf_dir(path);
      const bool has_weights =
          fs::is_regular_file(fs::path(path) / "model.safetensors.index.json", ec) ||
          fs::is_regular_file(fs::path(path) / "model.safetensors", ec);
      if (has_weights) {
        m.format = "safetensors";
        m.tensors = without_data(SafetensorsModel::open(path).tensors());
        // A GPTQ, AWQ or MLX checkpoint: its matrices as tern repacks them.
        if (const std::optional<CheckpointQuantization> q = folder_quantization(path)) {
          m.format = "safetensors, " + std::string(quant_method_name(q->method));
          m.tensors = as_repacked_tensors(*q, m.tensors);
        }
      } else {
        m.format = "config.json";
      }
      break;
    }
    case ModelPathKind::Gguf: {
      const GgufFile gguf = GgufFile::open(path);
      m.format = "GGUF";
      m.config = ModelConfig::from_gguf(gguf);
      m.tensors = without_data(gguf.tensors());
      break;
    }
    case ModelPathKind::Safetensors:
      throw Error(path + ": a .safetensors file needs its config.json: give the folder (" +
                  fs::path(path).parent_path().string() + ")");
    case ModelPathKind::ConfigJson:
      m.format = "config.json";
      m.config = ModelConfig::from_hf_json(read_text_file(path), path);
      break;
  }
  return m;
}

}  // namespace

PlanModel open_plan_model(const std::string& spec, const std::string& revision) {
  const hub::ModelSpec parsed = hub::parse_model_spec(spec);
  if (parsed.kind == hub::ModelSpec::Kind::LocalPath) return open_local(spec, parsed.path);
  hub::HubSettings settings = hub::HubSettings::from_env();
  if (parsed.kind != hub::ModelSpec::Kind::Repo) {
    // A GGUF's types are in its header, which the hub's listing does not give; a cached file
    // has it.
    hub::HubSettings cache_only = settings;
    cache_only.offline = true;
    std::string path;
    try {
      path = hub::resolve_model(spec, {revision, hub::RepoFiles::All}, cache_only);
    } catch (const Error& e) {
      throw Error(
          spec +
          ": tern plan reads a GGUF's tensor types from its header and downloads no weights; this "
          "file is not in the Hugging Face cache (" +
          std::string(e.what()) + "). Download it once (tern inspect " + spec +
          "), or plan the repository's config.json");
    }
    PlanModel m = open_local(spec, path);
    return m;
  }
  const hub::HubModelInfo info = hub::fetch_config_and_sizes(parsed.repo, revision, settings);
  PlanModel m;
  m.name = spec;
  m.format = "Hugging Face config.json";
  m.config = ModelConfig::from_hf_json(read_text_file(info.config.string()), spec + "/config.json");
  uint64_t bytes = 0;
  bool any = false;
  for (const auto& [file, size] : info.file_sizes) {
    if (file.find('/') != std::string::npos || !file.ends_with(".safetensors")) continue;
    bytes += size;
    any = true;
  }
  if (any) m.repo_weight_bytes = bytes;
  return m;
}

}  // namespace tern::plan
