// Fuzzes the GBNF parser and the grammar lowering: any bytes give a grammar or a tern::Error;
// a grammar's automaton then walks the input's own bytes without crashing, and a state it
// reaches keeps its flags consistent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/core/error.h"
#include "tern/structured/automaton.h"
#include "tern/structured/gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    tern::structured::Automaton a(tern::structured::flatten(tern::structured::parse_gbnf(text)));
    int32_t s = a.start();
    for (size_t i = 0; i < size && i < 256 && s >= 0; ++i) {
      s = a.next(s, data[i]);
      if (s >= 0 && !a.accepting(s) && !a.can_continue(s))
        __builtin_trap();  // a live state goes somewhere
    }
  } catch (const tern::Error&) {
  }
  return 0;
}
