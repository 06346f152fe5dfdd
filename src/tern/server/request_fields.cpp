// The tables behind check_request_fields; README's "Request fields" lists the same.
#include "tern/server/request_fields.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "tern/core/did_you_mean.h"
#include "tern/server/api_error.h"

namespace tern::server {
namespace {

using nlohmann::json;

// Acted on by both endpoints (parse_completion_request / parse_chat_request and
// update_sampling_params read them). `user` names the end user and asks for nothing.
constexpr std::array kCommon = {
    "model",
    "n",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "max_tokens",
    "min_tokens",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "include_stop_str_in_output",
    "skip_special_tokens",
    "stream",
    "stream_options",
    "kv_transfer_params",
    "user",
    // Constrained decoding (structured::structured_output_from_request).
    "response_format",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "structured_outputs",
    "grammar",
    "json_schema",
};
constexpr std::array kCompletions = {"prompt", "logprobs", "echo", "best_of",
                                     "max_completion_tokens"};
constexpr std::array kChat = {"messages",
                              "logprobs",
                              "top_logprobs",
                              "max_completion_tokens",
                              "chat_template_kwargs",
                              "add_generation_prompt",
                              "echo",
                              "store",
                              "tools",
                              "tool_choice",
                              "parallel_tool_calls"};

// Known (OpenAI's or vLLM's) and not implemented.
constexpr std::array kUnsupportedCompletions = {
    "suffix",
    "logit_bias",
};
constexpr std::array kUnsupportedChat = {
    "functions",
    "function_call",
    "logit_bias",
    "audio",
    "modalities",
    "prediction",
    "reasoning_effort",
    "web_search_options",
    "metadata",
    "service_tier",
    "documents",
    "chat_template",
    "continue_final_message",
};
// vLLM's extra parameters of both endpoints.
constexpr std::array kUnsupportedVllm = {
    "guided_decoding_backend",
    "guided_whitespace_pattern",
    "prompt_logprobs",
    "allowed_token_ids",
    "bad_words",
    "truncate_prompt_tokens",
    "length_penalty",
    "use_beam_search",
    "spaces_between_special_tokens",
    "add_special_tokens",
    "return_tokens_as_token_ids",
    "priority",
    "logits_processors",
    "cache_salt",
    "vllm_xargs",
    "request_id",
    "mm_processor_kwargs",
    "return_token_ids",
};

template <size_t N>
bool in(const std::array<const char*, N>& names, std::string_view key) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return key == n; });
}

// A value that asks for nothing: no tools, no bias, no tool call.
bool asks_nothing(std::string_view key, const json& v) {
  if ((v.is_array() || v.is_object()) && v.empty()) return true;
  if (key == "tool_choice") return v == "none";
  if (key == "parallel_tool_calls") return v.is_boolean();  // meaningless without tools
  return false;
}

}  // namespace

void check_request_fields(const json& body, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  for (const auto& [key, v] : body.items()) {
    if (v.is_null() || in(kCommon, key) || (chat ? in(kChat, key) : in(kCompletions, key)))
      continue;
    const bool known = in(kUnsupportedVllm, key) ||
                       (chat ? in(kUnsupportedChat, key) : in(kUnsupportedCompletions, key));
    if (known && asks_nothing(key, v)) continue;
    if (known)
      throw ApiError(400,
                     "tern does not support '" + key +
                         "' (it would be ignored; see README, "
                         "\"Request fields\")",
                     key);
    std::vector<std::string> names(kCommon.begin(), kCommon.end());
    if (chat)
      names.insert(names.end(), kChat.begin(), kChat.end());
    else
      names.insert(names.end(), kCompletions.begin(), kCompletions.end());
    throw ApiError(400,
                   "unknown field '" + key + "' for " +
                       (chat ? "/v1/chat/completions" : "/v1/completions") +
                       did_you_mean(key, names),
                   key);
  }
  if (chat)
    if (const auto it = body.find("store"); it != body.end() && *it == true)
      throw ApiError(400, "tern stores no completions: 'store' must be false", "store");
  if (chat)
    if (const auto it = body.find("echo"); it != body.end() && *it == true)
      throw ApiError(400, "tern does not support 'echo'", "echo");
}

const std::vector<std::string>& tokenize_prompt_fields() {
  static const std::vector<std::string> k = {"model", "prompt", "add_special_tokens"};
  return k;
}

const std::vector<std::string>& tokenize_chat_fields() {
  static const std::vector<std::string> k = {"model", "messages", "add_generation_prompt",
                                             "chat_template_kwargs", "tools"};
  return k;
}

void check_route_fields(const json& body, const std::vector<std::string>& acted_on,
                        const std::string& route) {
  for (const auto& [key, v] : body.items())
    if (!v.is_null() && std::find(acted_on.begin(), acted_on.end(), key) == acted_on.end())
      throw ApiError(400, "unknown field '" + key + "' for " + route + did_you_mean(key, acted_on),
                     key);
}

}  // namespace tern::server
