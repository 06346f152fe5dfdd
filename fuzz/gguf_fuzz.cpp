// libFuzzer target for the GGUF reader: any input either parses or throws tern::Error, and a
// file that parses has every value displayable and every tensor's bytes inside the input. Small
// inputs that parse are also written back and re-read, and must come back the same. A file that
// parses is then read as a model: its config and its weights' views (shapes, types, experts)
// either bind or throw tern::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/formats/model_config.h"
#include "tern/models/weight_loader.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "gguf_fuzz: %s\n", what);
  std::abort();
}

void round_trip(const tern::GgufFile& f) try {
  tern::GgufWriter w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const auto& t : f.tensors()) w.add_tensor(t.name, t.dtype, t.shape, {t.data, t.nbytes});
  std::vector<std::byte> bytes = w.to_bytes();
  auto g = tern::GgufFile::parse(std::make_shared<const tern::MappedFile>("again.gguf", bytes));
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size())
    die("round trip changed the counts");
  if (g.alignment() != f.alignment()) die("round trip changed the alignment");
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const auto& [k1, v1] = f.metadata()[i];
    const auto& [k2, v2] = g.metadata()[i];
    if (k1 != k2 || v1.type != v2.type || v1.to_display(SIZE_MAX) != v2.to_display(SIZE_MAX))
      die("round trip changed a metadata value");
  }
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = g.tensors()[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.nbytes != b.nbytes ||
        std::memcmp(a.data, b.data, a.nbytes) != 0)
      die("round trip changed a tensor");
  }
} catch (const tern::Error& e) {
  // What the reader accepts, the writer must write and the reader read again.
  std::fprintf(stderr, "gguf_fuzz: round trip failed: %s\n", e.what());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  auto file =
      std::make_shared<const tern::MappedFile>("fuzz.gguf", std::vector<std::byte>(p, p + size));
  try {
    tern::GgufFile f = tern::GgufFile::parse(file);
    size_t sink = 0;
    for (const auto& [key, value] : f.metadata()) sink += key.size() + value.to_display().size();
    const std::byte* begin = file->data();
    const std::byte* end = begin + file->size();
    for (const auto& t : f.tensors()) {
      if (t.nbytes == 0 || t.data < begin || t.data + t.nbytes > end)
        die("tensor outside the file");
      sink += static_cast<size_t>(t.data[0]) + static_cast<size_t>(t.data[t.nbytes - 1]);
    }
    // The typed getters either answer or throw tern::Error.
    for (const char* key : {"general.architecture", "general.alignment", "tokenizer.ggml.tokens",
                            "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      try {
        sink += f.get_string(key).value_or("").size();
      } catch (const tern::Error&) {
      }
      try {
        sink += static_cast<size_t>(f.get_int(key).value_or(0));
      } catch (const tern::Error&) {
      }
      try {
        sink += static_cast<size_t>(f.get_float(key).value_or(0.0) != 0.0);
      } catch (const tern::Error&) {
      }
      try {
        if (auto v = f.get_string_array(key)) sink += v->size();
      } catch (const tern::Error&) {
      }
      try {
        if (auto v = f.get_float_array(key)) sink += v->size();
      } catch (const tern::Error&) {
      }
      try {
        if (auto v = f.get_int_array(key)) sink += v->size();
      } catch (const tern::Error&) {
      }
    }
    try {
      const tern::ModelConfig config = tern::ModelConfig::from_gguf(f);
      const tern::ModelWeights weights = tern::load_gguf_weights(f, config);
      sink += weights.layers.size();
    } catch (const tern::Error&) {
    }
    volatile size_t keep = sink;
    (void)keep;
    if (size <= 64 * 1024) round_trip(f);
  } catch (const tern::Error&) {
  }
  return 0;
}
