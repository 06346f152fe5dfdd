#include "tern/models/model_path.h"

#include <filesystem>
#include <fstream>
#include <string_view>

#include "tern/core/error.h"

namespace tern {
namespace fs = std::filesystem;

ModelPathKind model_path_kind(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ModelPathKind::Folder;
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": no such file or folder");
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  if (f.read(magic, 4) && std::string_view(magic, 4) == "GGUF") return ModelPathKind::Gguf;
  const fs::path p(path);
  if (p.extension() == ".safetensors" || p.filename() == "model.safetensors.index.json")
    return ModelPathKind::Safetensors;
  if (p.extension() == ".json") return ModelPathKind::ConfigJson;
  throw Error(path +
              ": not a model: neither a GGUF file (no GGUF magic), a .safetensors file, a "
              "Hugging Face folder nor a config.json");
}

}  // namespace tern
