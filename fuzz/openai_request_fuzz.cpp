// Fuzzes the server's request parsing (completions and chat bodies → token prompts and sampling
// parameters) with a self-contained byte-level tokenizer and a ChatML template: any body must
// either be refused with an ApiError or give prompts the engine can run within the context.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tern/core/error.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_protocol.h"
#include "tern/tokenizer/byte_level_bpe.h"
#include "tern/tokenizer/hf_tokenizer_files.h"
#include "tern/tokenizer/tokenizer.h"

namespace {

// 256 byte tokens and two special tokens, no merges: every text encodes.
tern::Tokenizer byte_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[tern::ByteLevelBpe::bytes_to_token_text(std::string(1, static_cast<char>(b)))] = b;
  const nlohmann::json added =
      nlohmann::json::array({{{"id", 256}, {"content", "<|im_start|>"}, {"special", true}},
                             {{"id", 257}, {"content", "<|im_end|>"}, {"special", true}}});
  const nlohmann::json tokenizer = {
      {"added_tokens", added},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return tern::Tokenizer::from_hf_files(tern::parse_tokenizer_json(tokenizer.dump(), "fuzz.json"));
}

struct Model {
  tern::Tokenizer tokenizer = byte_tokenizer();
  tern::ChatTemplate chat_template{
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "", "<|im_end|>"};
  tern::server::ModelContext context;
  Model() {
    context.tokenizer = &tokenizer;
    context.chat_template = &chat_template;
    context.max_model_len = 256;
    context.served_model_name = "fuzz";
  }
};

void check(const tern::server::GenerationRequest& r, const Model& m) {
  if (r.prompts.empty() || r.prompts.size() != r.params.size()) __builtin_trap();
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    if (r.prompts[i].empty()) __builtin_trap();
    for (int32_t id : r.prompts[i])
      if (id < 0 || id >= m.tokenizer.vocab_size()) __builtin_trap();
    if (static_cast<int64_t>(r.prompts[i].size()) + r.params[i].max_tokens >
        m.context.max_model_len)
      __builtin_trap();
    r.params[i].validate();  // must not throw: the parser validated it
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Model model;
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (const bool chat : {false, true}) {
    tern::server::GenerationRequest r;
    try {
      r = chat ? tern::server::parse_chat_request(body, model.context)
               : tern::server::parse_completion_request(body, model.context);
    } catch (const tern::server::ApiError& e) {
      if (e.status() != 400 && e.status() != 404) __builtin_trap();
      continue;
    } catch (const tern::Error&) {
      continue;  // the tokenizer's (the server answers those with 400 too)
    }
    check(r, model);
  }
  return 0;
}
