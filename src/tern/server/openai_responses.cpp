#include "tern/server/openai_responses.h"

#include <algorithm>
#include <random>

namespace tern::server {
namespace {

using nlohmann::json;

// JSON has no -inf; vLLM reports such logprobs as -9999.0.
double clamp_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

json finish_json(const CompletionOutput& c) {
  return c.finish_reason ? json(*c.finish_reason) : json(nullptr);
}

json stop_reason_json(const CompletionOutput& c) {
  if (const auto* id = std::get_if<int32_t>(&c.stop_reason)) return *id;
  if (const auto* s = std::get_if<std::string>(&c.stop_reason)) return *s;
  return nullptr;
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

json byte_list(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"completion_tokens", u.completion_tokens}};
}

std::string new_response_id(Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 32; ++i) id += hex[rng() & 15];
  return id;
}

ResponseFormatter::ResponseFormatter(Endpoint endpoint, std::string id, int64_t created,
                                     std::string model, const Tokenizer& tokenizer, int32_t n,
                                     int num_prompts, ChatOutputOptions output)
    : endpoint_(endpoint),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      tokenizer_(tokenizer),
      n_(n),
      text_offsets_(static_cast<size_t>(n) * static_cast<size_t>(num_prompts), 0),
      output_(output),
      streams_(endpoint == Endpoint::ChatCompletions && output.parses() ? text_offsets_.size() : 0,
               ChatOutputStream(output)) {}

// OpenAI's finish_reason when the model called tools and stopped by itself; a call of the
// function the request named still ends with "stop", as OpenAI and vLLM answer it.
static json finish_after_tools(const ChatOutputOptions& output, const CompletionOutput& c,
                               bool called) {
  if (called && c.finish_reason == "stop" &&
      output.forced_calls != ChatOutputOptions::ForcedCalls::Named)
    return "tool_calls";
  return finish_json(c);
}

static json tool_call_json(const ParsedToolCall& call, const std::string& id) {
  return {{"id", id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

std::vector<json> ResponseFormatter::parsed_deltas(size_t index, const CompletionOutput& c,
                                                   json& finish) {
  ChatOutputStream& stream = streams_.at(index);
  const ChatDelta d = stream.push(c.new_text, c.finished());
  std::vector<json> deltas(1, json::object());
  if (!d.reasoning.empty()) deltas[0]["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) deltas[0]["content"] = d.content;
  for (const ToolCallDelta& t : d.tool_calls) {
    json call = {{"index", t.index}};
    if (t.first) {
      call["id"] = t.id;
      call["type"] = "function";
      call["function"] = {{"name", t.name}, {"arguments", t.arguments}};
    } else {
      call["function"] = {{"arguments", t.arguments}};
    }
    // One delta per call and chunk: a call's header and its first arguments go in two chunks.
    json& calls = deltas.back()["tool_calls"];
    if (!calls.is_null() && !calls.empty() && calls.back()["index"] == t.index) {
      deltas.push_back({{"tool_calls", json::array({std::move(call)})}});
    } else {
      if (calls.is_null()) calls = json::array();
      calls.push_back(std::move(call));
    }
  }
  finish = finish_after_tools(output_, c, stream.sent_tool_calls());
  return deltas;
}

json ResponseFormatter::parsed_message(const CompletionOutput& c, json& finish) const {
  const ChatOutput o = parse_chat_output(output_, c.text, /*final=*/true);
  json message = {{"role", "assistant"},
                  {"content", o.content.empty() ? json(nullptr) : json(o.content)}};
  if (output_.reasoning)
    message["reasoning_content"] = o.reasoning ? json(*o.reasoning) : json(nullptr);
  if (!o.tool_calls.empty()) {
    json calls = json::array();
    for (const ParsedToolCall& call : o.tool_calls)
      calls.push_back(tool_call_json(call, new_tool_call_id()));
    message["tool_calls"] = std::move(calls);
  }
  finish = finish_after_tools(output_, c, !o.tool_calls.empty());
  return message;
}

std::string ResponseFormatter::token_text(int32_t id) const {
  bool at_text_start = false;
  std::string out;
  tokenizer_.decode_append(id, /*skip_special_tokens=*/false, at_text_start, out);
  return out;
}

json ResponseFormatter::completion_logprobs(const std::vector<SampledToken>& tokens,
                                            int64_t& text_offset) const {
  json out = {{"text_offset", json::array()},
              {"token_logprobs", json::array()},
              {"tokens", json::array()},
              {"top_logprobs", json::array()}};
  for (const SampledToken& t : tokens) {
    const std::string text = token_text(t.token);
    out["text_offset"].push_back(text_offset);
    text_offset += code_points(text);
    out["token_logprobs"].push_back(clamp_logprob(t.logprob));
    out["tokens"].push_back(text);
    // vLLM's map: the top k and the sampled token.
    json top = json::object();
    for (const TokenLogprob& l : t.top) top[token_text(l.token)] = clamp_logprob(l.logprob);
    top[text] = clamp_logprob(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
  }
  return out;
}

json ResponseFormatter::chat_logprobs(const std::vector<SampledToken>& tokens) const {
  json content = json::array();
  for (const SampledToken& t : tokens) {
    const std::string text = token_text(t.token);
    json top = json::array();
    for (const TokenLogprob& l : t.top) {
      const std::string s = token_text(l.token);
      top.push_back({{"token", s}, {"logprob", clamp_logprob(l.logprob)}, {"bytes", byte_list(s)}});
    }
    content.push_back({{"token", text},
                       {"logprob", clamp_logprob(t.logprob)},
                       {"bytes", byte_list(text)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json ResponseFormatter::chunk_envelope(json choices) const {
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  return {{"id", id_},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)}};
}

std::vector<json> ResponseFormatter::chat_role_chunks() const {
  std::vector<json> out;
  for (size_t i = 0; i < text_offsets_.size(); ++i)
    out.push_back(chunk_envelope(json::array({{{"index", i},
                                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                                               {"logprobs", nullptr},
                                               {"finish_reason", nullptr}}})));
  return out;
}

std::vector<json> ResponseFormatter::chunks(int prompt_index, const CompletionOutput& c) {
  std::vector<json> out;
  const bool logprobs = !c.new_logprobs.empty();
  // Nothing to show yet (a character still incomplete, a possible stop string held back).
  if (c.new_text.empty() && !logprobs && !c.finished()) return out;
  const size_t index =
      static_cast<size_t>(prompt_index) * static_cast<size_t>(n_) + static_cast<size_t>(c.index);
  json choice;
  if (!streams_.empty()) {
    json finish;
    std::vector<json> deltas = parsed_deltas(index, c, finish);
    if (deltas.size() == 1 && deltas[0].empty() && !logprobs && !c.finished())
      return out;  // held back for now
    for (size_t k = 0; k < deltas.size(); ++k) {
      const bool last = k + 1 == deltas.size();
      json parsed = {
          {"index", index},
          {"delta", std::move(deltas[k])},
          {"logprobs", logprobs && k == 0 ? chat_logprobs(c.new_logprobs) : json(nullptr)},
          {"finish_reason", last ? finish : json(nullptr)}};
      if (last && c.finished()) parsed["stop_reason"] = stop_reason_json(c);
      out.push_back(chunk_envelope(json::array({std::move(parsed)})));
    }
    return out;
  } else if (endpoint_ == Endpoint::ChatCompletions) {
    choice = {{"index", index},
              {"delta",
               c.new_text.empty() && c.finished() ? json::object() : json{{"content", c.new_text}}},
              {"logprobs", logprobs ? chat_logprobs(c.new_logprobs) : json(nullptr)},
              {"finish_reason", finish_json(c)}};
  } else {
    choice = {{"index", index},
              {"text", c.new_text},
              {"logprobs", logprobs ? completion_logprobs(c.new_logprobs, text_offsets_.at(index))
                                    : json(nullptr)},
              {"finish_reason", finish_json(c)}};
  }
  if (c.finished()) choice["stop_reason"] = stop_reason_json(c);
  out.push_back(chunk_envelope(json::array({std::move(choice)})));
  return out;
}

json ResponseFormatter::usage_chunk(const Usage& usage) const {
  json chunk = chunk_envelope(json::array());
  chunk["usage"] = usage_json(usage);
  return chunk;
}

json ResponseFormatter::response(const std::vector<std::vector<CompletionOutput>>& finals,
                                 const Usage& usage) const {
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  json choices = json::array();
  for (size_t p = 0; p < finals.size(); ++p) {
    for (const CompletionOutput& c : finals[p]) {
      const size_t index = p * static_cast<size_t>(n_) + static_cast<size_t>(c.index);
      const bool logprobs = !c.logprobs.empty();
      json choice = {{"index", index}};
      json finish = finish_json(c);
      if (chat && output_.parses()) {
        choice["message"] = parsed_message(c, finish);
        choice["logprobs"] = logprobs ? chat_logprobs(c.logprobs) : json(nullptr);
      } else if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        choice["logprobs"] = logprobs ? chat_logprobs(c.logprobs) : json(nullptr);
      } else {
        int64_t offset = 0;
        choice["text"] = c.text;
        choice["logprobs"] = logprobs ? completion_logprobs(c.logprobs, offset) : json(nullptr);
      }
      choice["finish_reason"] = std::move(finish);
      choice["stop_reason"] = stop_reason_json(c);
      choices.push_back(std::move(choice));
    }
  }
  return {{"id", id_},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)},
          {"usage", usage_json(usage)}};
}

}  // namespace tern::server
