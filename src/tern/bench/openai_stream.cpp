// Request bodies and streamed-reply reading for OpenAI completions and chat completions.
#include "tern/bench/openai_stream.h"

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/utf8.h"

namespace tern::bench {

Endpoint endpoint_of(std::string_view path) {
  if (path.ends_with("chat/completions")) return Endpoint::kChatCompletions;
  if (path.ends_with("completions")) return Endpoint::kCompletions;
  throw Error("--endpoint '" + std::string(path) +
              "': expected an OpenAI completions endpoint (/v1/completions or "
              "/v1/chat/completions)");
}

const char* backend_name(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "openai-chat" : "openai";
}

std::string request_body(Endpoint endpoint, const RequestBodyOptions& o, const std::string& prompt,
                         int64_t max_tokens) {
  nlohmann::json body;
  body["model"] = o.model;
  if (endpoint == Endpoint::kCompletions) {
    body["prompt"] = prompt;
    body["repetition_penalty"] = 1.0;
    body["max_tokens"] = max_tokens;
  } else {
    // A plain string content: every OpenAI-compatible server reads it (vLLM sends the
    // equivalent one-part list).
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
    body["max_completion_tokens"] = max_tokens;
  }
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  if (o.temperature) body["temperature"] = *o.temperature;
  if (o.top_p) body["top_p"] = *o.top_p;
  if (o.top_k) body["top_k"] = *o.top_k;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ResponseStream::ResponseStream(Endpoint endpoint, double start_time, int64_t prompt_len)
    : endpoint_(endpoint), start_(start_time), last_token_time_(start_time) {
  record_.start_time = start_time;
  record_.prompt_len = prompt_len;
}

void ResponseStream::on_bytes(std::string_view bytes, double now) {
  for (const std::string& event : parser_.feed(bytes)) on_event(event, now);
}

void ResponseStream::on_end(double now) {
  for (const std::string& event : parser_.finish()) on_event(event, now);
  if (failed_) return;
  if (!got_token_) {
    fail("Never received a valid chunk to calculate TTFT.");
    return;
  }
  record_.success = true;
  record_.latency = last_token_time_ - start_;
  record_.generated_text = sanitize_utf8(record_.generated_text);
}

void ResponseStream::fail(std::string error) {
  if (failed_) return;  // the first reason is the one worth reporting
  failed_ = true;
  record_.success = false;
  record_.error = sanitize_utf8(error);
}

void ResponseStream::on_event(const std::string& data, double now) {
  if (failed_ || data == "[DONE]") return;
  nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    fail("the server streamed data that is not a JSON object: " + data.substr(0, 200));
    return;
  }
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    const nlohmann::json& e = *it;
    std::string message = e.is_object() && e.contains("message") && e["message"].is_string()
                              ? e["message"].get<std::string>()
                              : e.dump();
    fail("the server streamed an error: " + message);
    return;
  }
  if (auto it = chunk.find("choices"); it != chunk.end() && it->is_array() && !it->empty()) {
    // A chunk with a choice counts as a token even when its text is empty (a special token).
    if (!got_token_) {
      got_token_ = true;
      record_.ttft = now - start_;
    } else {
      record_.itl.push_back(now - last_token_time_);
    }
    last_token_time_ = now;
    const nlohmann::json& choice = (*it)[0];
    const nlohmann::json* text = nullptr;
    if (endpoint_ == Endpoint::kCompletions) {
      if (choice.contains("text")) text = &choice["text"];
    } else if (choice.contains("delta") && choice["delta"].is_object() &&
               choice["delta"].contains("content")) {
      text = &choice["delta"]["content"];
    }
    if (text != nullptr && text->is_string()) record_.generated_text += text->get<std::string>();
    return;
  }
  if (auto it = chunk.find("usage"); it != chunk.end() && it->is_object()) {
    const nlohmann::json& usage = *it;
    if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer())
      record_.output_tokens = usage["completion_tokens"].get<int64_t>();
    if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer())
      record_.prompt_len = usage["prompt_tokens"].get<int64_t>();
  }
}

}  // namespace tern::bench
