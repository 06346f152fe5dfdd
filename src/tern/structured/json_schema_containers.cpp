// The schema compiler's arrays (positional items, then the rest) and objects (properties in
// sorted order, then the members patternProperties and additionalProperties allow).
#include <optional>
#include <set>

#include "tern/core/error.h"
#include "tern/structured/json_schema_compiler.h"
#include "tern/structured/json_schema_strings.h"

namespace tern::structured {
namespace {

// Each pair of patterns is checked for overlap: a bound on that work.
constexpr size_t kMaxPatterns = 32;

}  // namespace

// Positional items (prefixItems, or the older items as a list), then the rest (items after
// prefixItems, additionalItems after a list; absent: no more, as for additionalProperties).
int32_t SchemaCompiler::array_node(const json& s, const std::string& path, int depth) {
  const int32_t min = count(s, "minItems", path, 0);
  int32_t limit = count(s, "maxItems", path, -1);  // -1: no limit
  if (limit >= 0 && limit < min) fail("'maxItems' is below 'minItems'", path);
  const auto items = s.find("items"), prefix = s.find("prefixItems");
  const auto additional = s.find("additionalItems");
  const bool tuple = items != s.end() && items->is_array();
  const char* prefix_key = prefix != s.end() ? "prefixItems" : tuple ? "items" : nullptr;
  const char* rest_key = prefix != s.end() ? "items" : tuple ? "additionalItems" : "items";
  if (prefix != s.end()) {
    if (!prefix->is_array()) fail("'prefixItems' must be a list of schemas", path);
    if (tuple) fail("'prefixItems' with 'items' as a list is not supported", path);
    if (additional != s.end())
      fail("'additionalItems' with 'prefixItems' (the rest is 'items')", path);
  }
  // additionalItems without a list of items binds nothing (so the spec says): ignored.
  const auto rest = s.find(rest_key);
  const bool rest_false = rest != s.end() && rest->is_boolean() && !rest->get<bool>();
  std::vector<int32_t> positional;
  bool rest_allowed = prefix_key == nullptr || (rest != s.end() && !rest_false);
  if (prefix_key != nullptr) {
    const json& list = s[prefix_key];
    for (size_t i = 0; i < list.size(); ++i) {
      // A false schema here: no item i, so none after it.
      if (list[i].is_boolean() && !list[i].get<bool>()) {
        rest_allowed = false;
        break;
      }
      positional.push_back(
          node(list[i], path + "/" + prefix_key + "/" + std::to_string(i), depth + 1));
    }
  } else if (rest_false) {
    rest_allowed = false;
  }
  const auto k = static_cast<int32_t>(positional.size());
  if (!rest_allowed) limit = limit < 0 ? k : std::min(limit, k);
  if (limit >= 0 && min > limit)
    fail("'minItems' " + std::to_string(min) + " asks for more items than the " +
             std::to_string(limit) + " the schema allows" +
             (prefix_key != nullptr && rest == s.end()
                  ? std::string(" (with no '") + rest_key + "', none past the positional ones)"
                  : ""),
         path);
  if (limit == 0) return define("array", Expr::seq({ch('['), Expr::ref(ws_), ch(']')}));
  if (limit >= 0 && limit < k) positional.resize(static_cast<size_t>(limit));
  const int32_t n = static_cast<int32_t>(positional.size());
  Expr tail = Expr::seq({});  // the items from n on
  if (limit < 0 || limit > n) {
    const int32_t rest_rule =
        rest == s.end() ? value_any() : node(*rest, path + "/" + rest_key, depth + 1);
    const Expr more = Expr::seq({ch(','), Expr::ref(ws_), Expr::ref(rest_rule), Expr::ref(ws_)});
    const int32_t lo = std::max(min - n, 0), hi = limit < 0 ? -1 : limit - n;
    if (n > 0) {
      tail = Expr::repeat(more, lo, hi);
    } else {
      tail = Expr::seq({Expr::ref(rest_rule), Expr::ref(ws_),
                        Expr::repeat(more, std::max(lo - 1, 0), hi < 0 ? -1 : hi - 1)});
      if (lo == 0) tail = Expr::alt({std::move(tail), Expr::seq({})});
    }
  }
  for (int32_t i = n; i-- > 0;) {
    std::vector<Expr> item;
    if (i > 0) item = {ch(','), Expr::ref(ws_)};
    item.push_back(Expr::ref(positional[static_cast<size_t>(i)]));
    item.push_back(Expr::ref(ws_));
    item.push_back(std::move(tail));
    tail = Expr::seq(std::move(item));
    if (i >= min) tail = Expr::alt({std::move(tail), Expr::seq({})});
  }
  return define("array", Expr::seq({ch('['), Expr::ref(ws_), std::move(tail), ch(']')}));
}

// The members an object may have besides its properties, one form each: a key matching a
// patternProperties pattern with its schema's value, or (additionalProperties true or a
// schema) any key. Absent or false: none. Refused where a key could fall under two schemas,
// which would need a value satisfying both.
std::vector<Expr> SchemaCompiler::extra_members(
    const json& s, const std::vector<std::pair<std::string, int32_t>>& props,
    const std::string& path, int depth) {
  std::vector<Expr> out;
  auto member = [&](Expr key, int32_t value) {
    return Expr::seq({std::move(key), Expr::ref(ws_), ch(':'), Expr::ref(ws_), Expr::ref(value),
                      Expr::ref(ws_)});
  };
  const auto additional = s.find("additionalProperties");
  const bool any_extra = additional != s.end() && *additional != json(false);
  if (auto it = s.find("patternProperties"); it != s.end()) {
    if (!it->is_object()) fail("'patternProperties' must be an object", path);
    if (any_extra && !it->empty())
      fail("'patternProperties' beside 'additionalProperties' (other than false) is not supported",
           path);
    if (it->size() > kMaxPatterns)
      fail("'patternProperties' has more than " + std::to_string(kMaxPatterns) + " patterns", path);
    // Each pattern's search automaton, checked against the properties and the patterns before.
    struct Seen {
      std::string pattern;
      Automaton search;
      const json* schema;
    };
    std::vector<Seen> done;
    for (const auto& [pattern, schema] : it->items()) {
      const std::string at = path + "/patternProperties/" + pattern;
      std::optional<Automaton> search;
      Expr key;
      try {
        search.emplace(search_automaton(pattern));
        key = pattern_expr(pattern, g_);
      } catch (const Error& e) {
        fail(std::string("'patternProperties': ") + e.what(), at);
      }
      for (const auto& p : props)
        if (search->matches(p.first))
          fail("property '" + p.first +
                   "' also matches the pattern (a key both named and patterned is not supported)",
               at);
      for (Seen& other : done)
        if (*other.schema != schema && may_overlap(*search, other.search))
          fail("the pattern and '" + other.pattern +
                   "' may both match a key (with different schemas)",
               at);
      done.push_back({pattern, std::move(*search), &schema});
      if (schema == json(false)) continue;  // such keys are never written
      out.push_back(
          member(Expr::seq({ch('"'), std::move(key), ch('"')}), node(schema, at, depth + 1)));
    }
  }
  if (any_extra) {
    const int32_t value = additional->is_boolean()
                              ? value_any()
                              : node(*additional, path + "/additionalProperties", depth + 1);
    out.push_back(member(Expr::ref(string_rule(0, -1)), value));
  }
  return out;
}

int32_t SchemaCompiler::object_node(const json& s, const std::string& path, int depth) {
  std::vector<std::pair<std::string, int32_t>> props;  // key, value rule
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) fail("'required' must be a list of strings", path);
    for (const json& r : *it) {
      if (!r.is_string()) fail("'required' must be a list of strings", path);
      required.insert(r.get<std::string>());
    }
  }
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) fail("'properties' must be an object", path);
    for (const auto& [k, v] : it->items())
      props.emplace_back(k, node(v, path + "/properties/" + k, depth + 1));
  }
  for (const std::string& r : required) {
    bool found = false;
    for (const auto& p : props) found = found || p.first == r;
    if (!found) fail("required property '" + r + "' is not in 'properties'", path);
  }
  const std::vector<Expr> extras = extra_members(s, props, path, depth);

  // Keys come in sorted order: a parsed nlohmann::json has lost the schema's own order.
  auto member = [&](const std::string& key, int32_t value) {
    return Expr::seq({Expr::lit(json(key).dump()), Expr::ref(ws_), ch(':'), Expr::ref(ws_),
                      Expr::ref(value), Expr::ref(ws_)});
  };
  const Expr comma = Expr::seq({ch(','), Expr::ref(ws_)});
  const size_t n = props.size();
  // after[i]: members i… when one came before (each written after a comma); first[i]: when
  // none did.
  std::vector<int32_t> after(n + 1), first(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    after[i] = g_.fresh("members");
    first[i] = g_.fresh("members");
  }
  if (!extras.empty()) {
    const Expr kv = Expr::alt(extras);
    g_.define(after[n], Expr::repeat(Expr::seq({comma, kv}), 0, -1));
    g_.define(first[n],
              Expr::repeat(Expr::seq({kv, Expr::repeat(Expr::seq({comma, kv}), 0, -1)}), 0, 1));
  } else {
    g_.define(after[n], Expr::seq({}));
    g_.define(first[n], Expr::seq({}));
  }
  for (size_t i = n; i-- > 0;) {
    const Expr kv = member(props[i].first, props[i].second);
    const bool req = required.count(props[i].first) > 0;
    const Expr with_after = Expr::seq({comma, kv, Expr::ref(after[i + 1])});
    const Expr with_first = Expr::seq({kv, Expr::ref(after[i + 1])});
    g_.define(after[i], req ? with_after : Expr::alt({with_after, Expr::ref(after[i + 1])}));
    g_.define(first[i], req ? with_first : Expr::alt({with_first, Expr::ref(first[i + 1])}));
  }
  return define("object", Expr::seq({ch('{'), Expr::ref(ws_), Expr::ref(first[0]), ch('}')}));
}

}  // namespace tern::structured
