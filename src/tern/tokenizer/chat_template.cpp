// The variables transformers passes to a chat template, then tern's Jinja engine renders it.
#include "tern/tokenizer/chat_template.h"

#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

static jinja::TemplateOptions chat_template_options() {
  jinja::TemplateOptions options;
  options.name = "chat template";
  return options;  // trim_blocks, lstrip_blocks, no trailing newline: transformers' settings
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : source_(source),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      template_(source, chat_template_options()) {}

ChatTemplate ChatTemplate::from_tokenizer(const Tokenizer& tokenizer) {
  if (tokenizer.chat_template().empty())
    throw Error("the model has no chat template (tokenizer.chat_template / chat_template)");
  auto token_text = [&](std::optional<int32_t> id) {
    return id ? tokenizer.token_bytes(*id) : std::string();
  };
  return ChatTemplate(tokenizer.chat_template(), token_text(tokenizer.bos_id()),
                      token_text(tokenizer.eos_id()));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_kwargs) const {
  if (!messages.is_array()) throw Error("chat template: messages must be a JSON array");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object())
    throw Error("chat template: chat_template_kwargs must be a JSON object");
  jinja::Object context;
  context.set("messages", jinja::Value::from_json(messages));
  context.set("tools", jinja::Value::none());
  context.set("documents", jinja::Value::none());
  context.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  if (!bos_token_.empty()) context.set("bos_token", jinja::Value(bos_token_));
  if (!eos_token_.empty()) context.set("eos_token", jinja::Value(eos_token_));
  if (extra_kwargs.is_object())
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it)
      context.set(it.key(), jinja::Value::from_json(it.value()));
  return template_.render(context);
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_kwargs) const {
  return render(nlohmann::ordered_json::parse(messages.dump()), add_generation_prompt,
                nlohmann::ordered_json::parse(extra_kwargs.dump()));
}

}  // namespace tern
