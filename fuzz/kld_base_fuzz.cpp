// libFuzzer target for the KL-divergence base file reader: any input either parses or throws
// tern::Error, and a file that parses has every token inside its vocabulary and every
// log-probability row inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tern/core/error.h"
#include "tern/eval/kld_base_file.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "kld_base_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  auto file =
      std::make_shared<const tern::MappedFile>("fuzz.kld", std::vector<std::byte>(p, p + size));
  try {
    const tern::KldBaseFile base(file);
    const tern::EvalWindows& w = base.windows();
    if (w.ctx < tern::kMinEvalContext || w.num_windows() < 1) die("accepted an empty layout");
    if (w.bos < -1 || w.bos >= base.vocab_size()) die("BOS outside the vocabulary");
    for (int32_t t : w.tokens)
      if (t < 0 || t >= base.vocab_size()) die("token outside the vocabulary");
    const std::byte* begin = file->data();
    const std::byte* end = begin + file->size();
    float sink = 0;
    for (int64_t win : {int64_t{0}, w.num_windows() - 1}) {
      for (int64_t k : {int64_t{0}, w.scored_per_window() - 1}) {
        const std::span<const float> row = base.log_probs(win, k);
        const auto* first = reinterpret_cast<const std::byte*>(row.data());
        if (first < begin || first + row.size_bytes() > end) die("row outside the file");
        sink += row.front() + row.back();
      }
    }
    volatile float keep = sink;
    (void)keep;
  } catch (const tern::Error&) {
  }
  return 0;
}
