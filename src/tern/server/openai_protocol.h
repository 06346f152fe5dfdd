// Request bodies of the OpenAI completions and chat completions endpoints (with vLLM's extra
// sampling fields), checked and turned into what the engine runs: token prompts and one
// SamplingParams per prompt. Every problem is an ApiError (400, or 404 for an unknown model)
// whose message names the field, as vLLM answers it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tern/disagg/kv_transfer_params.h"
#include "tern/sampling/sampling_params.h"
#include "tern/server/chat_output.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {

enum class Endpoint { Completions, ChatCompletions };

// What the parsers need to know about the served model.
struct ModelContext {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: the model has none
  std::string chat_template_error;              // why there is none (shown to chat requests)
  int64_t max_model_len = 0;
  std::string max_model_len_limit;  // which limit it is (KvCachePlan::max_model_len_limit)
  std::string served_model_name;
  // tern serve --tool-call-parser, --enable-auto-tool-choice and --reasoning-parser.
  std::optional<ToolCallFormat> tool_call_parser;
  bool enable_auto_tool_choice = false;
  std::optional<ReasoningFormat> reasoning_parser;
  // With a reasoning parser: the <think> / </think> tokens (-1 when not one token each); a
  // chat request's constraint applies after the reasoning (StructuredOutputSpec).
  int32_t think_start_token = -1;
  int32_t think_end_token = -1;
};

// A chat request's tools and what it asks of them (OpenAI's tools, tool_choice,
// parallel_tool_calls), checked.
struct ToolRequest {
  enum class Choice { None, Auto, Required, Named };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as given: the template's
  Choice choice = Choice::None;
  std::string function;  // Choice::Named: its name
  bool parallel_tool_calls = true;
  // Required / Named: the JSON schema constrained decoding enforces on the output, vLLM's: an
  // array of {"name", "parameters"} objects (at most one without parallel_tool_calls), or the
  // named function's parameters.
  nlohmann::ordered_json constraint_schema;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts;  // one engine request each
  std::vector<SamplingParams> params;         // one per prompt (max_tokens may differ)
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // and .continuous_usage_stats: usage in every chunk
  int32_t n = 1;
  bool logprobs = false;  // logprobs are reported (params.logprobs set)
  // Disaggregation (vLLM's kv_transfer_params); for a request of one prompt.
  disagg::KvTransferParams kv;
  // Chat: the request's tools and how the output text splits into reasoning, content and calls.
  ToolRequest tools;
  ChatOutputOptions output;
};

// Parses the text of a request body as a JSON object; 400 when it is not one.
nlohmann::json parse_body(const std::string& body);

// 404 when `body` names a model other than the served one (a missing model is the served one).
void check_model(const nlohmann::json& body, const ModelContext& model);

GenerationRequest parse_completion_request(const std::string& body, const ModelContext& model);
// The same checks for a parsed body whose missing sampling fields take `defaults` (null:
// OpenAI's, and max_tokens what the context leaves): `tern generate --prompts` lines.
GenerationRequest parse_completion_request(const nlohmann::json& body, const ModelContext& model,
                                           const SamplingParams* defaults);
GenerationRequest parse_chat_request(const std::string& body, const ModelContext& model);

// tools / tool_choice / parallel_tool_calls of a chat body; a 400 naming the field when they
// are malformed or ask for what the server was not started for (vLLM's rules: "auto" needs
// --enable-auto-tool-choice and --tool-call-parser; "required" and a named function need no
// parser: constrained decoding writes the calls).
ToolRequest parse_tool_request(const nlohmann::ordered_json& body, const ModelContext& model);

// The chat prompt for `messages` (an OpenAI messages array): normalised content, the template
// rendered with add_generation_prompt and chat_template_kwargs, tokenized without adding BOS
// again (the template writes it) and with special tokens parsed, as vLLM does.
// The prompt text itself (the template's render), before tokenization. Assistant messages'
// tool_calls reach the template with their arguments parsed into objects, and the request's
// tools as the template's `tools`, as vLLM passes them.
std::string render_chat_prompt(const nlohmann::ordered_json& body, const ModelContext& model);
std::vector<int32_t> chat_prompt_tokens(const nlohmann::ordered_json& body,
                                        const ModelContext& model);

}  // namespace tern::server
