// One tensor of a model file, as every reader (GGUF, safetensors) describes it: the loader
// of weights sees only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tern/core/dtype.h"

namespace tern {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  // Outermost dimension first (row-major, as numpy and safetensors write it): a weight of
  // N output rows by K inputs has shape {N, K}. GGUF stores ggml's ne[] innermost first
  // (ne = [K, N]); its reader reverses it.
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file's tensor-data section
  uint64_t nbytes = 0;
  const std::byte* data = nullptr;  // into the mapping; valid while the file object lives

  uint64_t nelements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

// "[2, 3]": a shape as error messages print it.
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace tern
