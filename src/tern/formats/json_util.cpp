#include "tern/formats/json_util.h"

#include <cstdio>
#include <set>

namespace tern {

nlohmann::json parse_json_strict(std::string_view text, int max_depth,
                                 std::vector<std::string>* top_level_keys) {
  using json = nlohmann::json;
  // Keys seen in each open object, innermost last (arrays open no entry: keys only occur in
  // objects).
  std::vector<std::set<std::string, std::less<>>> open;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > max_depth)
          throw JsonStrictError(
              "JSON nests deeper than " + std::to_string(max_depth + 1) + " levels", "", depth);
        if (event == json::parse_event_t::object_start) open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open.empty() && !open.back().insert(key).second)
          throw JsonStrictError("duplicate key '" + key + "'", key, depth);
        if (depth == 1 && top_level_keys != nullptr) top_level_keys->push_back(key);
        break;
      }
      default:
        break;
    }
    return true;
  };
  return json::parse(text.begin(), text.end(), callback);
}

std::string quote_name(std::string_view s) {
  std::string q;
  q.reserve(s.size() + 2);
  q.push_back('\'');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      q.append(buf);
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

}  // namespace tern
