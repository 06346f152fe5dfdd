// SpeculativeConfig from JSON: every key vLLM users write for the two methods tern has, each
// checked for its type; anything else is refused by name rather than ignored.
#include "tern/spec_decode/speculative_config.h"

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/quant/quant_recipe.h"

namespace tern {
namespace {

using nlohmann::json;

constexpr int32_t kMaxSpeculativeTokens = 32;

int64_t integer_of(const json& v, const std::string& key) {
  if (!v.is_number_integer()) throw Error("speculative config: '" + key + "' must be an integer");
  return v.get<int64_t>();
}

std::string string_of(const json& v, const std::string& key) {
  if (!v.is_string()) throw Error("speculative config: '" + key + "' must be a string");
  return v.get<std::string>();
}

int32_t int32_of(const json& v, const std::string& key) {
  const int64_t x = integer_of(v, key);
  if (x < 0 || x > (int64_t{1} << 30))
    throw Error("speculative config: '" + key + "' is out of range");
  return static_cast<int32_t>(x);
}

}  // namespace

SpeculativeConfig parse_speculative_config(std::string_view text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("speculative config: not JSON: ") + e.what());
  }
  if (!body.is_object()) throw Error("speculative config: must be a JSON object");
  SpeculativeConfig c;
  std::string method;
  bool has_num_speculative_tokens = false;
  for (const auto& [key, v] : body.items()) {
    if (v.is_null()) continue;  // vLLM's "not given"
    if (key == "method") {
      method = string_of(v, key);
    } else if (key == "model") {
      c.model = string_of(v, key);
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens = int32_of(v, key);
      has_num_speculative_tokens = true;
    } else if (key == "prompt_lookup_min") {
      c.prompt_lookup_min = int32_of(v, key);
    } else if (key == "prompt_lookup_max") {
      c.prompt_lookup_max = int32_of(v, key);
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = int32_of(v, key);
      if (c.disable_by_batch_size < 2)
        throw Error("speculative config: 'disable_by_batch_size' must be >= 2, got " +
                    std::to_string(c.disable_by_batch_size));
    } else if (key == "max_model_len") {
      c.max_model_len = integer_of(v, key);
      if (c.max_model_len < 1) throw Error("speculative config: 'max_model_len' must be >= 1");
    } else if (key == "revision") {
      c.revision = string_of(v, key);
    } else if (key == "dtype") {
      c.dtype = string_of(v, key);
      parse_float_dtype(c.dtype, "speculative config: 'dtype'", "'weight_type'");
    } else if (key == "weight_type") {
      c.weight_type = string_of(v, key);
      parse_weight_recipe(c.weight_type, "speculative config: 'weight_type'");
    } else if (key == "load_format") {
      c.load_format = string_of(v, key);
      if (c.load_format != "auto" && c.load_format != "dummy")
        throw Error("speculative config: 'load_format' must be \"auto\" or \"dummy\", got \"" +
                    c.load_format + "\"");
    } else if (key == "adaptive") {
      if (!v.is_boolean()) throw Error("speculative config: 'adaptive' must be true or false");
      c.adaptive = v.get<bool>();
    } else if (key == "draft_tensor_parallel_size") {
      if (integer_of(v, key) != 1)
        throw Error(
            "speculative config: 'draft_tensor_parallel_size' must be 1 (tern runs one "
            "process)");
    } else {
      throw Error("speculative config: '" + key +
                  "' is not supported (tern knows method, model, num_speculative_tokens, "
                  "prompt_lookup_min, prompt_lookup_max, disable_by_batch_size, max_model_len, "
                  "revision, dtype, load_format, adaptive, draft_tensor_parallel_size)");
    }
  }
  if (method.empty()) {
    c.method = SpeculativeMethod::kNone;
  } else if (method == "draft_model") {
    c.method = SpeculativeMethod::kDraftModel;
  } else if (method == "ngram" || method == "[ngram]") {
    c.method = SpeculativeMethod::kNgram;
  } else {
    throw Error("speculative config: method \"" + method +
                "\" is not supported (tern has \"draft_model\" and \"ngram\")");
  }
  if (c.method == SpeculativeMethod::kNone && c.model.empty())
    throw Error("speculative config: give a method (\"draft_model\" or \"ngram\") or a model");
  if (!has_num_speculative_tokens)
    throw Error(
        "speculative config: 'num_speculative_tokens' is missing: the most draft tokens a step "
        "verifies (>= 1, e.g. 4)");
  if (c.num_speculative_tokens < 1)
    throw Error("speculative config: 'num_speculative_tokens' must be >= 1, got " +
                std::to_string(c.num_speculative_tokens));
  finalize_speculative_config(c);
  return c;
}

void finalize_speculative_config(SpeculativeConfig& c) {
  if (c.method == SpeculativeMethod::kNone) {
    if (c.model.empty()) {
      if (c.num_speculative_tokens > 0)
        throw Error("--num-speculative-tokens needs --speculative-model or --speculative-config");
      return;
    }
    c.method = c.model == "[ngram]" || c.model == "ngram" ? SpeculativeMethod::kNgram
                                                          : SpeculativeMethod::kDraftModel;
  }
  if (c.method == SpeculativeMethod::kNgram && (c.model == "[ngram]" || c.model == "ngram"))
    c.model.clear();
  if (c.num_speculative_tokens < 1)
    throw Error("speculative decoding needs num_speculative_tokens >= 1");
  if (c.num_speculative_tokens > kMaxSpeculativeTokens)
    throw Error("num_speculative_tokens must be <= " + std::to_string(kMaxSpeculativeTokens) +
                ", got " + std::to_string(c.num_speculative_tokens));
  if (c.method == SpeculativeMethod::kDraftModel) {
    if (c.model.empty()) throw Error("speculative method draft_model needs a model");
    if (c.prompt_lookup_min || c.prompt_lookup_max)
      throw Error("prompt_lookup_min / prompt_lookup_max belong to the ngram method");
    return;
  }
  if (!c.model.empty()) throw Error("the ngram method takes no model (got \"" + c.model + "\")");
  if (c.dtype != "auto" || c.weight_type != "auto" || !c.load_format.empty())
    throw Error("the ngram method has no draft model to give a dtype, weight_type or load_format");
  if (c.prompt_lookup_min == 0 && c.prompt_lookup_max == 0) {
    c.prompt_lookup_min = c.prompt_lookup_max = 5;
  } else if (c.prompt_lookup_min == 0) {
    c.prompt_lookup_min = c.prompt_lookup_max;
  } else if (c.prompt_lookup_max == 0) {
    c.prompt_lookup_max = c.prompt_lookup_min;
  }
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    throw Error("prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
                ") must be <= prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
}

std::string SpeculativeConfig::describe() const {
  std::string out;
  if (method == SpeculativeMethod::kNone) return "off";
  if (method == SpeculativeMethod::kDraftModel)
    out = "draft_model " + model;
  else
    out = "ngram (prompt lookup " + std::to_string(prompt_lookup_min) + "-" +
          std::to_string(prompt_lookup_max) + ")";
  out +=
      ", K <= " + std::to_string(num_speculative_tokens) + (adaptive ? " (adaptive)" : " (fixed)");
  if (disable_by_batch_size)
    out += ", off from " + std::to_string(disable_by_batch_size) + " sequences";
  return out;
}

}  // namespace tern
