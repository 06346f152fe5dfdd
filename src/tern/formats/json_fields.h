// Typed access to the fields of one JSON object of a model's config files, with errors that
// name the file and the field: the readers of config.json (model_config.cpp) and of its
// quantization settings (checkpoint_quantization.cpp) share it. Internal to formats/.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/formats/json_util.h"

namespace tern {

// Sizes above this are refused: no real model comes near, and products of two of them must
// not overflow int64.
inline constexpr int64_t kMaxConfigSize = std::numeric_limits<int32_t>::max();

// Typed access to the fields of one JSON object, with errors that name the file and field.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string_view name, std::string prefix = "")
      : obj_(object), name_(name), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(std::string(name_) + ": " + what);
  }

  // Absent and null are the same: HF writes `"head_dim": null` for "not set".
  const nlohmann::json* find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<int64_t> opt_int(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_unsigned()) {
      if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("field " + field(key) + " is too large (" + v->dump() + ")");
      return static_cast<int64_t>(v->get<uint64_t>());
    }
    if (v->is_number_integer()) return v->get<int64_t>();
    fail("field " + field(key) + " must be an integer, not " + v->type_name() + " " + v->dump());
  }

  int64_t req_int(const char* key) const {
    auto v = opt_int(key);
    if (!v) fail("required field " + field(key) + " is missing");
    return *v;
  }

  std::optional<double> opt_double(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number())
      fail("field " + field(key) + " must be a number, not " + v->type_name() + " " + v->dump());
    return v->get<double>();
  }

  double req_double(const char* key) const {
    auto v = opt_double(key);
    if (!v) fail("required field " + field(key) + " is missing");
    return *v;
  }

  std::optional<bool> opt_bool(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean())
      fail("field " + field(key) + " must be true or false, not " + v->type_name() + " " +
           v->dump());
    return v->get<bool>();
  }

  std::optional<std::string> opt_string(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string())
      fail("field " + field(key) + " must be a string, not " + v->type_name() + " " + v->dump());
    return v->get<std::string>();
  }

  std::optional<int32_t> opt_token_id(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return token_id(key, *v);
  }

  // HF allows one id or a list of ids.
  std::optional<std::vector<int32_t>> opt_token_ids(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) return std::vector<int32_t>{token_id(key, *v)};
    std::vector<int32_t> ids;
    for (const auto& item : *v) ids.push_back(token_id(key, item));
    return ids;
  }

  std::string field(const char* key) const { return quote_name(prefix_ + key); }

 private:
  int32_t token_id(const char* key, const nlohmann::json& v) const {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    bool ok = v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(kMax)
              : v.is_number_integer() ? v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMax
                                      : false;
    if (!ok)
      fail("field " + field(key) + " holds " + v.dump() +
           ", not a token id or a list of token ids");
    return static_cast<int32_t>(v.get<int64_t>());
  }

  const nlohmann::json& obj_;
  std::string_view name_;
  std::string prefix_;
};

}  // namespace tern
