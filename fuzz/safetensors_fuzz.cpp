// libFuzzer target: any byte string is parsed as a safetensors file; it must either parse or
// throw tern::Error, and every tensor of a parsed file must lie inside it (ASan checks the
// reads of each tensor's first and last byte).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tern/core/error.h"
#include "tern/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  auto file = std::make_shared<const tern::MappedFile>("fuzz.safetensors", std::move(bytes));
  try {
    auto st = tern::SafetensorsFile::parse(file);
    volatile uint8_t sink = 0;
    for (const auto& t : st.tensors()) {
      if (st.data_offset() + t.offset + t.nbytes > file->size()) __builtin_trap();
      if (t.nbytes > 0) {
        sink = sink ^ static_cast<uint8_t>(t.data[0]);
        sink = sink ^ static_cast<uint8_t>(t.data[t.nbytes - 1]);
      }
      if (st.find_tensor(t.name) != &t) __builtin_trap();
    }
    for (const auto& [key, value] : st.metadata())
      sink = sink ^ static_cast<uint8_t>(key.size() + value.size());
  } catch (const tern::Error&) {
  }
  return 0;
}
