// A model's chat template (Jinja), rendered the way transformers' apply_chat_template and
// vLLM's chat endpoint render it: messages, tools, add_generation_prompt, bos/eos tokens and
// the request's chat_template_kwargs (e.g. Qwen3's enable_thinking).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tern/jinja/template.h"

namespace tern {

class Tokenizer;

class ChatTemplate {
 public:
  // Parses `source` once; throws tern::Error naming the line on a syntax error or a Jinja
  // feature tern does not implement. Empty bos/eos strings leave those variables undefined,
  // as transformers does for a tokenizer without them.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);
  // The tokenizer's template (GGUF tokenizer.chat_template or tokenizer_config.json's
  // chat_template, the "default" one of a list) with its bos/eos token texts. Throws
  // tern::Error when the model has no chat template.
  static ChatTemplate from_tokenizer(const Tokenizer& tokenizer);

  // `messages`: the OpenAI messages array. `extra_kwargs`: an object of further template
  // variables (vLLM's chat_template_kwargs; "tools" and "documents" go here too, and default
  // to none). Keys keep their order only with ordered_json, which matters for tojson of tool
  // schemas and tool-call arguments; the nlohmann::json overload sorts keys as that type does.
  // Thread-safe. Throws tern::Error("chat template: line N: ...") when rendering fails,
  // including the template's own raise_exception("...").
  std::string render(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object()) const;
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_kwargs = nlohmann::json::object()) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bos_token_, eos_token_;
  jinja::Template template_;
};

}  // namespace tern
