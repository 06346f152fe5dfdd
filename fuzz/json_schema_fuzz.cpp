// Fuzzes the JSON-schema compiler: any bytes give a grammar or a tern::Error (invalid JSON,
// an unsupported keyword, a bad $ref); a compiled schema's automaton walks the input's bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/core/error.h"
#include "tern/structured/automaton.h"
#include "tern/structured/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    tern::structured::Automaton a(
        tern::structured::flatten(tern::structured::compile_json_schema_text(text)));
    int32_t s = a.start();
    for (size_t i = 0; i < size && i < 256 && s >= 0; ++i) s = a.next(s, data[i]);
  } catch (const tern::Error&) {
  }
  return 0;
}
