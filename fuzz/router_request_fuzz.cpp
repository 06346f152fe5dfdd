// libFuzzer target for what tern router parses itself: backend URLs, client bodies, the
// prefill instance's answer and /tokenize's. Any bytes give an address or a tern::Error, a 400 or a
// body, and the rewritten bodies always hold what the two-step flow promises (max_tokens 1, stream
// false, do_remote_decode; the decode body carries the params unchanged).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tern/core/error.h"
#include "tern/router/backend_pool.h"
#include "tern/router/disagg_request.h"
#include "tern/router/prompt_prefix_index.h"
#include "tern/server/api_error.h"

namespace {

using nlohmann::ordered_json;
using tern::router::Endpoint;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "router_request_fuzz: %s\n", what);
  std::abort();
}

void check_url(const std::string& text) {
  tern::router::BackendAddress a;
  try {
    a = tern::router::parse_backend_url(text);
  } catch (const tern::Error&) {
    return;
  }
  if (a.host.empty() || a.port < 1 || a.port > 65535) die("a parsed URL without host or port");
  const tern::router::BackendAddress again = tern::router::parse_backend_url(a.url);
  if (again.url != a.url || again.host != a.host || again.port != a.port)
    die("a parsed URL reads differently the second time");
}

void check_bodies(std::string_view text, Endpoint endpoint) {
  ordered_json body;
  try {
    body = tern::router::parse_client_body(text);
  } catch (const tern::server::ApiError& e) {
    if (e.status() != 400) die("a bad body that is not a 400");
    return;
  }
  const ordered_json p = ordered_json::parse(tern::router::prefill_body(body, endpoint));
  if (p.at("max_tokens") != 1 || p.at("stream") != false || p.contains("stream_options") ||
      p.at("kv_transfer_params") != ordered_json{{"do_remote_decode", true}})
    die("a prefill body breaks the two-step contract");
  if (endpoint == Endpoint::ChatCompletions && p.at("max_completion_tokens") != 1)
    die("a chat prefill body without max_completion_tokens 1");
  (void)tern::router::prefix_chain(tern::router::prompt_key(body, endpoint), 7);
  // What counts the prompt for --disagg-min-prompt-tokens: a /tokenize body is JSON with the
  // prompt or messages; the same bytes as /tokenize's answer give a count or none.
  if (const auto t = tern::router::tokenize_body(body, endpoint)) {
    const ordered_json j = ordered_json::parse(*t);
    if (!j.contains(endpoint == Endpoint::ChatCompletions ? "messages" : "prompt"))
      die("a /tokenize body without the prompt");
  }
  (void)tern::router::prompt_ids_count(body, endpoint);
  (void)tern::router::tokenize_count_of(text);
  // The same bytes as a prefill instance's answer.
  if (auto params = tern::router::kv_transfer_params_of(text)) {
    if (!params->is_object()) die("kv_transfer_params that are not an object");
    const ordered_json d = ordered_json::parse(tern::router::decode_body(body, *params));
    if (d.at("kv_transfer_params") != *params) die("the decode body changed the params");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 2)
    check_url(std::string(text));
  else
    check_bodies(text, (data[0] & 1) ? Endpoint::ChatCompletions : Endpoint::Completions);
  return 0;
}
