// The grammar front ends (GBNF, regex, choice, JSON schema) through the byte-level matcher:
// strings they must match and strings they must refuse.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/structured/automaton.h"
#include "tern/structured/gbnf.h"
#include "tern/structured/json_schema.h"
#include "tern/structured/regex.h"
#include "tern/structured/structured_outputs.h"

namespace tern::structured {
namespace {

using nlohmann::json;

Automaton gbnf(const std::string& text) { return Automaton(flatten(parse_gbnf(text))); }
Automaton regex(const std::string& text) { return Automaton(flatten(compile_regex(text))); }
Automaton grammar_of_schema(const json& s) { return Automaton(flatten(compile_json_schema(s))); }

void expect_matches(Automaton& a, const std::vector<std::string>& yes,
                    const std::vector<std::string>& no) {
  for (const std::string& s : yes) EXPECT_TRUE(a.matches(s)) << "should match: " << s;
  for (const std::string& s : no) EXPECT_FALSE(a.matches(s)) << "should refuse: " << s;
}

// llama.cpp's grammars/json.gbnf, in our own words.
const char* kJsonGbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(StructuredGbnf, JsonGrammarFromTheLlamaCppDocs) {
  Automaton a = gbnf(kJsonGbnf);
  expect_matches(a,
                 {R"({})", R"({"a": 1})", R"({"a": [1, 2.5, -3e4], "b": {"c": null}})",
                  "{\"s\": \"h\\u00e9llo \\\"q\\\" \xc3\xa9\xe2\x82\xac\"}", "{\"x\": true}\n"},
                 {R"([])", R"({"a" 1})", R"({"a": tru})", "{\"a\": \"\x01\"}", R"({"a": 01})",
                  R"({"a": 1,})", "{\"a\": \"\xff\"}"});
  EXPECT_TRUE(a.accepts_prefix(R"({"a": [1, )"));
  EXPECT_FALSE(a.accepts_prefix(R"({"a": ])"));
}

TEST(StructuredGbnf, ListAndArithmetic) {
  Automaton list = gbnf(R"(
root ::= item+
# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)");
  expect_matches(list, {"- a\n", "- milk\n- eggs \xc3\xa9\n"}, {"", "- \n", "* a\n", "- a"});
  Automaton arith = gbnf(R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g");
  expect_matches(arith, {"1+2=3\n", "(a*b)-c_1 = x\n2/2=1\n"}, {"1+=3\n", "1+2\n", "A=1\n"});
}

TEST(StructuredGbnf, RepetitionCountsAndClasses) {
  Automaton a = gbnf(R"(root ::= "x"{2,3} [^a-c]? d
d ::= [0-9]{2} | "." )");
  expect_matches(a,
                 {"xx12", "xxx.", "xxd.",
                  "xx\xce\xb1"
                  "00"},
                 {"x12", "xxxxx12", "xxa12", "xx1"});
  Automaton any = gbnf(R"(root ::= . "!")");
  expect_matches(any, {"a!", "\xe2\x82\xac!"}, {"!", "ab!", "\xe2\x82!"});
  Automaton uni = gbnf(R"(root ::= [α-ω]+)");
  expect_matches(uni, {"αβω"}, {"a", "Ω"});
}

// Nested optionals and counted repetitions are chains of tail calls hundreds deep: their
// expansion keeps its stacks flat, and must not recurse once per call either (gbnf_fuzz found
// this grammar overflowing the thread's stack under ASan).
TEST(StructuredGbnf, DeepChainsOfTailCalls) {
  const std::string deep = "root ::= [α-ω]{203}" + std::string(41, '?') + "[α-ω]{203}" +
                           std::string(45, '?') + "{545}" + std::string(12, '?');
  Automaton a = gbnf(deep);
  std::string run;  // `[α-ω]{203}?` is none or 203 of them
  for (int i = 0; i < 203; ++i) run += "α";
  expect_matches(a, {"", run}, {"a", "αβ"});
}

TEST(StructuredGbnf, ErrorsNameTheProblem) {
  auto message = [](const std::string& g) {
    try {
      (void)flatten(parse_gbnf(g));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= foo").find("'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(message("item ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= \"a").find("unterminated string"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= [b-a]").find("reversed"), std::string::npos);
  EXPECT_NE(message("root = \"a\"").find("line 1, column 6: expected '::='"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\" \\q").find("unexpected"), std::string::npos);
}

TEST(StructuredRegex, Subset) {
  Automaton a = regex(R"(^\d{3}-[A-Z][a-z]+(\.|!)?$)");
  expect_matches(a, {"123-Abc", "000-Zz!", "999-Qq."}, {"12-Abc", "123-abc", "123-A", "123-Abc?"});
  Automaton b = regex(R"((?:ab|cd)*e+?\w\s\S.)");
  expect_matches(b, {"abcdee_ xy", "e1 !\xc3\xa9"}, {"ab", "e1 !\n", "abe_  y"});
  Automaton c = regex(R"([^0-9\n]{2}\x41\u00e9)");
  expect_matches(c,
                 {"ab"
                  "A\xc3\xa9"},
                 {"a1A\xc3\xa9", "abB\xc3\xa9"});
}

TEST(StructuredRegex, UnsupportedConstructsAreNamed) {
  for (const auto& [pattern, words] :
       std::vector<std::pair<std::string, std::string>>{{"(a)\\1", "backreferences"},
                                                        {"a(?=b)", "lookaround"},
                                                        {"\\bword", "word boundaries"},
                                                        {"a*+", "possessive"},
                                                        {"[[:alpha:]]", "POSIX"},
                                                        {"(ab", "expected ')'"},
                                                        {"*a", "nothing to repeat"},
                                                        {"a{2,1}", "n < m"},
                                                        {"\\p{L}", "Unicode property"}}) {
    try {
      (void)compile_regex(pattern);
      ADD_FAILURE() << pattern << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
          << pattern << ": " << e.what();
    }
  }
}

TEST(StructuredChoice, AlternationOfLiterals) {
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kChoice, R"(["yes", "no", "n/a"])",
                            "guided_choice"};
  Automaton a(flatten(grammar_of(spec)));
  expect_matches(a, {"yes", "no", "n/a"}, {"", "ye", "yesno", "No"});
}

TEST(StructuredJsonSchema, TypesAndObjects) {
  Automaton a = grammar_of_schema(json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 4},
      "age": {"type": "integer"},
      "score": {"type": ["number", "null"]},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "age"],
    "additionalProperties": false
  })"));
  expect_matches(
      a,
      {R"({"age": 30, "name": "Al"})", R"({"age":-1,"name":"abcd","ok":true})",
       R"({"age": 0, "name": "x", "score": null, "tags": ["a", 3]})",
       R"( {"age": 5, "name": "x", "score": -1.5e3})"},
      {R"({"name": "Al"})", R"({"age": 30, "name": ""})", R"({"age": 30, "name": "abcde"})",
       R"({"age": 1.5, "name": "x"})", R"({"age": 1, "name": "x", "tags": []})",
       R"({"age": 1, "name": "x", "tags": ["a", "b", "a"]})",
       R"({"age": 1, "name": "x", "extra": 1})", R"({"age": 1, "name": "x", "tags": ["c"]})",
       R"({"age": 01, "name": "x"})"});
}

TEST(StructuredJsonSchema, AdditionalPropertiesRefsAnyOfConstFormats) {
  Automaton extra =
      grammar_of_schema(json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
    "additionalProperties": {"type": "string"}})"));
  expect_matches(extra, {R"({"a": 1, "b": "x", "c": ""})", R"({"z": "x"})", "{}"},
                 {R"({"a": 1, "b": 2})"});
  Automaton tree =
      grammar_of_schema(json::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
    "properties": {"v": {"const": 7}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"]}}})"));
  expect_matches(tree, {R"({"v": 7})", R"({"kids": [{"v": 7}, {"kids": [], "v": 7}], "v": 7})"},
                 {R"({"v": 8})", R"({"kids": [{}], "v": 7})"});
  Automaton any = grammar_of_schema(
      json::parse(R"({"anyOf": [{"type": "integer"}, {"type": "string", "format": "date"}],
    "description": "either"})"));
  expect_matches(any, {"42", R"("2024-02-29")"}, {R"("2024-13-01")", "true"});
  Automaton formats = grammar_of_schema(json::parse(R"({"type": "array", "items": {"oneOf": [
    {"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"},
    {"type": "string", "format": "ipv4"}, {"type": "string", "format": "time"}]}})"));
  expect_matches(
      formats,
      {R"(["2024-01-02T03:04:05Z", "123e4567-e89b-12d3-a456-426614174000", "10.0.255.1", "23:59:59.5+01:00"])"},
      {R"(["2024-01-02 03:04:05Z"])", R"(["256.1.1.1"])", R"(["123e4567"])"});
  Automaton pattern =
      grammar_of_schema(json::parse(R"({"type": "string", "pattern": "^[a-z]+\\d$"})"));
  expect_matches(pattern, {R"("abc1")"}, {R"("abc")", R"("ABC1")"});
  Automaton search = grammar_of_schema(json::parse(R"({"type": "string", "pattern": "x\"y"})"));
  expect_matches(search, {R"("ax\"yb")", R"("x\"y")"}, {R"("xy")"});
  Automaton obj = Automaton(flatten(json_object_grammar()));
  expect_matches(obj, {R"({"a": [1, {"b": null}]})", "{}"}, {"[]", "1", R"("s")"});
}

TEST(StructuredJsonSchema, UnsupportedKeywordsAreNamedNeverLoosened) {
  for (const auto& [s, words] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "integer", "multipleOf": 2})",
            "unsupported JSON schema keyword 'multipleOf' at /"},
           {R"({"properties": {"a": {"not": {}}}})", "'not' at /properties/a"},
           {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
           {R"({"type": "array", "prefixItems": [{"contains": {}}]})",
            "'contains' at /prefixItems/0"},
           {R"({"type": "object", "minProperties": 1})", "'minProperties'"},
           {R"({"type": "object", "propertyNames": {"maxLength": 3}})", "'propertyNames'"},
           {R"({"allOf": [{}, {}]})", "allOf"},
           {R"({"type": "string", "format": "ipv6"})", "format 'ipv6'"},
           {R"({"type": "string", "format": "date", "maxLength": 10})",
            "'format' with 'minLength' or 'maxLength'"},
           {R"({"type": "strang"})", "type 'strang'"},
           {R"({"$ref": "#/components/x"})", "not supported"},
           {R"({"$ref": "#/$defs/missing"})", "names no definition"},
           {R"({"type": "object", "required": ["a"]})", "required property 'a'"},
           {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
           {R"({"anyOf": [{}], "type": "string"})", "sibling keyword 'type'"},
           {"false", "matches nothing"}}) {
    try {
      (void)flatten(compile_json_schema(json::parse(s)));
      ADD_FAILURE() << s << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << s << ": " << e.what();
    }
  }
}

TEST(StructuredRequest, FieldsBecomeOneSpec) {
  using Kind = StructuredOutputSpec::Kind;
  auto spec = [](const std::string& body) {
    return structured_output_from_request(json::parse(body));
  };
  EXPECT_EQ(spec(R"({"response_format": {"type": "text"}})").kind, Kind::kNone);
  EXPECT_EQ(spec(R"({"response_format": {"type": "json_object"}})").kind, Kind::kJsonObject);
  const auto js = spec(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "integer"}, "strict": true}}})");
  EXPECT_EQ(js.kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(js.text), json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(spec(R"({"guided_json": "{\"type\": \"string\"}"})").kind, Kind::kJsonSchema);
  EXPECT_EQ(spec(R"({"guided_regex": "a+"})").kind, Kind::kRegex);
  EXPECT_EQ(spec(R"({"guided_choice": ["a", "b"]})").kind, Kind::kChoice);
  EXPECT_EQ(spec(R"({"guided_grammar": "root ::= \"a\""})").kind, Kind::kGrammar);
  EXPECT_EQ(spec(R"({"grammar": "root ::= \"a\""})").kind, Kind::kGrammar);
  EXPECT_EQ(spec(R"({"json_schema": {"type": "boolean"}})").kind, Kind::kJsonSchema);
  EXPECT_EQ(spec(R"({"structured_outputs": {"regex": "[ab]"}})").kind, Kind::kRegex);
  EXPECT_EQ(spec(R"({"structured_outputs": {"json_object": true}})").kind, Kind::kJsonObject);
  EXPECT_EQ(spec(R"({"guided_regex": null})").kind, Kind::kNone);
  auto field_of = [&](const std::string& body) {
    try {
      (void)spec(body);
    } catch (const ConstraintFieldError& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      field_of(R"({"guided_regex": "a", "guided_choice": ["b"]})").rfind("guided_choice: ", 0), 0u);
  EXPECT_EQ(
      field_of(
          R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "multipleOf": 3}}}})")
          .rfind("response_format: 'response_format': unsupported JSON schema keyword 'multipleOf'",
                 0),
      0u);
  EXPECT_EQ(field_of(R"({"response_format": {"type": "xml"}})").rfind("response_format: ", 0), 0u);
  EXPECT_EQ(field_of(R"({"guided_grammar": "root ::= x"})").rfind("guided_grammar: ", 0), 0u);
  EXPECT_EQ(field_of(R"({"guided_choice": []})").rfind("guided_choice: ", 0), 0u);
  EXPECT_EQ(field_of(R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})")
                .rfind("structured_outputs: ", 0),
            0u);
  EXPECT_EQ(field_of(R"({"guided_json": "{nope"})").rfind("guided_json: ", 0), 0u);
}

}  // namespace
}  // namespace tern::structured
