// Grammar building and its lowering to byte-level alternatives: repetition becomes rules
// (x* → S ::= x S | ε, tail-recursive so the matcher's stacks stay flat), Unicode classes
// become the UTF-8 byte sequences of their ranges.
#include "tern/structured/grammar.h"

#include <algorithm>
#include <unordered_map>

#include "tern/core/error.h"

namespace tern::structured {

Expr Expr::lit(std::string s) {
  Expr e;
  e.kind = Kind::kLiteral;
  e.literal = std::move(s);
  return e;
}
Expr Expr::ref(int32_t rule) {
  Expr e;
  e.kind = Kind::kRuleRef;
  e.rule = rule;
  return e;
}
Expr Expr::seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kSequence;
  e.children = std::move(items);
  return e;
}
Expr Expr::alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAlternatives;
  e.children = std::move(items);
  return e;
}
Expr Expr::repeat(Expr item, int32_t min, int32_t max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.children.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}
Expr Expr::chars(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  Expr e;
  e.kind = Kind::kCharClass;
  e.ranges = std::move(ranges);
  e.negated = negated;
  return e;
}

int32_t Grammar::rule(const std::string& name) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return static_cast<int32_t>(i);
  names_.push_back(name);
  bodies_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(names_.size() - 1);
}

int32_t Grammar::fresh(const std::string& hint) {
  std::string name = hint + "-" + std::to_string(names_.size());
  names_.push_back(name);
  bodies_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(names_.size() - 1);
}

void Grammar::define(int32_t rule, Expr body) {
  bodies_[static_cast<size_t>(rule)] = std::move(body);
  defined_[static_cast<size_t>(rule)] = true;
}

namespace {

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

std::vector<uint8_t> encode(uint32_t cp) {
  if (cp < 0x80) return {static_cast<uint8_t>(cp)};
  if (cp < 0x800)
    return {static_cast<uint8_t>(0xC0 | (cp >> 6)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  if (cp < 0x10000)
    return {static_cast<uint8_t>(0xE0 | (cp >> 12)),
            static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
            static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  return {static_cast<uint8_t>(0xF0 | (cp >> 18)), static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F)),
          static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
          static_cast<uint8_t>(0x80 | (cp & 0x3F))};
}

// lo, hi: encodings of one length, lo <= hi. Emits byte-range runs covering exactly [lo, hi].
void split(std::vector<uint8_t> lo, std::vector<uint8_t> hi, size_t i, ByteRanges& prefix,
           std::vector<ByteRanges>& out) {
  const size_t n = lo.size();
  auto emit = [&](uint8_t a, uint8_t b) {
    ByteRanges r = prefix;
    r.emplace_back(a, b);
    for (size_t j = i + 1; j < n; ++j) r.emplace_back(0x80, 0xBF);
    out.push_back(std::move(r));
  };
  if (i + 1 == n) {
    emit(lo[i], hi[i]);
    return;
  }
  if (lo[i] == hi[i]) {
    prefix.emplace_back(lo[i], lo[i]);
    split(lo, hi, i + 1, prefix, out);
    prefix.pop_back();
    return;
  }
  bool lo_min = true, hi_max = true;
  for (size_t j = i + 1; j < n; ++j) {
    lo_min = lo_min && lo[j] == 0x80;
    hi_max = hi_max && hi[j] == 0xBF;
  }
  uint32_t a = lo[i], b = hi[i];
  if (!lo_min) {
    std::vector<uint8_t> top = lo;
    for (size_t j = i + 1; j < n; ++j) top[j] = 0xBF;
    split(lo, top, i, prefix, out);
    ++a;
  }
  std::vector<ByteRanges> upper;
  if (!hi_max) {
    std::vector<uint8_t> bottom = hi;
    for (size_t j = i + 1; j < n; ++j) bottom[j] = 0x80;
    split(bottom, hi, i, prefix, upper);
    --b;
  }
  if (a <= b) emit(static_cast<uint8_t>(a), static_cast<uint8_t>(b));
  for (auto& r : upper) out.push_back(std::move(r));
}

}  // namespace

void utf8_byte_ranges(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& alts) {
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  const std::pair<uint32_t, uint32_t> pieces[] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (const auto& [plo, phi] : pieces) {
    const uint32_t a = std::max(lo, plo), b = std::min(hi, phi);
    if (a > b) continue;
    ByteRanges prefix;
    split(encode(a), encode(b), 0, prefix, alts);
  }
}

namespace {

constexpr int32_t kMaxRepeat = 10000;

struct Atom {
  bool is_ref;
  int32_t arg;  // byte set index or rule
};
using Alt = std::vector<Atom>;

class Lowering {
 public:
  explicit Lowering(const Grammar& g) : g_(g) {
    rules_.resize(static_cast<size_t>(g.num_rules()));
    for (int32_t r = 0; r < g.num_rules(); ++r) names_.push_back(g.name(r));
  }

  FlatGrammar run() {
    if (g_.root < 0 || g_.root >= g_.num_rules() || !g_.defined(g_.root))
      throw Error("grammar: no root rule");
    for (int32_t r = 0; r < g_.num_rules(); ++r) {
      if (!g_.defined(r)) continue;
      rules_[static_cast<size_t>(r)] = alts_of(g_.body(r));
    }
    check_refs();
    check_left_recursion();
    FlatGrammar out;
    out.byte_sets = std::move(sets_);
    out.rule_names = names_;
    out.root = g_.root;
    out.alternatives.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Alt& alt : rules_[r]) {
        out.alternatives[r].push_back(static_cast<int32_t>(out.elements.size()));
        for (const Atom& a : alt)
          out.elements.push_back(
              {a.is_ref ? FlatGrammar::Element::Kind::kRef : FlatGrammar::Element::Kind::kBytes,
               a.arg});
        out.elements.push_back({FlatGrammar::Element::Kind::kEnd, 0});
      }
    }
    return out;
  }

 private:
  int32_t new_rule(const std::string& hint) {
    names_.push_back(hint + "-" + std::to_string(names_.size()));
    rules_.emplace_back();
    return static_cast<int32_t>(rules_.size() - 1);
  }

  int32_t byte_set(const std::bitset<256>& s) {
    auto [it, fresh] = set_ids_.try_emplace(s, static_cast<int32_t>(sets_.size()));
    if (fresh) sets_.push_back(s);
    return it->second;
  }

  std::vector<Alt> alts_of(const Expr& e) {
    std::vector<Alt> alts;
    if (e.kind == Expr::Kind::kAlternatives) {
      for (const Expr& c : e.children) {
        alts.emplace_back();
        seq_into(c, alts.back());
      }
    } else {
      alts.emplace_back();
      seq_into(e, alts.back());
    }
    return alts;
  }

  Atom rule_of(std::vector<Alt> alts, const std::string& hint) {
    const int32_t r = new_rule(hint);
    rules_[static_cast<size_t>(r)] = std::move(alts);
    return {true, r};
  }

  void char_class(const Expr& e, Alt& out) {
    // The code point set, normalised: sorted, merged, complemented when negated.
    std::vector<std::pair<uint32_t, uint32_t>> r = e.ranges;
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (auto [lo, hi] : r) {
      if (lo > hi) throw Error("grammar: character range is reversed");
      if (!merged.empty() && lo <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, hi);
      else
        merged.emplace_back(lo, hi);
    }
    if (e.negated) {
      std::vector<std::pair<uint32_t, uint32_t>> comp;
      uint32_t next = 0;
      for (auto [lo, hi] : merged) {
        if (lo > next) comp.emplace_back(next, lo - 1);
        next = hi + 1;
      }
      if (next <= 0x10FFFF) comp.emplace_back(next, 0x10FFFF);
      merged = std::move(comp);
    }
    std::bitset<256> ascii;
    std::vector<ByteRanges> multi;
    for (auto [lo, hi] : merged) {
      for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x7F); ++c) ascii.set(c);
      if (hi >= 0x80) utf8_byte_ranges(std::max<uint32_t>(lo, 0x80), hi, multi);
    }
    if (multi.empty()) {
      out.push_back({false, byte_set(ascii)});  // an empty set never matches
      return;
    }
    std::vector<Alt> alts;
    if (ascii.any()) alts.push_back({{false, byte_set(ascii)}});
    for (const ByteRanges& m : multi) {
      Alt a;
      for (auto [lo, hi] : m) {
        std::bitset<256> s;
        for (uint32_t c = lo; c <= hi; ++c) s.set(c);
        a.push_back({false, byte_set(s)});
      }
      alts.push_back(std::move(a));
    }
    out.push_back(rule_of(std::move(alts), "class"));
  }

  void seq_into(const Expr& e, Alt& out) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        for (unsigned char c : e.literal) {
          std::bitset<256> s;
          s.set(c);
          out.push_back({false, byte_set(s)});
        }
        return;
      case Expr::Kind::kCharClass:
        char_class(e, out);
        return;
      case Expr::Kind::kRuleRef:
        if (e.rule < 0 || e.rule >= g_.num_rules()) throw Error("grammar: bad rule reference");
        out.push_back({true, e.rule});
        return;
      case Expr::Kind::kSequence:
        for (const Expr& c : e.children) seq_into(c, out);
        return;
      case Expr::Kind::kAlternatives:
        if (e.children.size() == 1) {
          seq_into(e.children[0], out);
        } else {
          out.push_back(rule_of(alts_of(e), "alt"));
        }
        return;
      case Expr::Kind::kRepeat: {
        if (e.min < 0 || e.min > kMaxRepeat || e.max > kMaxRepeat || (e.max >= 0 && e.max < e.min))
          throw Error("grammar: repetition {" + std::to_string(e.min) + "," +
                      std::to_string(e.max) + "} is out of range (at most " +
                      std::to_string(kMaxRepeat) + ")");
        Alt item;
        seq_into(e.children.at(0), item);
        if (item.size() != 1) item = {rule_of({item}, "item")};
        const Atom x = item[0];
        for (int32_t i = 0; i < e.min; ++i) out.push_back(x);
        if (e.max < 0) {
          const int32_t s = new_rule("star");
          rules_[static_cast<size_t>(s)] = {{x, {true, s}}, {}};
          out.push_back({true, s});
        } else if (e.max > e.min) {
          int32_t prev = -1;
          for (int32_t i = 0; i < e.max - e.min; ++i) {
            const int32_t o = new_rule("opt");
            Alt a{x};
            if (prev >= 0) a.push_back({true, prev});
            rules_[static_cast<size_t>(o)] = {a, {}};
            prev = o;
          }
          out.push_back({true, prev});
        }
        return;
      }
    }
  }

  void check_refs() const {
    for (const auto& alts : rules_)
      for (const Alt& a : alts)
        for (const Atom& x : a)
          if (x.is_ref && x.arg < g_.num_rules() && !g_.defined(x.arg))
            throw Error("grammar: rule '" + names_[static_cast<size_t>(x.arg)] +
                        "' is used but not defined");
  }

  void check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Alt& a : rules_[r]) {
          bool all = true;
          for (const Atom& x : a) all = all && x.is_ref && nullable[static_cast<size_t>(x.arg)];
          if (all) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    // r → s when s can be the first thing r expands to without consuming a byte.
    std::vector<std::vector<int32_t>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (const Alt& a : rules_[r])
        for (const Atom& x : a) {
          if (!x.is_ref) break;
          first[r].push_back(x.arg);
          if (!nullable[static_cast<size_t>(x.arg)]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> stack;
    for (size_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      stack.push_back({static_cast<int32_t>(start), 0});
      color[start] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        const auto& next = first[static_cast<size_t>(r)];
        if (i == next.size()) {
          color[static_cast<size_t>(r)] = 2;
          stack.pop_back();
          continue;
        }
        const int32_t s = next[i++];
        if (color[static_cast<size_t>(s)] == 1)
          throw Error("grammar: rule '" + names_[static_cast<size_t>(s)] +
                      "' is left-recursive (or repeats something that can be empty)");
        if (color[static_cast<size_t>(s)] == 0) {
          color[static_cast<size_t>(s)] = 1;
          stack.push_back({s, 0});
        }
      }
    }
  }

  const Grammar& g_;
  std::vector<std::vector<Alt>> rules_;
  std::vector<std::string> names_;
  std::vector<std::bitset<256>> sets_;
  std::unordered_map<std::bitset<256>, int32_t> set_ids_;
};

}  // namespace

FlatGrammar flatten(const Grammar& grammar) { return Lowering(grammar).run(); }

}  // namespace tern::structured
