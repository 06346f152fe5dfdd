// The JSON-schema keywords beyond types and properties: numeric bounds (exact digit automata,
// checked value by value over windows of random ranges), tuples, patternProperties and the
// formats; and random walks through each compiled grammar, every one checked by the tests' own
// validator.
#include "tern/structured/json_schema.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "schema_validator.h"
#include "tern/core/error.h"
#include "tern/structured/automaton.h"

namespace tern::structured {
namespace {

using nlohmann::json;
using tern::testing::schema_violation;

Automaton schema(const json& s) { return Automaton(flatten(compile_json_schema(s))); }

void expect_matches(const json& s, const std::vector<std::string>& yes,
                    const std::vector<std::string>& no) {
  Automaton a = schema(s);
  for (const std::string& t : yes) EXPECT_TRUE(a.matches(t)) << s.dump() << " should match " << t;
  for (const std::string& t : no) EXPECT_FALSE(a.matches(t)) << s.dump() << " should refuse " << t;
}

std::string error_of(const json& s) {
  try {
    (void)flatten(compile_json_schema(s));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Every integer of [from, to] matches exactly when `inside` says so; the validator agrees.
template <typename Inside>
void expect_integer_window(Automaton& a, const json& s, int64_t from, int64_t to, Inside inside) {
  for (int64_t x = from; x <= to; ++x) {
    const std::string text = std::to_string(x);
    EXPECT_EQ(a.matches(text), inside(x)) << s.dump() << " on " << text;
    EXPECT_EQ(schema_violation(json(x), s, s).empty(), inside(x)) << s.dump() << " on " << text;
  }
}

TEST(StructuredJsonSchemaBounds, IntegerRangesAcrossDigitCounts) {
  struct Case {
    std::optional<int64_t> lo, hi;
  };
  for (const Case c : {Case{7, 1234}, Case{-15, 20}, Case{0, 0}, Case{-100, -3}, Case{0, {}},
                       Case{{}, -5}, Case{-9, 9}, Case{10, 99}, Case{99, 100}, Case{-1000, -1000},
                       Case{1, 1000000}, Case{{}, 0}, Case{-1, {}}}) {
    json s = {{"type", "integer"}};
    if (c.lo) s["minimum"] = *c.lo;
    if (c.hi) s["maximum"] = *c.hi;
    Automaton a = schema(s);
    for (const int64_t centre : {c.lo.value_or(-1000), c.hi.value_or(1000), int64_t{0}})
      expect_integer_window(a, s, centre - 1100, centre + 1100, [&](int64_t x) {
        return (!c.lo || x >= *c.lo) && (!c.hi || x <= *c.hi);
      });
  }
  // Never "-0", leading zeros, a '+', a fraction or an exponent.
  expect_matches({{"type", "integer"}, {"minimum", -5}, {"maximum", 130}},
                 {"0", "-5", "130", "42", " 7"},
                 {"-0", "007", "+5", "1.0", "1e2", "131", "-6", "", "-", "1300"});
  // Unbounded sides stop at 16 digits, as unbounded integers do.
  expect_matches({{"type", "integer"}, {"minimum", 0}}, {"9999999999999999", "1000000000000000"},
                 {"10000000000000000"});
  expect_matches({{"type", "integer"}, {"maximum", -5}}, {"-9999999999999999", "-5"},
                 {"-10000000000000000", "-4", "0"});
}

TEST(StructuredJsonSchemaBounds, ExclusiveAndDecimalBoundsOnIntegers) {
  // An integer type with decimal bounds: minimum 1.5 means 2 or more.
  expect_matches(json::parse(R"({"type": "integer", "minimum": 1.5, "maximum": 4.99})"),
                 {"2", "3", "4"}, {"1", "5"});
  expect_matches(
      json::parse(R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 3.0})"),
      {"-2", "0", "2"}, {"-3", "3"});
  // Draft 4's booleans.
  expect_matches(json::parse(R"({"type": "integer", "minimum": 3, "exclusiveMinimum": true,
                                 "maximum": 5, "exclusiveMaximum": false})"),
                 {"4", "5"}, {"3", "6"});
  // The tighter of two lower bounds wins; a bound past 16 digits binds nothing.
  expect_matches(
      json::parse(R"({"type": "integer", "minimum": 2, "exclusiveMinimum": 2, "maximum": 1e20})"),
      {"3", "9999999999999999"}, {"2"});
  expect_matches(json::parse(R"({"type": "integer", "minimum": -1e300, "maximum": 0})"),
                 {"-9999999999999999", "0"}, {"1"});
  // Bounds without a type make the value a number.
  expect_matches(json::parse(R"({"minimum": 0, "maximum": 1})"), {"0", "0.5", "1"},
                 {"-1", "1.5", "\"a\""});
}

// Random ranges with bounds of every digit count, one-sided and exclusive ones among them:
// every integer around each bound and around each power of ten inside matches iff it is in.
TEST(StructuredJsonSchemaBounds, RandomIntegerRangesMatchExactlyTheirIntegers) {
  std::mt19937_64 rng(31);
  auto draw = [&]() {
    const int digits = static_cast<int>(rng() % 8);
    int64_t magnitude = 1;
    for (int i = 0; i < digits; ++i) magnitude *= 10;
    const auto v = static_cast<int64_t>(rng() % static_cast<uint64_t>(magnitude * 2));
    return rng() % 3 == 0 ? -v : v;
  };
  for (int round = 0; round < 200; ++round) {
    int64_t lo = draw(), hi = draw();
    if (lo > hi) std::swap(lo, hi);
    const int sides = static_cast<int>(rng() % 4);  // 0: both, 1: lower only, 2: upper only
    const bool lo_strict = rng() % 3 == 0, hi_strict = rng() % 3 == 0;
    const bool has_lo = sides != 2, has_hi = sides != 1;
    if (has_lo && has_hi && (lo_strict || hi_strict) && hi - lo < 2) hi = lo + 2;
    json s = {{"type", "integer"}};
    if (has_lo) s[lo_strict ? "exclusiveMinimum" : "minimum"] = lo;
    if (has_hi) s[hi_strict ? "exclusiveMaximum" : "maximum"] = hi;
    auto inside = [&](int64_t x) {
      return (!has_lo || (lo_strict ? x > lo : x >= lo)) &&
             (!has_hi || (hi_strict ? x < hi : x <= hi));
    };
    Automaton a = schema(s);
    std::vector<int64_t> centres = {lo, hi, 0};
    for (int64_t p = 1; p <= 100000000; p *= 10) {
      centres.push_back(p);
      centres.push_back(-p);
    }
    for (const int64_t c : centres) expect_integer_window(a, s, c - 25, c + 25, inside);
    if (::testing::Test::HasFailure()) FAIL() << "round " << round << ": " << s.dump();
  }
}

TEST(StructuredJsonSchemaBounds, NumbersFromTheJsonSchemaTestSuite) {
  expect_matches(json::parse(R"({"type": "number", "minimum": 1.1})"),
                 {"1.1", "2.6", "1.10", "1.100000001", "2", "1000"}, {"0.6", "1.09", "1", "-1.1"});
  expect_matches(json::parse(R"({"type": "number", "maximum": 3.0})"), {"2.6", "3.0", "3", "-7"},
                 {"3.5", "3.0001", "4"});
  expect_matches(json::parse(R"({"type": "number", "exclusiveMaximum": 3.0})"),
                 {"2.2", "2.9999", "-3"}, {"3.0", "3", "3.00", "3.0001"});
  expect_matches(json::parse(R"({"type": "number", "exclusiveMinimum": 1.1})"), {"1.2", "1.11"},
                 {"1.1", "1.10", "0.6"});
  expect_matches(json::parse(R"({"type": "number", "minimum": -2})"),
                 {"-1", "-2", "-2.0", "-1.9999", "0", "0.5"}, {"-2.0001", "-3", "-2.5"});
  expect_matches(json::parse(R"({"type": "number", "maximum": 300})"), {"299.97", "300", "300.00"},
                 {"300.5", "300.01", "301"});
  expect_matches(json::parse(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 0.25})"),
                 {"0.1", "0.25", "0.00001", "0.250"}, {"0", "0.0", "-0.1", "0.2500001", "-0"});
  expect_matches(json::parse(R"({"type": "number", "minimum": -0.5, "exclusiveMaximum": 0})"),
                 {"-0.5", "-0.25", "-0.0001"}, {"0", "-0.5001", "-1", "-0", "-0.0"});
  // Bounded numbers have no exponent and at most 15 digits: a double parser reads each on the
  // bound's side (2.9999999999999999 would parse as 3.0).
  expect_matches(json::parse(R"({"type": "number", "exclusiveMaximum": 3})"), {"2.99999999999999"},
                 {"2.9999999999999999", "2.999999999999999", "2e0", "1E-5"});
}

// Bounds and values on a grid of thousandths: every value in windows around the bounds
// matches iff it is inside, in each of its spellings (1.5, 1.50, 1.500; 2, 2.0).
TEST(StructuredJsonSchemaBounds, RandomNumberRangesMatchExactlyTheirNumbers) {
  std::mt19937_64 rng(11);
  auto spellings = [](int64_t thousandths) {
    const int64_t whole = std::llabs(thousandths) / 1000, frac = std::llabs(thousandths) % 1000;
    const std::string sign = thousandths < 0 ? "-" : "";
    std::string three = std::to_string(frac);
    three = std::string(3 - three.size(), '0') + three;
    std::vector<std::string> out = {sign + std::to_string(whole) + "." + three};
    std::string t = three;
    while (!t.empty() && t.back() == '0') {
      t.pop_back();
      out.push_back(sign + std::to_string(whole) + (t.empty() ? "" : "." + t));
    }
    if (thousandths == 0) out = {"0", "0.0", "0.000"};
    return out;
  };
  for (int round = 0; round < 120; ++round) {
    // Bounds in hundredths within ±30.
    int64_t lo = static_cast<int64_t>(rng() % 6001) - 3000,
            hi = static_cast<int64_t>(rng() % 6001) - 3000;
    if (lo > hi) std::swap(lo, hi);
    const int sides = static_cast<int>(rng() % 4);
    const bool lo_strict = rng() % 2 == 0, hi_strict = rng() % 2 == 0;
    const bool has_lo = sides != 2, has_hi = sides != 1;
    if (has_lo && has_hi && hi == lo) ++hi;
    json s = {{"type", "number"}};
    if (has_lo) s[lo_strict ? "exclusiveMinimum" : "minimum"] = static_cast<double>(lo) / 100;
    if (has_hi) s[hi_strict ? "exclusiveMaximum" : "maximum"] = static_cast<double>(hi) / 100;
    auto inside = [&](int64_t x) {  // x in thousandths
      return (!has_lo || (lo_strict ? x > lo * 10 : x >= lo * 10)) &&
             (!has_hi || (hi_strict ? x < hi * 10 : x <= hi * 10));
    };
    Automaton a = schema(s);
    for (const int64_t c : {lo * 10, hi * 10, int64_t{0}})
      for (int64_t x = c - 30; x <= c + 30; ++x)
        for (const std::string& text : spellings(x))
          EXPECT_EQ(a.matches(text), inside(x)) << s.dump() << " on " << text;
    if (::testing::Test::HasFailure()) FAIL() << "round " << round << ": " << s.dump();
  }
}

TEST(StructuredJsonSchemaBounds, EnumsConstsAndErrors) {
  expect_matches(json::parse(R"({"enum": [1, 5, 10, "a"], "maximum": 5})"), {"1", "5", "\"a\""},
                 {"10"});
  for (const auto& [s, words] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "integer", "minimum": 5, "maximum": 3})",
            "no integer lies within 'minimum' 5 and 'maximum' 3 (integers have at most 16 digits) "
            "at /"},
           {R"({"properties": {"a": {"type": "integer", "minimum": 1.2, "maximum": 1.8}}})",
            "no integer lies within 'minimum' 1.2 and 'maximum' 1.8 (integers have at most 16 "
            "digits) at /properties/a"},
           {R"({"type": "integer", "minimum": 1e17})", "no integer lies within 'minimum' 1e+17"},
           {R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1.000000000000001})",
            "no number lies within"},
           {R"({"type": "number", "minimum": "3"})", "'minimum' must be a number at /"},
           {R"({"type": "number", "maximum": true})", "'maximum' must be a number at /"},
           {R"({"type": "integer", "exclusiveMaximum": null})",
            "'exclusiveMaximum' must be a number at /"},
           {R"({"type": "integer", "exclusiveMinimum": true})",
            "'exclusiveMinimum' as a boolean needs 'minimum'"},
           {R"({"const": 10, "maximum": 5})", "'const' 10 is outside the schema's bounds"},
           {R"({"enum": [6, 7], "maximum": 5})",
            "no 'enum' value is within the schema's bounds"}}) {
    EXPECT_NE(error_of(json::parse(s)).find(words), std::string::npos)
        << s << ": " << error_of(json::parse(s));
  }
}

TEST(StructuredJsonSchemaArrays, PrefixItemsAndTuples) {
  const json pair =
      json::parse(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]})");
  // Shorter arrays are valid (the spec); extra items are not written (as additionalProperties).
  expect_matches(pair, {"[]", "[1]", R"([1, "a"])", R"([ 1 ,"a" ])"},
                 {R"(["a"])", R"([1, 2])", R"([1, "a", true])", "[,]"});
  const json at_least = json::parse(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}],
      "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4})");
  expect_matches(at_least, {R"([1, "a"])", R"([1, "a", true, false])"},
                 {"[1]", R"([1, "a", true, false, true])", R"([1, "a", 3])"});
  // The older form: items as a list, additionalItems for the rest.
  const json old = json::parse(
      R"({"type": "array", "items": [{"const": "x"}], "additionalItems": {"type": "integer"}, "minItems": 1})");
  expect_matches(old, {R"(["x"])", R"(["x", 1, 2, 3])"}, {"[]", R"([1])", R"(["x", "x"])"});
  expect_matches(json::parse(R"({"type": "array", "items": [{"type": "null"}, false]})"),
                 {"[]", "[null]"}, {"[null, null]"});
  expect_matches(
      json::parse(R"({"type": "array", "prefixItems": [{"type": "null"}], "items": false})"),
      {"[null]"}, {"[null, 1]"});
  expect_matches(json::parse(R"({"type": "array", "items": false})"), {"[]"}, {"[1]"});
  // additionalItems without a list binds nothing.
  expect_matches(
      json::parse(R"({"type": "array", "items": {"type": "integer"}, "additionalItems": false})"),
      {"[1, 2]"}, {R"(["a"])"});
  EXPECT_NE(error_of(json::parse(R"({"prefixItems": [{}, {}], "minItems": 3})"))
                .find("'minItems' 3 asks for more items than the 2 the schema allows (with no "
                      "'items', none past the positional ones) at /"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"prefixItems": [{}], "additionalItems": {}})"))
                .find("'additionalItems' with 'prefixItems'"),
            std::string::npos);
  EXPECT_NE(
      error_of(json::parse(R"({"prefixItems": [{"not": {}}]})")).find("'not' at /prefixItems/0"),
      std::string::npos);
}

TEST(StructuredJsonSchemaObjects, PatternProperties) {
  const json s =
      json::parse(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}},
      "patternProperties": {"^x-[a-z]+$": {"type": "integer", "minimum": 0}, "^n[0-9]": {"type": "null"}},
      "required": ["name"]})");
  expect_matches(s,
                 {R"({"name": "a"})", R"({"name": "a", "x-ab": 1, "x-c": 0})",
                  R"({"name": "a", "n1": null, "n2zz": null, "x-q": 5})"},
                 {R"({"name": "a", "x-ab": -1})", R"({"name": "a", "x-AB": 1})",
                  R"({"name": "a", "y": 1})", R"({"name": "a", "n": null})", R"({"x-ab": 1})"});
  // Unanchored: the pattern is found anywhere in the key.
  expect_matches(json::parse(R"({"patternProperties": {"f.o": {"const": 1}}})"),
                 {"{}", R"({"xfooy": 1, "fao": 1})"}, {R"({"fx": 1})", R"({"foo": 2})"});
  for (const auto& [schema_text, words] : std::vector<std::pair<std::string, std::string>>{
           {R"({"properties": {"xa": {}}, "patternProperties": {"^x": {"type": "integer"}}})",
            "property 'xa' also matches the pattern"},
           {R"({"patternProperties": {"a": {"type": "integer"}, "b": {"type": "string"}}})",
            "may both match a key"},
           {R"({"patternProperties": {"a": {}}, "additionalProperties": true})",
            "beside 'additionalProperties'"},
           {R"({"patternProperties": {"(a)\\1": {}}})",
            "'patternProperties': regex: backreferences"},
           {R"({"patternProperties": {"^a": {"not": {}}}})", "'not' at /patternProperties/^a"}}) {
    EXPECT_NE(error_of(json::parse(schema_text)).find(words), std::string::npos)
        << schema_text << ": " << error_of(json::parse(schema_text));
  }
  // Patterns that cannot meet may carry different schemas; the same schema may overlap.
  EXPECT_EQ(error_of(json::parse(
                R"({"patternProperties": {"^a": {"type": "integer"}, "^b": {"type": "string"}}})")),
            "no error");
  EXPECT_EQ(error_of(json::parse(
                R"({"patternProperties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})")),
            "no error");
}

TEST(StructuredJsonSchemaStrings, FormatsAndLengths) {
  const json date = {{"type", "string"}, {"format", "date"}};
  expect_matches(date,
                 {R"("2024-02-29")", R"("2000-02-29")", R"("2021-04-30")", R"("2021-12-31")",
                  R"("0000-02-29")"},
                 {R"("2023-02-29")", R"("1900-02-29")", R"("2021-04-31")", R"("2021-02-30")",
                  R"("2021-13-01")", R"("2021-00-10")", R"("2021-01-00")", R"("21-01-01")"});
  expect_matches({{"type", "string"}, {"format", "date-time"}},
                 {R"("1963-06-19T08:30:06.283185Z")", R"("1990-12-31T15:59:50.123-08:00")",
                  R"("2024-02-29t23:59:59z")"},
                 {R"("1990-02-31T15:59:59.123-08:00")", R"("1990-12-31T15:59:59-24:00")",
                  R"("1963-06-19 08:30:06Z")", R"("1963-06-19T08:30:06")"});
  const json email = {{"type", "string"}, {"format", "email"}};
  expect_matches(email,
                 {R"("joe.bloggs@example.com")", R"("te~st@example.com")", R"("~test@example.com")",
                  R"("test~@example.com")", R"("te.s.t@example.com")",
                  R"("joe.bloggs@[127.0.0.1]")", R"("a@b-c.d")"},
                 {R"("2962")", R"(".test@example.com")", R"("test.@example.com")",
                  R"("te..st@example.com")", R"("joe.bloggs@invalid=domain.com")",
                  R"("joe.bloggs@[127.0.0.300]")", R"("a@-b.c")", R"("a b@c.d")"});
  expect_matches({{"type", "string"}, {"format", "ipv4"}}, {R"("192.168.0.1")", R"("0.0.0.0")"},
                 {R"("087.10.0.1")", R"("256.256.256.256")", R"("1.2.3")"});
  expect_matches({{"type", "string"}, {"minLength", 2}, {"maxLength", 3}},
                 {R"("ab")", R"("a\"c")", "\"\xc3\xa9\xc3\xa9\""}, {R"("a")", R"("abcd")"});
  expect_matches({{"type", "string"}, {"minLength", 3}}, {R"("abc")", R"("abcdefghij")"},
                 {R"("ab")"});
  EXPECT_NE(error_of({{"type", "string"}, {"format", "ipv6"}})
                .find("unsupported JSON schema format 'ipv6' at /"),
            std::string::npos);
}

// Random walks through each compiled grammar (uniform over the bytes it allows, stopping at
// random where it may): every walk reaches an end, parses, and satisfies the schema.
TEST(StructuredJsonSchema, RandomWalksSatisfyTheirSchemas) {
  const std::vector<std::string> schemas = {
      R"({"type": "integer", "minimum": 7, "maximum": 1234})",
      R"({"type": "integer", "exclusiveMinimum": -15, "maximum": 20})",
      R"({"type": "integer", "maximum": -5})",
      R"({"type": "number", "minimum": 1.1, "exclusiveMaximum": 3})",
      R"({"type": "number", "exclusiveMinimum": -0.5, "maximum": 0.25})",
      R"({"type": "number", "minimum": -1000.125})",
      R"({"type": "array", "prefixItems": [{"type": "number", "minimum": -90, "maximum": 90},
          {"type": "string", "format": "date"}], "items": {"type": "integer", "minimum": 0, "maximum": 9},
          "minItems": 1, "maxItems": 4})",
      R"({"type": "array", "items": [{"type": "string", "format": "email"}], "additionalItems": {"type": "string", "format": "ipv4"}, "maxItems": 3})",
      R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}},
          "patternProperties": {"^x-[a-z]{1,3}$": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100}},
          "required": ["when"]})",
      R"({"type": "object", "properties": {"code": {"type": "string", "minLength": 2, "maxLength": 4}, "t": {"type": "string", "format": "time"}},
          "required": ["code", "t"]})"};
  std::mt19937_64 rng(7);
  for (const std::string& text : schemas) {
    const json s = json::parse(text);
    Automaton a = schema(s);
    int walks = 0;
    for (int w = 0; w < 300; ++w) {
      std::string out;
      int32_t state = a.start();
      while (out.size() < 4000) {
        std::vector<uint8_t> allowed;
        for (int b = 0; b < 256; ++b)
          if (a.next(state, static_cast<uint8_t>(b)) != Automaton::kDead)
            allowed.push_back(static_cast<uint8_t>(b));
        if (a.accepting(state) && (allowed.empty() || rng() % 4 == 0)) break;
        ASSERT_FALSE(allowed.empty()) << text << ": a dead end after " << out;
        const uint8_t b = allowed[rng() % allowed.size()];
        out += static_cast<char>(b);
        state = a.next(state, b);
      }
      if (!a.accepting(state)) continue;  // too long: strings may wander
      ++walks;
      json v;
      ASSERT_NO_THROW(v = json::parse(out)) << text << ": " << out;
      EXPECT_EQ(schema_violation(v, s, s), "") << text << ": " << out;
    }
    EXPECT_GT(walks, 200) << text;
  }
}

}  // namespace
}  // namespace tern::structured
