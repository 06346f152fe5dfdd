// Request fields, spec compilation and the engine's compile cache.
#include "tern/structured/structured_outputs.h"

#include <algorithm>

#include "tern/structured/gbnf.h"
#include "tern/structured/json_schema.h"
#include "tern/structured/regex.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::structured {
namespace {

using nlohmann::json;
using Kind = StructuredOutputSpec::Kind;

const json* present(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string string_of(const json& v, const std::string& field) {
  if (!v.is_string()) throw ConstraintFieldError(field, "'" + field + "' must be a string");
  return v.get<std::string>();
}

// A schema given as an object, or as its JSON text (vLLM accepts both for guided_json).
std::string schema_text(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    try {
      return json::parse(v.get<std::string>()).dump();
    } catch (const json::exception&) {
      throw ConstraintFieldError(field, "'" + field + "' is not valid JSON");
    }
  }
  throw ConstraintFieldError(field, "'" + field + "' must be a JSON schema object");
}

std::string choice_text(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty())
    throw ConstraintFieldError(field, "'" + field + "' must be a non-empty list of strings");
  for (const json& c : v)
    if (!c.is_string())
      throw ConstraintFieldError(field, "'" + field + "' must be a list of strings");
  return v.dump();
}

StructuredOutputSpec from_response_format(const json& v) {
  const std::string f = "response_format";
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    throw ConstraintFieldError(f, "'response_format' must be an object with a 'type'");
  const std::string type = v["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") return {Kind::kJsonObject, "", f};
  if (type == "json_schema") {
    const json* js = present(v, "json_schema");
    if (!js || !js->is_object())
      throw ConstraintFieldError(
          f, "'response_format' of type json_schema needs a 'json_schema' object");
    const json* schema = present(*js, "schema");
    // OpenAI: a json_schema without a schema is any JSON object.
    if (!schema) return {Kind::kJsonObject, "", f};
    return {Kind::kJsonSchema, schema_text(*schema, f), f};
  }
  throw ConstraintFieldError(
      f, "'response_format' type '" + type + "' is not one of text, json_object, json_schema");
}

StructuredOutputSpec from_structured_outputs(const json& v) {
  const std::string f = "structured_outputs";
  if (!v.is_object()) throw ConstraintFieldError(f, "'structured_outputs' must be an object");
  StructuredOutputSpec spec;
  int given = 0;
  for (const auto& [k, x] : v.items()) {
    if (x.is_null()) continue;
    if (k == "json") {
      spec = {Kind::kJsonSchema, schema_text(x, f), f};
    } else if (k == "regex") {
      spec = {Kind::kRegex, string_of(x, f + ".regex"), f};
    } else if (k == "choice") {
      spec = {Kind::kChoice, choice_text(x, f + ".choice"), f};
    } else if (k == "grammar") {
      spec = {Kind::kGrammar, string_of(x, f + ".grammar"), f};
    } else if (k == "json_object") {
      if (!x.is_boolean())
        throw ConstraintFieldError(f, "'structured_outputs.json_object' must be true or false");
      if (!x.get<bool>()) continue;
      spec = {Kind::kJsonObject, "", f};
    } else if (k == "disable_any_whitespace" || k == "disable_fallback" ||
               k == "disable_additional_properties" || k == "whitespace_pattern" ||
               k == "structural_tag") {
      throw ConstraintFieldError(f, "tern does not support 'structured_outputs." + k + "'");
    } else {
      throw ConstraintFieldError(f, "unknown field 'structured_outputs." + k + "'");
    }
    ++given;
  }
  if (given > 1)
    throw ConstraintFieldError(
        f, "'structured_outputs' may set only one of json, regex, choice, grammar, json_object");
  return spec;
}

Grammar choice_grammar(const std::string& text) {
  const json list = json::parse(text);
  Grammar g;
  const int32_t root = g.rule("root");
  std::vector<Expr> alts;
  for (const json& c : list) alts.push_back(Expr::lit(c.get<std::string>()));
  g.define(root, Expr::alt(std::move(alts)));
  g.root = root;
  return g;
}

}  // namespace

StructuredOutputSpec structured_output_from_request(const json& body) {
  StructuredOutputSpec spec;
  std::string first;
  auto take = [&](const char* field, StructuredOutputSpec s) {
    if (!s.enabled()) return;
    if (spec.enabled())
      throw ConstraintFieldError(field, std::string("'") + field + "' and '" + first +
                                            "' both constrain the output: give one");
    spec = std::move(s);
    first = field;
  };
  if (!body.is_object()) return spec;
  if (auto v = present(body, "response_format")) take("response_format", from_response_format(*v));
  if (auto v = present(body, "guided_json"))
    take("guided_json", {Kind::kJsonSchema, schema_text(*v, "guided_json"), "guided_json"});
  if (auto v = present(body, "guided_regex"))
    take("guided_regex", {Kind::kRegex, string_of(*v, "guided_regex"), "guided_regex"});
  if (auto v = present(body, "guided_choice"))
    take("guided_choice", {Kind::kChoice, choice_text(*v, "guided_choice"), "guided_choice"});
  if (auto v = present(body, "guided_grammar"))
    take("guided_grammar", {Kind::kGrammar, string_of(*v, "guided_grammar"), "guided_grammar"});
  if (auto v = present(body, "structured_outputs"))
    take("structured_outputs", from_structured_outputs(*v));
  if (auto v = present(body, "grammar"))
    take("grammar", {Kind::kGrammar, string_of(*v, "grammar"), "grammar"});
  if (auto v = present(body, "json_schema"))
    take("json_schema", {Kind::kJsonSchema, schema_text(*v, "json_schema"), "json_schema"});
  if (spec.enabled()) {
    try {
      (void)flatten(grammar_of(spec));
    } catch (const ConstraintFieldError&) {
      throw;
    } catch (const Error& e) {
      throw ConstraintFieldError(spec.field, "'" + spec.field + "': " + e.what());
    }
  }
  return spec;
}

Grammar grammar_of(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case Kind::kJsonObject:
      return json_object_grammar();
    case Kind::kJsonSchema:
      return compile_json_schema_text(spec.text);
    case Kind::kRegex:
      return compile_regex(spec.text);
    case Kind::kChoice:
      return choice_grammar(spec.text);
    case Kind::kGrammar:
      return parse_gbnf(spec.text);
    case Kind::kNone:
      break;
  }
  throw Error("no constraint to compile");
}

std::vector<std::string> grammar_token_bytes(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  return bytes;
}

StructuredOutputs::StructuredOutputs(const Tokenizer& tokenizer, std::vector<int32_t> eos_ids)
    : tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)) {}

std::shared_ptr<const TokenTrie> StructuredOutputs::trie() {
  std::lock_guard lock(mutex_);
  if (!trie_) trie_ = std::make_shared<const TokenTrie>(grammar_token_bytes(tokenizer_), eos_ids_);
  return trie_;
}

std::shared_ptr<CompiledConstraint> StructuredOutputs::compile(const StructuredOutputSpec& spec) {
  const std::string key = std::to_string(static_cast<int>(spec.kind)) + ":" + spec.text;
  {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->first != key) continue;
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front().second;
    }
  }
  auto trie_ptr = trie();
  auto compiled =
      std::make_shared<CompiledConstraint>(flatten(grammar_of(spec)), std::move(trie_ptr));
  std::lock_guard lock(mutex_);
  cache_.emplace_front(key, compiled);
  if (cache_.size() > kCacheSize) cache_.pop_back();
  return compiled;
}

std::unique_ptr<ConstraintState> StructuredOutputs::start(const StructuredOutputSpec& spec,
                                                          size_t max_tokens,
                                                          std::span<const int32_t> prompt) {
  int32_t wait_for = -1;
  if (spec.think_end_token >= 0) {
    const auto last_tag = std::find_if(prompt.rbegin(), prompt.rend(), [&](int32_t id) {
      return id == spec.think_end_token || id == spec.think_start_token;
    });
    if (last_tag == prompt.rend() || *last_tag != spec.think_end_token)
      wait_for = spec.think_end_token;
  }
  return std::make_unique<ConstraintState>(compile(spec), max_tokens, wait_for);
}

}  // namespace tern::structured
