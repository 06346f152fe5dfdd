// The request bodies of tern router's two-step prefill/decode flow (vLLM's disaggregated
// serving contract), and the prompt text the prefix-aware policy keys on. Pure functions of the
// client's JSON, so that they are unit-tested and fuzzed apart from any HTTP.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tern::router {

enum class Endpoint { Completions, ChatCompletions };

// The client's body: a JSON object (keys kept in order, so that a rewritten body reads like the
// client's). Throws server::ApiError 400 otherwise.
nlohmann::ordered_json parse_client_body(std::string_view body);

// Step 1, to the prefill instance: the client's body with max_tokens 1 (chat: also
// max_completion_tokens 1), stream false, no stream_options, n or min_tokens, and
// "kv_transfer_params": {"do_remote_decode": true}.
std::string prefill_body(const nlohmann::ordered_json& client_body, Endpoint endpoint);

// The prefill instance's kv_transfer_params (a top-level object of its JSON answer), as is;
// none when the answer is not JSON or has no such object.
std::optional<nlohmann::ordered_json> kv_transfer_params_of(std::string_view prefill_answer);

// Step 2, to the decode instance: the client's body plus "kv_transfer_params": `params`.
std::string decode_body(nlohmann::ordered_json client_body, const nlohmann::ordered_json& params);

// What the prefix-aware policy keys on: a completion's prompt text (other prompt shapes as
// JSON), or a chat's messages rendered one JSON object after another, so that a conversation's
// earlier turns are a text prefix of its later requests. Empty when the body has neither.
std::string prompt_key(const nlohmann::ordered_json& client_body, Endpoint endpoint);

// Counting a prompt's tokens for --disagg-min-prompt-tokens. A completion's prompt of token ids
// counts itself; a string prompt or a chat is counted by a backend's POST /tokenize, whose body
// is tokenize_body's (a chat's messages, tools and template arguments: tern serve renders them
// as the generation will). None: the body's prompt is of a shape neither takes (several
// prompts, no prompt), and the request goes the two-step way, which reports what is wrong.
std::optional<size_t> prompt_ids_count(const nlohmann::ordered_json& client_body,
                                       Endpoint endpoint);
std::optional<std::string> tokenize_body(const nlohmann::ordered_json& client_body,
                                         Endpoint endpoint);
// The "count" of a /tokenize answer; none when it has none.
std::optional<size_t> tokenize_count_of(std::string_view tokenize_answer);

// JSON text that never throws on invalid UTF-8 in strings (it is replaced).
std::string dump_lossy(const nlohmann::ordered_json& j);

}  // namespace tern::router
