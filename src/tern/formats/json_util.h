// JSON and message helpers for model files, whose headers come from strangers: a parse that refuses
// duplicate keys (nlohmann keeps the last one silently, which lets two readers of one file
// disagree) and nesting deeper than the format allows, and safe quoting of names in messages.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// Thrown by parse_json_strict for a duplicate key or too deep a nesting; what() says which.
class JsonStrictError : public std::runtime_error {
 public:
  JsonStrictError(const std::string& message, std::string key, int depth)
      : std::runtime_error(message), key_(std::move(key)), depth_(depth) {}
  const std::string& key() const { return key_; }  // the duplicate key, or empty
  int depth() const { return depth_; }             // 1 = a key of the top-level object

 private:
  std::string key_;
  int depth_;
};

// Parses `text` as one JSON value (surrounding whitespace allowed). An object or array that
// starts at a depth greater than `max_depth` (the top-level value is depth 0) throws
// JsonStrictError before it is built, as does a key repeated within one object. Syntax
// errors throw nlohmann::json::exception. nlohmann's objects are sorted by key; when
// `top_level_keys` is given it receives the keys of a top-level object in file order.
nlohmann::json parse_json_strict(std::string_view text, int max_depth,
                                 std::vector<std::string>* top_level_keys = nullptr);

// `s` in single quotes for an error message, control characters escaped as \xNN so that a
// name taken from a file cannot rewrite the terminal.
std::string quote_name(std::string_view s);

}  // namespace tern
