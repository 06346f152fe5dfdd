// Fuzzes tern's Jinja engine: the input is a template, parsed and then rendered with a small
// fixed chat context under tight limits. Anything may fail, but only with tern::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tern/core/error.h"
#include "tern/jinja/template.h"

namespace {

const tern::jinja::Object& fuzz_context() {
  static const tern::jinja::Object context = [] {
    const auto json = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Hi \u00e9 \u4f60\u597d"},
                   {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello",
                    "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1.5}}}]},
                   {"role": "tool", "content": "42"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "enable_thinking": false,
      "bos_token": "<s>", "eos_token": "</s>", "n": null, "xs": [3, 1, 2]})");
    return tern::jinja::Value::from_json(json).as_object();
  }();
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  tern::jinja::TemplateOptions options;
  options.name = "fuzz";
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_loop_iterations = 100000;
  options.limits.max_call_depth = 30;
  try {
    const tern::jinja::Template tmpl(source, options);
    tmpl.render(fuzz_context());
  } catch (const tern::Error&) {
  }
  return 0;
}
