// The two-step flow's bodies (see disagg_request.h).
#include "tern/router/disagg_request.h"

#include "tern/server/api_error.h"
#include "tern/server/request_fields.h"

namespace tern::router {

using nlohmann::ordered_json;

std::string dump_lossy(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json parse_client_body(std::string_view body) {
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw server::ApiError(400, "the request body is not valid JSON");
  if (!j.is_object()) throw server::ApiError(400, "the request body must be a JSON object");
  return j;
}

std::string prefill_body(const ordered_json& client_body, Endpoint endpoint) {
  ordered_json b = client_body;
  b["max_tokens"] = 1;
  if (endpoint == Endpoint::ChatCompletions) b["max_completion_tokens"] = 1;
  b["stream"] = false;
  b.erase("stream_options");
  // One token of one completion: the decode instance computes the prompt's last token itself
  // and samples all n completions there; a min_tokens over 1 could not be met.
  b.erase("n");
  b.erase("min_tokens");
  b["kv_transfer_params"] = {{"do_remote_decode", true}};
  return dump_lossy(b);
}

std::optional<ordered_json> kv_transfer_params_of(std::string_view prefill_answer) {
  ordered_json j = ordered_json::parse(prefill_answer, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find("kv_transfer_params");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  return std::move(*it);
}

std::string decode_body(ordered_json client_body, const ordered_json& params) {
  client_body["kv_transfer_params"] = params;
  return dump_lossy(client_body);
}

std::optional<size_t> prompt_ids_count(const ordered_json& client_body, Endpoint endpoint) {
  if (endpoint != Endpoint::Completions) return std::nullopt;
  const auto it = client_body.find("prompt");
  if (it == client_body.end() || !it->is_array() || it->empty()) return std::nullopt;
  for (const ordered_json& id : *it)
    if (!id.is_number_integer()) return std::nullopt;
  return it->size();
}

std::optional<std::string> tokenize_body(const ordered_json& client_body, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  if (chat && !client_body.contains("messages")) return std::nullopt;
  const auto prompt = client_body.find("prompt");
  if (!chat && (prompt == client_body.end() || !prompt->is_string())) return std::nullopt;
  // Only what /tokenize acts on: it refuses the rest (max_tokens, stream…) by name.
  ordered_json b = ordered_json::object();
  for (const std::string& key :
       chat ? server::tokenize_chat_fields() : server::tokenize_prompt_fields())
    if (const auto it = client_body.find(key); it != client_body.end()) b[key] = *it;
  return dump_lossy(b);
}

std::optional<size_t> tokenize_count_of(std::string_view tokenize_answer) {
  const ordered_json j = ordered_json::parse(tokenize_answer, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find("count");
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<size_t>();
}

std::string prompt_key(const ordered_json& client_body, Endpoint endpoint) {
  if (endpoint == Endpoint::Completions) {
    const auto it = client_body.find("prompt");
    if (it == client_body.end()) return {};
    return it->is_string() ? it->get<std::string>() : dump_lossy(*it);
  }
  const auto it = client_body.find("messages");
  if (it == client_body.end()) return {};
  if (!it->is_array()) return dump_lossy(*it);
  std::string key;
  for (const ordered_json& m : *it) {
    key += dump_lossy(m);
    key += '\n';
  }
  return key;
}

}  // namespace tern::router
