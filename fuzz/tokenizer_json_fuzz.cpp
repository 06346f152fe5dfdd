// Fuzzes the tokenizer.json reader; a file it accepts is then used to encode the input itself,
// so the byte-level BPE and the pre-tokenizer see whatever vocabularies the fuzzer invents.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/tokenizer/byte_level_bpe.h"
#include "tern/tokenizer/hf_tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const tern::HfTokenizerFiles files = tern::parse_tokenizer_json(text, "fuzz.json");
    if (files.kind != tern::TokenizerKind::ByteLevelBpe) return 0;
    const tern::ByteLevelBpe bpe(files.vocab, files.merges, files.byte_level);
    std::vector<int32_t> ids;
    bpe.encode(text.substr(0, 512), ids);
    for (int32_t id : ids)
      if (id < 0 || id >= files.vocab.size()) __builtin_trap();
  } catch (const tern::Error&) {
  }
  return 0;
}
