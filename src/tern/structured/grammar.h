// The grammar every constraint compiles to (GBNF text, a JSON schema, a regex, a choice): named
// rules whose bodies are expressions over literals, character classes and rule references,
// with repetition; then flattened to byte-level alternatives the matcher walks.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tern::structured {

struct Expr {
  enum class Kind { kLiteral, kCharClass, kRuleRef, kSequence, kAlternatives, kRepeat };
  Kind kind = Kind::kSequence;
  std::string literal;                                // kLiteral: UTF-8 bytes
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // kCharClass: code point ranges
  bool negated = false;                               // kCharClass
  int32_t rule = -1;                                  // kRuleRef
  std::vector<Expr> children;                         // kSequence, kAlternatives, kRepeat (one)
  int32_t min = 0, max = -1;                          // kRepeat; max -1: unbounded

  static Expr lit(std::string s);
  static Expr ref(int32_t rule);
  static Expr seq(std::vector<Expr> items);
  static Expr alt(std::vector<Expr> items);
  static Expr repeat(Expr item, int32_t min, int32_t max);
  static Expr chars(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated = false);
};

// A one-byte literal.
inline Expr ch(char c) { return Expr::lit(std::string(1, c)); }

// Rules by name; rule 0 is not special, `root` says which rule is the start.
class Grammar {
 public:
  // The id of rule `name`, created (undefined) when new.
  int32_t rule(const std::string& name);
  // A fresh rule with a name derived from `hint`.
  int32_t fresh(const std::string& hint);
  void define(int32_t rule, Expr body);
  bool defined(int32_t rule) const { return defined_[static_cast<size_t>(rule)]; }
  int32_t num_rules() const { return static_cast<int32_t>(names_.size()); }
  const std::string& name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }
  const Expr& body(int32_t rule) const { return bodies_[static_cast<size_t>(rule)]; }
  int32_t root = -1;

 private:
  std::vector<std::string> names_;
  std::vector<Expr> bodies_;
  std::vector<bool> defined_;
};

// The flattened, byte-level form: each rule is a list of alternatives, each alternative a run
// of elements ending in kEnd; an element matches one byte of a set or calls a rule.
struct FlatGrammar {
  struct Element {
    enum class Kind : uint8_t { kBytes, kRef, kEnd };
    Kind kind = Kind::kEnd;
    int32_t arg = 0;  // kBytes: index into byte_sets; kRef: rule
  };
  std::vector<Element> elements;
  std::vector<std::bitset<256>> byte_sets;
  std::vector<std::vector<int32_t>> alternatives;  // [rule] → start positions in `elements`
  std::vector<std::string> rule_names;
  int32_t root = 0;
};

// Checks every referenced rule is defined and none is left-recursive (a rule reaching itself
// before consuming a byte, which the matcher could not expand), then lowers repetition and
// Unicode classes to byte-level rules. Throws tern::Error naming the rule.
FlatGrammar flatten(const Grammar& grammar);

// Appends to `alts` the byte sequences (each a run of byte ranges) of the UTF-8 encodings of
// code points [lo, hi] (surrogates excluded).
void utf8_byte_ranges(uint32_t lo, uint32_t hi,
                      std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& alts);

}  // namespace tern::structured
