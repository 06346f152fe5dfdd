// The JSON bodies tern answers the completions and chat completions endpoints with, field for
// field as OpenAI (and vLLM) write them: whole responses, stream chunks, usage, and logprobs in
// each endpoint's own shape.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/engine/request_output.h"
#include "tern/server/chat_output.h"
#include "tern/server/openai_protocol.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

nlohmann::json usage_json(const Usage& usage);

// A fresh "cmpl-…" / "chatcmpl-…" id (random hex).
std::string new_response_id(Endpoint endpoint);

// Formats one request's responses. Choice index = prompt_index * n + completion index.
class ResponseFormatter {
 public:
  // `output`: how chat text splits into reasoning_content, content and tool_calls (nothing
  // parsed by default).
  ResponseFormatter(Endpoint endpoint, std::string id, int64_t created, std::string model,
                    const Tokenizer& tokenizer, int32_t n, int num_prompts,
                    ChatOutputOptions output = {});

  // Streams: the chunks one engine output makes (one per completion with something to say).
  std::vector<nlohmann::json> chunks(int prompt_index, const CompletionOutput& completion);
  // Chat streams open each choice with {"role": "assistant", "content": ""}.
  std::vector<nlohmann::json> chat_role_chunks() const;
  // The last chunk of a stream with stream_options.include_usage: no choices, the usage.
  nlohmann::json usage_chunk(const Usage& usage) const;

  // The whole response; `finals[prompt_index][completion index]` is the finishing output.
  nlohmann::json response(const std::vector<std::vector<CompletionOutput>>& finals,
                          const Usage& usage) const;

 private:
  nlohmann::json chunk_envelope(nlohmann::json choices) const;
  nlohmann::json completion_logprobs(const std::vector<SampledToken>& tokens,
                                     int64_t& text_offset) const;
  nlohmann::json chat_logprobs(const std::vector<SampledToken>& tokens) const;
  // A streamed choice's parsed deltas (more than one when a call's header and arguments come
  // at once) and its finish_reason.
  std::vector<nlohmann::json> parsed_deltas(size_t index, const CompletionOutput& c,
                                            nlohmann::json& finish);
  nlohmann::json parsed_message(const CompletionOutput& c, nlohmann::json& finish) const;
  // A token as text in the middle of the output (no SentencePiece start-of-text trimming).
  std::string token_text(int32_t id) const;

  Endpoint endpoint_;
  std::string id_;
  int64_t created_;
  std::string model_;
  Tokenizer tokenizer_;
  int32_t n_;
  std::vector<int64_t> text_offsets_;  // per choice, for streamed completion logprobs
  ChatOutputOptions output_;
  std::vector<ChatOutputStream> streams_;  // per choice, when output_ parses
};

// JSON text that never throws on the rare invalid UTF-8 (a replacement character instead).
std::string dump_json(const nlohmann::json& j);

}  // namespace tern::server
