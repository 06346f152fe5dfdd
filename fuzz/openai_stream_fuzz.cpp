// libFuzzer target for the serving benchmark's stream reading: any bytes, split anywhere, give
// the same SSE events and the same request record as the bytes read whole, and never crash or
// throw (a bad stream is a failed request, not an exception).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tern/bench/openai_stream.h"
#include "tern/bench/sse_parser.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "openai_stream_fuzz: %s\n", what);
  std::abort();
}

std::vector<std::string> events_of(std::string_view a, std::string_view b) {
  tern::bench::SseParser p;
  std::vector<std::string> out = p.feed(a);
  for (auto& e : p.feed(b)) out.push_back(std::move(e));
  for (auto& e : p.finish()) out.push_back(std::move(e));
  return out;
}

tern::bench::RequestRecord record_of(tern::bench::Endpoint endpoint, std::string_view a,
                                     std::string_view b) {
  tern::bench::ResponseStream s(endpoint, 0.0, 1);
  s.on_bytes(a, 1.0);
  s.on_bytes(b, 1.0);  // one timestamp: the split must change nothing at all
  s.on_end(1.0);
  return s.take_record();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint =
      (data[0] & 1) ? tern::bench::Endpoint::kChatCompletions : tern::bench::Endpoint::kCompletions;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t cut = bytes.empty() ? 0 : (data[0] >> 1) % (bytes.size() + 1);
  const std::string_view a = bytes.substr(0, cut), b = bytes.substr(cut);
  if (events_of(a, b) != events_of(bytes, {})) die("split changed the SSE events");
  const auto split = record_of(endpoint, a, b);
  const auto whole = record_of(endpoint, bytes, {});
  if (split.success != whole.success || split.error != whole.error ||
      split.generated_text != whole.generated_text || split.output_tokens != whole.output_tokens ||
      split.prompt_len != whole.prompt_len || split.itl.size() != whole.itl.size())
    die("split changed the request record");
  if (whole.success && whole.ttft != 1.0) die("TTFT of a successful stream is off");
  return 0;
}
