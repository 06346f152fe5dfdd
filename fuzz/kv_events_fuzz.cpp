// Fuzzes what a KV events publisher reads from outside: --kv-events-config (any bytes give a
// config within vLLM's ranges or a tern::Error) and replay requests on its ROUTER socket (any
// frames give a start sequence only in the one valid shape). The first byte picks which; for a
// replay request, each frame is a length byte and that many bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/kv_events/kv_events_config.h"
#include "tern/kv_events/zmq_event_publisher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  const size_t n = size - 1;
  if (data[0] & 1) {
    try {
      const tern::kv_events::KvEventsConfig c =
          tern::kv_events::parse_kv_events_config(std::string_view(bytes, n));
      if (c.endpoint.empty() || c.buffer_steps < 1 || c.hwm < 1 || c.hwm > INT32_MAX ||
          c.max_queue_size < 1)
        __builtin_trap();
    } catch (const tern::Error&) {
    }
    return 0;
  }
  std::vector<std::string> frames;
  for (size_t i = 0; i < n;) {
    const size_t len = static_cast<unsigned char>(bytes[i++]);
    frames.emplace_back(bytes + i, std::min(len, n - i));
    i += frames.back().size();
  }
  if (tern::kv_events::parse_replay_request(frames) &&
      (frames.size() != 3 || !frames[1].empty() || frames[2].size() != 8))
    __builtin_trap();
  return 0;
}
