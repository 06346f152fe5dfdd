// One benchmark request against an OpenAI-compatible server: its JSON body, and the reading
// of its streamed reply into a RequestRecord with vLLM's timing rules
// (vllm/benchmarks/lib/endpoint_request_func.py).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tern/bench/metrics.h"
#include "tern/bench/sse_parser.h"

namespace tern::bench {

enum class Endpoint { kCompletions, kChatCompletions };

// "/v1/completions" → kCompletions, "/v1/chat/completions" → kChatCompletions (by suffix, as
// vLLM checks); tern::Error for anything else.
Endpoint endpoint_of(std::string_view path);
// vLLM's name for the backend of that endpoint: "openai" or "openai-chat".
const char* backend_name(Endpoint endpoint);

struct RequestBodyOptions {
  std::string model;
  bool ignore_eos = false;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
};

// Completions: {model, prompt, repetition_penalty: 1.0, max_tokens, stream, stream_options};
// chat: {model, messages: [{role: user, content: prompt}], max_completion_tokens, ...}; plus
// vLLM's extra "ignore_eos" when asked and the sampling fields that are set.
std::string request_body(Endpoint endpoint, const RequestBodyOptions& options,
                         const std::string& prompt, int64_t max_tokens);

// Reads one streamed reply. Every event whose JSON has a non-empty "choices" is a token chunk:
// the first sets TTFT, each later one adds an ITL (time since the previous token chunk), and
// the last ends the request's latency. A "usage" object gives completion_tokens (and
// prompt_tokens). An "error" object or data that is not JSON fails the request. A reply
// without any token chunk fails too ("never received a valid chunk").
class ResponseStream {
 public:
  ResponseStream(Endpoint endpoint, double start_time, int64_t prompt_len);

  // `now` is when the bytes arrived, in the same clock as start_time.
  void on_bytes(std::string_view bytes, double now);
  // The body ended cleanly; decides success.
  void on_end(double now);
  // A transport or HTTP failure: the request failed with this text.
  void fail(std::string error);

  const RequestRecord& record() const { return record_; }
  RequestRecord take_record() { return std::move(record_); }

 private:
  void on_event(const std::string& data, double now);

  Endpoint endpoint_;
  SseParser parser_;
  RequestRecord record_;
  double start_ = 0;
  double last_token_time_ = 0;
  bool got_token_ = false;
  bool failed_ = false;
};

}  // namespace tern::bench
