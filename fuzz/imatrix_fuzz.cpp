// libFuzzer target for the importance-matrix reader: any input either parses or throws
// tern::Error, a matrix that parses writes back and re-reads to the same entries, and its
// second moments give a GPTQ factor or a tern::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tern/core/error.h"
#include "tern/quant/gptq.h"
#include "tern/quant/importance_matrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  tern::ImportanceMatrix m;
  try {
    m = tern::ImportanceMatrix::parse(
        std::make_shared<const tern::MappedFile>("fuzz.imatrix", std::move(bytes)));
  } catch (const tern::Error&) {
    return 0;
  }
  for (const auto& [name, e] : m.entries) {
    (void)m.importance(name);
    const std::vector<float> moments = m.second_moments(name);
    try {
      if (!moments.empty()) (void)tern::quant::GptqFactor::of(moments, e.cols());
    } catch (const tern::Error&) {
      // Sums that are no second moments (not positive definite).
    }
  }
  try {
    const tern::ImportanceMatrix back = tern::ImportanceMatrix::parse(
        std::make_shared<const tern::MappedFile>("again.imatrix", m.to_bytes()));
    if (back.entries.size() != m.entries.size()) {
      std::fprintf(stderr, "imatrix_fuzz: round trip changed the entry count\n");
      std::abort();
    }
  } catch (const tern::Error&) {
    // A name too long for a tensor once suffixed, or a count past u32: the writer refuses it.
  }
  return 0;
}
