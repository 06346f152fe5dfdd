#include "tern/sampling/sampling_params_json.h"

#include <cmath>
#include <limits>
#include <string>

#include "tern/core/error.h"
#include "tern/structured/structured_outputs.h"

namespace tern {
namespace {

using nlohmann::json;

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

float number(const json& v, const char* name) {
  if (!v.is_number()) throw Error("'" + std::string(name) + "' must be a number");
  return v.get<float>();
}

int64_t integer(const json& v, const char* name) {
  const auto out_of_range = [name] { return Error("'" + std::string(name) + "' is out of range"); };
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw out_of_range();
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  // 16.0 is an integer to JavaScript clients; 2**64 is one too, past what any field takes.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::nearbyint(d) == d) {
      if (std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
      throw out_of_range();
    }
  }
  throw Error("'" + std::string(name) + "' must be an integer");
}

int32_t int32(const json& v, const char* name) {
  const int64_t x = integer(v, name);
  if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
    throw Error("'" + std::string(name) + "' is out of range");
  return static_cast<int32_t>(x);
}

bool boolean(const json& v, const char* name) {
  if (!v.is_boolean()) throw Error("'" + std::string(name) + "' must be true or false");
  return v.get<bool>();
}

}  // namespace

void update_sampling_params(SamplingParams& p, const json& body) {
  if (!body.is_object()) throw Error("the request must be a JSON object");
  if (auto v = field(body, "n")) p.n = int32(*v, "n");
  if (auto v = field(body, "temperature")) p.temperature = number(*v, "temperature");
  if (auto v = field(body, "top_p")) p.top_p = number(*v, "top_p");
  if (auto v = field(body, "top_k")) p.top_k = int32(*v, "top_k");
  if (auto v = field(body, "min_p")) p.min_p = number(*v, "min_p");
  if (auto v = field(body, "presence_penalty")) p.presence_penalty = number(*v, "presence_penalty");
  if (auto v = field(body, "frequency_penalty"))
    p.frequency_penalty = number(*v, "frequency_penalty");
  if (auto v = field(body, "repetition_penalty"))
    p.repetition_penalty = number(*v, "repetition_penalty");
  if (auto v = field(body, "seed")) {
    const int64_t s = integer(*v, "seed");
    p.seed = static_cast<uint64_t>(s);
  }
  if (auto v = field(body, "max_tokens")) p.max_tokens = int32(*v, "max_tokens");
  if (auto v = field(body, "min_tokens")) p.min_tokens = int32(*v, "min_tokens");
  if (auto v = field(body, "stop")) {
    p.stop.clear();
    if (v->is_string()) {
      p.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const json& s : *v) {
        if (!s.is_string()) throw Error("'stop' must be a string or a list of strings");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      throw Error("'stop' must be a string or a list of strings");
    }
  }
  if (auto v = field(body, "stop_token_ids")) {
    if (!v->is_array()) throw Error("'stop_token_ids' must be a list of integers");
    p.stop_token_ids.clear();
    for (const json& id : *v) p.stop_token_ids.push_back(int32(id, "stop_token_ids"));
  }
  if (auto v = field(body, "ignore_eos")) p.ignore_eos = boolean(*v, "ignore_eos");
  if (auto v = field(body, "include_stop_str_in_output"))
    p.include_stop_str_in_output = boolean(*v, "include_stop_str_in_output");
  if (auto v = field(body, "skip_special_tokens"))
    p.skip_special_tokens = boolean(*v, "skip_special_tokens");
  if (auto v = field(body, "logprobs")) p.logprobs = int32(*v, "logprobs");
  // Constrained decoding (response_format, guided_*, structured_outputs, grammar, json_schema):
  // structured::ConstraintFieldError names the field.
  p.structured = structured::structured_output_from_request(body);
}

}  // namespace tern
