// Which request fields tern acts on, per endpoint (the OpenAI references' and vLLM's extras'):
// a field it does not act on is a 400 that names it, never ignored, since a client that asked
// for JSON or tool calls and silently got prose is broken without knowing it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/server/openai_protocol.h"

namespace tern::server {

// Throws ApiError(400, param = the field) for the first field of `body` that tern does not act
// on: a known OpenAI or vLLM field it has not implemented ("tern does not support 'tools'"),
// or one neither reference has ("unknown field"). A null value, and for the unsupported ones a
// value that asks for nothing (an empty list or object, tool_choice "none"), pass.
void check_request_fields(const nlohmann::json& body, Endpoint endpoint);

// The fields POST /tokenize acts on (vLLM's TokenizeCompletionRequest and TokenizeChatRequest,
// less what tern does not implement); tern router sends a chat's to count its tokens.
const std::vector<std::string>& tokenize_prompt_fields();
const std::vector<std::string>& tokenize_chat_fields();

// The same for a route with a short list of fields (/tokenize, /detokenize): a field not in
// `acted_on` (a null one passes) is a 400 naming it and the route.
void check_route_fields(const nlohmann::json& body, const std::vector<std::string>& acted_on,
                        const std::string& route);

}  // namespace tern::server
