#include "tern/server/openai_protocol.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/sampling/sampling_params_json.h"
#include "tern/server/api_error.h"
#include "tern/server/request_fields.h"
#include "tern/structured/structured_outputs.h"

namespace tern::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw ApiError(400, std::string("'") + name + "' must be true or false", name);
  return v->get<bool>();
}

std::vector<int32_t> token_list(const json& ids, const Tokenizer& tok) {
  std::vector<int32_t> out;
  for (const json& id : ids) {
    if (!id.is_number_integer())
      throw ApiError(400, "'prompt' token ids must be integers", "prompt");
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= tok.vocab_size())
      throw ApiError(400,
                     "token id " + std::to_string(v) +
                         " in 'prompt' is outside the vocabulary (0 to " +
                         std::to_string(tok.vocab_size() - 1) + ")",
                     "prompt");
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

bool is_token_list(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& x : v)
    if (!x.is_number()) return false;
  return true;
}

// Completions: a string, a list of token ids, a list of strings or a list of token-id lists.
std::vector<std::vector<int32_t>> completion_prompts(const json& body, const Tokenizer& tok) {
  const json* prompt = field(body, "prompt");
  if (!prompt) throw ApiError(400, "'prompt' is required", "prompt");
  const char* shape =
      "'prompt' must be a string, a list of token ids, a list of strings or a list of lists of "
      "token ids";
  std::vector<std::vector<int32_t>> out;
  if (prompt->is_string()) {
    out.push_back(tok.encode(prompt->get<std::string>()));
  } else if (is_token_list(*prompt)) {
    out.push_back(token_list(*prompt, tok));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const json& p : *prompt) {
      if (p.is_string())
        out.push_back(tok.encode(p.get<std::string>()));
      else if (is_token_list(p))
        out.push_back(token_list(p, tok));
      else
        throw ApiError(400, shape, "prompt");
    }
  } else {
    throw ApiError(400, shape, "prompt");
  }
  return out;
}

// Sampling fields common to both endpoints; `max_tokens_given` says whether the request set one.
// `defaults` (null: OpenAI's) are what the fields the body lacks take, max_tokens included.
SamplingParams sampling_params(const json& body, bool& max_tokens_given, const ModelContext& model,
                               const SamplingParams* defaults = nullptr) {
  SamplingParams p = defaults ? *defaults : SamplingParams{};
  try {
    update_sampling_params(p, body);
  } catch (const structured::ConstraintFieldError& e) {
    throw ApiError(400, e.what(), e.field());
  } catch (const Error& e) {
    throw bad_request_from(e);
  }
  for (int32_t id : p.stop_token_ids)
    if (id < 0 || id >= model.tokenizer->vocab_size())
      throw ApiError(400,
                     "token id " + std::to_string(id) +
                         " in 'stop_token_ids' is outside the vocabulary (0 to " +
                         std::to_string(model.tokenizer->vocab_size() - 1) + ")",
                     "stop_token_ids");
  max_tokens_given = defaults || field(body, "max_tokens") != nullptr;
  // Until the prompt is known, check the ranges with the largest max_tokens it could get.
  if (!max_tokens_given) p.max_tokens = static_cast<int32_t>(model.max_model_len);
  try {
    p.validate();
  } catch (const Error& e) {
    throw bad_request_from(e);
  }
  return p;
}

// vLLM's default max_tokens of a completion (CompletionRequest.max_tokens); a chat's is what the
// context leaves.
constexpr int32_t kCompletionDefaultMaxTokens = 16;

// "This model's maximum context length is N tokens (the model's)": vLLM's words, then which
// limit it is, since --max-model-len or the KV cache may set it below the model's.
std::string context_length_is(const ModelContext& model) {
  std::string s =
      "This model's maximum context length is " + std::to_string(model.max_model_len) + " tokens";
  if (!model.max_model_len_limit.empty()) s += " (" + model.max_model_len_limit + ")";
  return s;
}

// One SamplingParams per prompt: vLLM's default max_tokens (16 for a completion, capped to what
// the context leaves; what it leaves for a chat) and its context-length checks and messages.
std::vector<SamplingParams> per_prompt_params(const std::vector<std::vector<int32_t>>& prompts,
                                              const SamplingParams& base, bool max_tokens_given,
                                              Endpoint endpoint, const ModelContext& model) {
  const char* where = endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  std::vector<SamplingParams> out;
  for (const std::vector<int32_t>& prompt : prompts) {
    const int64_t len = static_cast<int64_t>(prompt.size());
    if (len == 0) throw ApiError(400, std::string("the ") + where + " is empty (no tokens)", where);
    if (len >= model.max_model_len)
      throw ApiError(400,
                     context_length_is(model) + ". However, your request has " +
                         std::to_string(len) +
                         " input tokens. Please reduce the length of the input " + where + ".",
                     where);
    SamplingParams p = base;
    if (!max_tokens_given) {
      p.max_tokens = static_cast<int32_t>(model.max_model_len - len);
      if (endpoint == Endpoint::Completions)
        p.max_tokens = std::min(p.max_tokens, kCompletionDefaultMaxTokens);
    } else if (len + p.max_tokens > model.max_model_len) {
      throw ApiError(400,
                     context_length_is(model) + ". However, you requested " +
                         std::to_string(len + p.max_tokens) + " tokens (" + std::to_string(len) +
                         " in the " + where + ", " + std::to_string(p.max_tokens) +
                         " in the completion). Please reduce the length of the " + where +
                         " or completion.",
                     where);
    }
    try {
      p.validate();  // min_tokens against the derived max_tokens
    } catch (const Error& e) {
      throw bad_request_from(e);
    }
    out.push_back(std::move(p));
  }
  return out;
}

void stream_fields(const json& body, GenerationRequest& r) {
  r.stream = flag(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object())
      throw ApiError(400, "'stream_options' must be an object", "stream_options");
    if (!r.stream)
      throw ApiError(400, "Stream options can only be defined when `stream=True`.",
                     "stream_options");
    for (const auto& [key, value] : options->items())
      if (key != "include_usage" && key != "continuous_usage_stats")
        throw ApiError(400,
                       "unknown field 'stream_options." + key +
                           "' (tern acts on include_usage and continuous_usage_stats)",
                       "stream_options");
    r.include_usage = flag(*options, "include_usage", false);
    // vLLM's: usage in every chunk, with include_usage only.
    r.continuous_usage = r.include_usage && flag(*options, "continuous_usage_stats", false);
  }
}

// vLLM's kv_transfer_params: a prefill for a decode instance answers once (not streamed), and
// the blocks it names are one prompt's.
void kv_transfer_fields(const json& body, GenerationRequest& r) {
  const json* params = field(body, "kv_transfer_params");
  if (!params) return;
  try {
    r.kv = disagg::parse_kv_transfer_params(*params);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "kv_transfer_params");
  }
  if (r.kv.empty()) return;
  if (r.prompts.size() != 1)
    throw ApiError(400, "kv_transfer_params apply to a request of one prompt",
                   "kv_transfer_params");
  if (r.kv.do_remote_decode && r.stream)
    throw ApiError(400,
                   "kv_transfer_params.do_remote_decode answers once, with the first token and "
                   "where the prompt's KV is held: set 'stream' to false",
                   "kv_transfer_params");
}

// An assistant message's tool_calls as templates read them: each call's arguments an object
// (OpenAI sends a JSON string; vLLM parses it, so that e.g. Llama 3's `arguments | tojson`
// writes it once), and null content beside calls the empty string the templates concatenate.
void normalise_tool_calls(ordered_json& m, const std::string& where) {
  const auto calls = m.find("tool_calls");
  if (calls == m.end()) return;
  if (calls->is_null()) {  // templates test `'tool_calls' in message`
    m.erase(calls);
    return;
  }
  if (!calls->is_array())
    throw ApiError(400, where + ".tool_calls must be a list of tool calls", "messages");
  for (size_t k = 0; k < calls->size(); ++k) {
    const std::string at = where + ".tool_calls[" + std::to_string(k) + "]";
    ordered_json& call = (*calls)[k];
    const auto fn = call.is_object() ? call.find("function") : call.end();
    if (fn == call.end() || !fn->is_object())
      throw ApiError(400, at + ".function must be an object", "messages");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string())
      throw ApiError(400, at + ".function.name must be a string", "messages");
    auto args = fn->find("arguments");
    if (args == fn->end() || args->is_null()) {
      (*fn)["arguments"] = ordered_json::object();
    } else if (args->is_string()) {
      ordered_json parsed = ordered_json::parse(args->get<std::string>(), nullptr, false);
      if (parsed.is_discarded())
        throw ApiError(400, at + ".function.arguments is not valid JSON", "messages");
      *args = std::move(parsed);
    } else if (!args->is_object()) {
      throw ApiError(400, at + ".function.arguments must be a JSON string", "messages");
    }
  }
  if (const auto content = m.find("content"); content == m.end() || content->is_null())
    m["content"] = "";
}

// gpt-oss's template reads an assistant turn's analysis from `thinking`, while OpenAI clients
// send back the reasoning_content tern answered with: under openai_gptoss it becomes thinking,
// as llama.cpp does. That template also renders a tool-call turn's content as its analysis and
// refuses a turn with both, so there the reasoning takes the content's place.
void reasoning_as_thinking(ordered_json& messages) {
  for (ordered_json& m : messages) {
    if (m.value("role", std::string()) != "assistant" || m.contains("thinking")) continue;
    const auto reasoning = m.find("reasoning_content");
    if (reasoning == m.end() || !reasoning->is_string()) continue;
    m["thinking"] = *reasoning;
    if (m.contains("tool_calls")) m["content"] = "";
  }
}

// The request's tools, checked: OpenAI's [{type: "function", function: {name, description,
// parameters}}]. Null when there are none.
ordered_json checked_tools(const ordered_json& body) {
  const auto tools = body.find("tools");
  if (tools == body.end() || tools->is_null()) return nullptr;
  if (!tools->is_array()) throw ApiError(400, "'tools' must be a list of tools", "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ordered_json& tool = (*tools)[i];
    if (!tool.is_object()) throw ApiError(400, at + " must be an object", "tools");
    const auto type = tool.find("type");
    if (type == tool.end() || *type != "function")
      throw ApiError(400, at + ".type must be \"function\"", "tools");
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object())
      throw ApiError(400, at + ".function must be an object", "tools");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
      throw ApiError(400, at + ".function.name is required (a non-empty string)", "tools");
    if (const auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string())
      throw ApiError(400, at + ".function.description must be a string", "tools");
    if (const auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
      throw ApiError(400, at + ".function.parameters must be a JSON schema object", "tools");
    if (const auto st = fn->find("strict"); st != fn->end() && !st->is_null() && !st->is_boolean())
      throw ApiError(400, at + ".function.strict must be true or false", "tools");
  }
  return tools->empty() ? ordered_json(nullptr) : *tools;
}

ordered_json tool_parameters(const ordered_json& tool) {
  const ordered_json& fn = tool["function"];
  const auto p = fn.find("parameters");
  return p == fn.end() || p->is_null() ? ordered_json{{"type", "object"}} : *p;
}

// OpenAI content: a string, null, or a list of parts of which tern reads the text ones (joined
// with newlines, as vLLM does).
ordered_json normalise_messages(const ordered_json& messages) {
  if (!messages.is_array())
    throw ApiError(400, "'messages' must be a list of messages", "messages");
  if (messages.empty()) throw ApiError(400, "'messages' must not be empty", "messages");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const ordered_json& m = messages[i];
    if (!m.is_object()) throw ApiError(400, where + " must be an object", "messages");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw ApiError(400, where + ".role must be a string", "messages");
    ordered_json copy = m;
    if (*role == "assistant") normalise_tool_calls(copy, where);
    const auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (const ordered_json& part : *content) {
        const auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || *type != "text" || !part.contains("text") ||
            !part["text"].is_string())
          throw ApiError(
              400, where + ".content: tern reads only parts {\"type\": \"text\", \"text\": …}",
              "messages");
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
      }
      copy["content"] = text;
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      throw ApiError(400, where + ".content must be a string, null or a list of text parts",
                     "messages");
    }
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

json parse_body(const std::string& body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

void check_model(const json& body, const ModelContext& model) {
  const json* name = field(body, "model");
  if (!name) return;
  if (!name->is_string()) throw ApiError(400, "'model' must be a string", "model");
  if (name->get<std::string>() != model.served_model_name)
    throw ApiError(404, "The model `" + name->get<std::string>() + "` does not exist.", "model");
}

GenerationRequest parse_completion_request(const std::string& text, const ModelContext& model) {
  return parse_completion_request(parse_body(text), model, nullptr);
}

GenerationRequest parse_completion_request(const json& given, const ModelContext& model,
                                           const SamplingParams* defaults) {
  check_request_fields(given, Endpoint::Completions);
  // max_completion_tokens is chat's name of max_tokens; llm-d's P/D sidecar caps the prefill
  // leg of every API with both. It wins, as in chat.
  std::optional<json> capped;
  if (const json* m = field(given, "max_completion_tokens")) {
    capped = given;
    (*capped)["max_tokens"] = *m;
  }
  const json& body = capped ? *capped : given;
  check_model(body, model);
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  stream_fields(body, r);
  if (flag(body, "echo", false)) throw ApiError(400, "tern does not support 'echo'", "echo");
  if (const json* best_of = field(body, "best_of"))
    if (!best_of->is_number_integer() || best_of->get<int64_t>() != 1)
      throw ApiError(400, "tern supports only 'best_of' = 1", "best_of");
  bool max_tokens_given = false;
  const SamplingParams base = sampling_params(body, max_tokens_given, model, defaults);
  r.prompts = completion_prompts(body, *model.tokenizer);
  r.params = per_prompt_params(r.prompts, base, max_tokens_given, r.endpoint, model);
  r.n = base.n;
  r.logprobs = base.logprobs.has_value();
  kv_transfer_fields(body, r);
  return r;
}

std::string render_chat_prompt(const ordered_json& body, const ModelContext& model) {
  const auto messages = body.find("messages");
  if (messages == body.end() || messages->is_null())
    throw ApiError(400, "'messages' is required", "messages");
  ordered_json normalised = normalise_messages(*messages);
  if (model.reasoning_parser == ReasoningFormat::GptOss) reasoning_as_thinking(normalised);
  if (!model.chat_template)
    throw ApiError(400, "the model has no usable chat template (" + model.chat_template_error +
                            "); start the server with --chat-template FILE");
  ordered_json kwargs = ordered_json::object();
  if (const auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
    if (!k->is_object())
      throw ApiError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    kwargs = *k;
  }
  // HF's apply_chat_template(tools=…): the tools as given, for the template to render.
  if (ordered_json tools = checked_tools(body); !tools.is_null())
    kwargs["tools"] = std::move(tools);
  bool add_generation_prompt = true;
  if (const auto a = body.find("add_generation_prompt"); a != body.end() && !a->is_null()) {
    if (!a->is_boolean())
      throw ApiError(400, "'add_generation_prompt' must be true or false", "add_generation_prompt");
    add_generation_prompt = a->get<bool>();
  }
  try {
    return model.chat_template->render(normalised, add_generation_prompt, kwargs);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::vector<int32_t> chat_prompt_tokens(const ordered_json& body, const ModelContext& model) {
  return model.tokenizer->encode(render_chat_prompt(body, model), /*add_special_tokens=*/false,
                                 /*parse_special=*/true);
}

ToolRequest parse_tool_request(const ordered_json& body, const ModelContext& model) {
  ToolRequest t;
  const ordered_json tools = checked_tools(body);
  if (!tools.is_null()) t.tools = tools;
  const bool has_tools = !t.tools.empty();
  t.choice = has_tools ? ToolRequest::Choice::Auto : ToolRequest::Choice::None;
  const auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (*choice == "none") {
      t.choice = ToolRequest::Choice::None;
    } else if (*choice == "auto") {
      t.choice = ToolRequest::Choice::Auto;
    } else if (*choice == "required") {
      t.choice = ToolRequest::Choice::Required;
    } else if (choice->is_object() && choice->value("type", ordered_json()) == "function" &&
               choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].value("name", ordered_json()).is_string()) {
      t.choice = ToolRequest::Choice::Named;
      t.function = (*choice)["function"]["name"].get<std::string>();
    } else {
      throw ApiError(400,
                     "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                     "\"function\", \"function\": {\"name\": …}}",
                     "tool_choice");
    }
    if (t.choice != ToolRequest::Choice::None && !has_tools)
      throw ApiError(400, "When using `tool_choice`, `tools` must be set.", "tool_choice");
  }
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean())
      throw ApiError(400, "'parallel_tool_calls' must be true or false", "parallel_tool_calls");
    t.parallel_tool_calls = p->get<bool>();
  }
  switch (t.choice) {
    case ToolRequest::Choice::None:
      break;
    case ToolRequest::Choice::Auto:
      if (!model.enable_auto_tool_choice || !model.tool_call_parser)
        throw ApiError(400,
                       "\"auto\" tool choice requires --enable-auto-tool-choice and "
                       "--tool-call-parser to be set",
                       "tool_choice");
      break;
    case ToolRequest::Choice::Required: {
      ordered_json any_of = ordered_json::array();
      for (const ordered_json& tool : t.tools)
        any_of.push_back({{"type", "object"},
                          {"properties",
                           {{"name", {{"type", "string"}, {"enum", {tool["function"]["name"]}}}},
                            {"parameters", tool_parameters(tool)}}},
                          {"required", {"name", "parameters"}}});
      t.constraint_schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
      if (!t.parallel_tool_calls) t.constraint_schema["maxItems"] = 1;
      break;
    }
    case ToolRequest::Choice::Named: {
      const auto named = std::find_if(
          t.tools.begin(), t.tools.end(),
          [&](const ordered_json& tool) { return tool["function"]["name"] == t.function; });
      if (named == t.tools.end())
        throw ApiError(400, "Tool '" + t.function + "' has not been passed in `tools`.",
                       "tool_choice");
      t.constraint_schema = tool_parameters(*named);
      break;
    }
  }
  return t;
}

namespace {

// tool_choice "required" / a named function, as vLLM enforces them: the output is constrained
// to the tool-call JSON (`tools.constraint_schema`), which takes the request's one constraint.
void enforce_tool_choice(const ToolRequest& tools, StructuredOutputSpec& constraint) {
  if (constraint.enabled())
    throw ApiError(400,
                   "tool_choice \"required\" or a named function constrains the output to the "
                   "tool call; it cannot be combined with '" +
                       constraint.field + "'",
                   constraint.field);
  constraint = {StructuredOutputSpec::Kind::kJsonSchema, tools.constraint_schema.dump(),
                "tool_choice"};
  try {
    structured::grammar_of(constraint);
  } catch (const Error& e) {
    throw ApiError(400, std::string("a tool's parameters cannot be enforced: ") + e.what(),
                   "tools");
  }
}

}  // namespace

GenerationRequest parse_chat_request(const std::string& text, const ModelContext& model) {
  json body = parse_body(text);
  check_request_fields(body, Endpoint::ChatCompletions);
  check_model(body, model);
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  stream_fields(body, r);
  // Chat's logprobs is a flag and top_logprobs the count; the sampling parser reads an integer.
  const bool logprobs = flag(body, "logprobs", false);
  std::optional<int32_t> top_logprobs;
  if (const json* top = field(body, "top_logprobs")) {
    if (!top->is_number_integer())
      throw ApiError(400, "'top_logprobs' must be an integer", "top_logprobs");
    const int64_t k = top->get<int64_t>();
    if (k < 0 || k > 20)
      throw ApiError(400, "top_logprobs must be in [0, 20], got " + std::to_string(k),
                     "top_logprobs");
    if (!logprobs)
      throw ApiError(400, "when using `top_logprobs`, `logprobs` must be set to true.",
                     "top_logprobs");
    top_logprobs = static_cast<int32_t>(k);
  }
  body.erase("logprobs");
  if (const json* m = field(body, "max_completion_tokens")) body["max_tokens"] = *m;
  bool max_tokens_given = false;
  SamplingParams base = sampling_params(body, max_tokens_given, model);
  if (logprobs) base.logprobs = top_logprobs.value_or(0);
  const ordered_json ordered = ordered_json::parse(text);
  r.tools = parse_tool_request(ordered, model);
  r.output.reasoning = model.reasoning_parser;
  r.output.parallel_tool_calls = r.tools.parallel_tool_calls;
  switch (r.tools.choice) {
    case ToolRequest::Choice::None:
      break;
    case ToolRequest::Choice::Auto:
      r.output.tool_calls = model.tool_call_parser;
      break;
    case ToolRequest::Choice::Required:
    case ToolRequest::Choice::Named:
      enforce_tool_choice(r.tools, base.structured);
      r.output.forced_calls = r.tools.choice == ToolRequest::Choice::Required
                                  ? ChatOutputOptions::ForcedCalls::Required
                                  : ChatOutputOptions::ForcedCalls::Named;
      r.output.forced_function = r.tools.function;
      break;
  }
  if (model.reasoning_parser && model.think_end_token >= 0) {
    base.structured.think_start_token = model.think_start_token;
    base.structured.think_end_token = model.think_end_token;
  }
  // Harmony's channel tags are special tokens, which detokenizing would drop; the parser needs
  // them and takes them out of what the client sees.
  if (model.reasoning_parser == ReasoningFormat::GptOss) base.skip_special_tokens = false;
  r.prompts.push_back(chat_prompt_tokens(ordered, model));
  r.params = per_prompt_params(r.prompts, base, max_tokens_given, r.endpoint, model);
  r.n = base.n;
  r.logprobs = logprobs;
  kv_transfer_fields(body, r);
  return r;
}

}  // namespace tern::server
