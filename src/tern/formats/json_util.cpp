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

std::optional<size_t> utf8_error(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
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
