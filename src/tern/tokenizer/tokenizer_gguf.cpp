// A tokenizer's GGUF metadata, with the key names of llama.cpp's converter (gguf-py
// constants.py), for writing model files llama.cpp and tern both load.
#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/tokenizer_impl.h"

namespace tern {
namespace {

const char* gguf_pre_name(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Gpt2:
      return "gpt-2";
    case PreTokenizer::Llama3:
      return "llama-bpe";
    case PreTokenizer::Qwen2:
      return "qwen2";
    case PreTokenizer::O200k:
      return "gpt-4o";
  }
  return "gpt-2";
}

}  // namespace

void Tokenizer::write_gguf(GgufWriter& writer, int64_t model_vocab_size) const {
  const Impl& t = *impl_;
  const auto n_tokens = static_cast<int64_t>(t.vocab.tokens.size());
  if (model_vocab_size > 0 && n_tokens > model_vocab_size) {
    throw Error("tokenizer has " + std::to_string(n_tokens) + " tokens but the model only " +
                std::to_string(model_vocab_size) + " embedding rows");
  }
  std::vector<std::string> tokens = t.vocab.tokens;
  std::vector<float> scores = t.vocab.scores;
  std::vector<int32_t> types(t.vocab.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<int32_t>(t.vocab.types[i]);
  for (int64_t id = n_tokens; id < model_vocab_size; ++id) {
    tokens.push_back("[PAD" + std::to_string(id) + "]");
    types.push_back(static_cast<int32_t>(TokenType::Unused));
    if (!scores.empty()) scores.push_back(0.0f);
  }
  const bool spm = t.kind == TokenizerKind::SentencePieceBpe;
  writer.set("tokenizer.ggml.model", GgufValue::string(spm ? "llama" : "gpt2"));
  if (!spm)
    writer.set("tokenizer.ggml.pre", GgufValue::string(gguf_pre_name(t.byte_level.pre_tokenizer)));
  writer.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  if (!scores.empty()) writer.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  writer.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  if (spm) {
    writer.set("tokenizer.ggml.add_space_prefix",
               GgufValue::boolean(t.spm_options.add_dummy_prefix));
    if (t.spm_options.remove_extra_whitespaces)
      writer.set("tokenizer.ggml.remove_extra_whitespaces", GgufValue::boolean(true));
  } else {
    writer.set("tokenizer.ggml.merges", GgufValue::string_array(t.merges));
  }
  auto id = [&](const char* key, const std::optional<int32_t>& v) {
    if (v) writer.set(key, GgufValue::u32(static_cast<uint32_t>(*v)));
  };
  id("tokenizer.ggml.bos_token_id", t.bos);
  id("tokenizer.ggml.eos_token_id", t.eos);
  id("tokenizer.ggml.unknown_token_id", t.unk);
  id("tokenizer.ggml.padding_token_id", t.pad);
  writer.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(t.add_bos));
  writer.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(t.add_eos));
  if (!t.chat_template.empty())
    writer.set("tokenizer.chat_template", GgufValue::string(t.chat_template));
}

}  // namespace tern
