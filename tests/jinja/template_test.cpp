// Unit tests of tern's Jinja engine. The expected strings of the feature table were checked
// against Python jinja2 3.1 with transformers' settings (trim_blocks, lstrip_blocks,
// loopcontrols, json.dumps tojson).
#include "tern/jinja/template.h"

#include <gtest/gtest.h>

#include <string>

#include "tern/core/error.h"

namespace tern::jinja {
namespace {

const char* const kContext =
    "{\"xs\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"s\": \"Hello World\", \"n\": null, "
    "\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": "
    "\"yo\"}], \"u\": \"Grüße 你好\"}";

Object context() {
  const Value v = Value::from_json(nlohmann::ordered_json::parse(kContext));
  return v.as_object();
}

std::string render(const std::string& source, const Object& ctx = context()) {
  return Template(source).render(ctx);
}

// The message of the tern::Error that rendering (or parsing) `source` throws.
std::string template_error_of(const std::string& source, TemplateOptions options = {}) {
  try {
    Template(source, options).render(context());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Case {
  const char* source;
  const char* expected;
};

const Case kCases[] = {
    {"{{ 1.0 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 2.5e-3 }} {{ 10 / 4 }} {{ 7 // 2 }} {{ -7 "
     "// 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}",
     "1.0 1e+16 0.30000000000000004 1e-05 0.0025 2.5 3 -4 2 1024 0.5 3.0"},
    {"{{ True }} {{ none }} {{ [1, 'a', None, true, 1.5] }} {{ {'k': 'v', 'q': \"it's\"} }} {{ "
     "(1,) }} {{ (1, 'x') }}",
     "True None [1, 'a', None, True, 1.5] {'k': 'v', 'q': \"it's\"} (1,) (1, 'x')"},
    {"{{ xs | length }} {{ xs | first }} {{ xs | last }} {{ xs | sort | list }} {{ xs | "
     "sort(reverse=true) | join(',') }} {{ xs | max }} {{ xs | min }} {{ xs | sum }} {{ xs | "
     "unique | list }}",
     "3 3 2 [1, 2, 3] 3,2,1 3 1 6 [3, 1, 2]"},
    {"{{ s | upper }} {{ s | lower }} {{ 'hello wORLD-x(y' | title }} {{ 'hELLO' | capitalize }} "
     "{{ '  t  ' | trim }}| {{ s | replace('o', '0') }} {{ s | wordcount }} {{ s | reverse }}",
     "HELLO WORLD hello world Hello World-X(Y Hello t| Hell0 W0rld 2 dlroW olleH"},
    {"{{ s.startswith('Hell') }} {{ s.endswith(('x', 'ld')) }} {{ s.split() }} {{ "
     "'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ "
     "'--x--'.strip('-') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.count('l') }} {{ s.title() "
     "}} {{ '{} and {name}'.format(1, name='x') }}",
     "True True ['Hello', 'World'] ['a', 'b', '', 'c'] ['a', 'b c'] ['a b', 'c'] x 4 7 3 Hello "
     "World 1 and x"},
    {"{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[::2] }} {{ xs[1:] }} {{ xs[:-1] }} {{ "
     "xs[::-1] }} {{ u[1:3] }} {{ u | length }} {{ u[-2:] }}",
     "H d ell dlroW olleH HloWrd [1, 2] [3, 1] [2, 1, 3] rü 8 你好"},
    {"{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.length }}/{{ "
     "loop.first }}/{{ loop.last }}/{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}",
     "1/0/3/3/True/False//1;2/1/2/3/False/False/3/2;3/2/1/3/False/True/1/;"},
    {"{% for x in xs if x > 1 %}{{ loop.index }}:{{ x }},{% else %}empty{% endfor %}|{% for x in "
     "[] %}a{% else %}empty{% endfor %}",
     "1:3,2:2,|empty"},
    {"{% for x in range(10) %}{% if x is even %}{% continue %}{% endif %}{% if x > 6 %}{% break "
     "%}{% endif %}{{ x }}{% endfor %}",
     "135"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | dictsort %}{{ k "
     "}}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
     "b=2;a=1;a=1;b=2;ba"},
    {"{% set x = 1 %}{% for i in xs %}{% set x = i %}{% endfor %}{{ x }} {% set ns = "
     "namespace(x=1) %}{% for i in xs %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
     "1 7"},
    {"{% set block %}\n  inner {{ 1 + 1 }}\n{% endset %}[{{ block }}]{% set a, b = [1, 2] %}{{ a "
     "}}{{ b }}",
     "[  inner 2\n]12"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ "
     "greet('B', punct='?') }} {{ greet(name='C') }}",
     "Hi A! Hi B? Hi C!"},
    {"{{ 'a' if n is none else 'b' }} {{ 'x' if false }}| {{ n is not none }} {{ missing is "
     "defined }} {{ missing | default('dflt') }} {{ '' | default('e', true) }} {{ missing }}|",
     "a | False False dflt e |"},
    {"{{ 1 in xs }} {{ 5 not in xs }} {{ 'a' in d }} {{ 'ell' in s }} {{ 1 == 1.0 }} {{ 1 < 2 < 3 "
     "}} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }} {{ not 0 }} {{ 0 or 'x' }} {{ 1 and 2 }} {{ [] or "
     "none }}",
     "True True True True True True True True True x 2 None"},
    {"{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ msgs "
     "| rejectattr('role', 'eq', 'user') | list | length }} {{ xs | select('odd') | list }} {{ xs "
     "| reject('odd') | list }} {{ xs | map('string') | join('-') }}",
     "['hi'] 1 [3, 1] [2] 3-1-2"},
    {"{{ d | tojson }} {{ msgs | tojson(indent=2) }} {{ {'u': 'é\"\\n', 'f': 1.0, 'n': none, 'b': "
     "true} | tojson }} {{ [] | tojson(indent=2) }} {{ d | tojson(sort_keys=true) }}",
     "{\"b\": 2, \"a\": 1} [\n  {\n    \"role\": \"user\",\n    \"content\": \"hi\"\n  },\n  {\n   "
     " \"role\": \"assistant\",\n    \"content\": \"yo\"\n  }\n] {\"u\": \"é\\\"\\n\", \"f\": 1.0, "
     "\"n\": null, \"b\": true} [] {\"a\": 1, \"b\": 2}"},
    {"{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ "
     "'2.5' | float }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} "
     "{{ 2.1 | round(method='ceil') }} {{ -3 | abs }}",
     "42 4 0 7 3 2.5 2.0 4.0 2.67 3 3.0 3"},
    {"{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'x' | center(5) }}|{{ d "
     "| items | list }}|{{ 'ab' ~ 1 ~ none }}|{{ 'ab' * 3 }}|{{ [1] * 2 + [3] }}",
     "a\n  b\n\n  c|  a\n  b|  x  |[('b', 2), ('a', 1)]|ab1None|ababab|[1, 1, 3]"},
    {"  {% if true %}\n    text\n  {% endif %}\nnext {{- '  x  ' -}}  \n  y {#- c -#}  z\n{# "
     "comment #}\nlast\n",
     "    text\nnext  x  yz\nlast"},
    {"{%- for m in msgs -%}\n  {{ m.role }}: {{ m['content'] }}\n{% endfor -%}\n{% raw %}{{ not "
     "rendered }}{% endraw %}\n",
     "user: hi\nassistant: yo\n{{ not rendered }}"},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %} {% filter upper %}shout{% endfilter %} {{ "
     "d.get('a') }} {{ d.get('z', 0) }} {{ d.keys() | list }} {{ d.values() | list }} {{ dict(x=1) "
     "}} {{ xs.index(2) }}",
     "3 SHOUT 1 0 ['b', 'a'] [2, 1] {'x': 1} 2"},
    {"{{ 'x' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is "
     "boolean }} {{ d is mapping }} {{ xs is sequence }} {{ s is iterable }} {{ 3 is divisibleby 3 "
     "}} {{ 2 is in xs }} {{ false is false }} {{ none is none }} {{ 'ab' is lower }} {{ 5 is gt 3 "
     "}} {{ missing is undefined }}",
     "True True True True True True True True True True True True True True True"},
    // What gpt-oss's template leans on: a macro that calls itself and inspects its own result
    // (TypeScript types of nested JSON-schema arrays), a `set` inside a loop of a macro that
    // does not outlive the loop while a global it sets when undefined does, and a look ahead
    // through the rest of the messages by slicing at loop.index.
    {"{% macro ts(spec) %}{% if spec.type == 'array' %}{% set inner = ts(spec['items']) %}{% if "
     "inner | length > 4 %}any[]{% else %}{{ inner ~ '[]' }}{% endif %}{% else %}{{ spec.type "
     "}}{% endif %}{% endmacro %}{{ ts({'type': 'array', 'items': {'type': 'x'}}) }} {{ "
     "ts({'type': 'array', 'items': {'type': 'array', 'items': {'type': 'x'}}}) }} {{ "
     "ts({'type': 'array', 'items': {'type': 'array', 'items': {'type': 'int'}}}) }}",
     "x[] x[][] any[]"},
    {"{% macro f(vs) %}{% set found = false %}{% for v in vs %}{% if v == 'o' %}{% set found = "
     "true %}{% endif %}{% endfor %}{{ found }}{% if who is not defined %}{% set who = 'anon' "
     "%}{% endif %}/{{ who }}/{{ s }}{% endmacro %}{{ f(['o']) }}",
     "False/anon/Hello World"},
    {"{% for m in msgs %}{% set later = namespace(found=false) %}{% for f in msgs[loop.index:] "
     "%}{% if f.role == 'assistant' and 'tool_calls' not in f %}{% set later.found = true %}{% "
     "endif %}{% endfor %}{{ m.role }}:{{ later.found }}{{ (m.type if m.type is defined else "
     "'json') + ';' }}{% endfor %}",
     "user:Truejson;assistant:Falsejson;"},
};

TEST(JinjaTemplate, FeaturesRenderLikeJinja2) {
  for (const Case& c : kCases) EXPECT_EQ(render(c.source), c.expected) << c.source;
}

TEST(JinjaTemplate, ParsesOnceRendersManyTimes) {
  const Template t("{{ greeting }}, {{ name }}!");
  Object a, b;
  a.set("greeting", Value("Hello"));
  a.set("name", Value("Ada"));
  b.set("greeting", Value("Hi"));
  EXPECT_EQ(t.render(a), "Hello, Ada!");
  EXPECT_EQ(t.render(b), "Hi, !");
}

TEST(JinjaTemplate, UnicodeCaseUsesPythonsFullMappings) {
  EXPECT_EQ(render("{{ 'straße' | upper }} {{ 'ÉCOLE' | lower }} {{ 'ünï çode' | title }}"),
            "STRASSE école Ünï Çode");
}

TEST(JinjaTemplate, PythonFloatFormatting) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(123456789.125), "123456789.125");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1.5e16), "1.5e+16");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001234), "1.234e-05");
  EXPECT_EQ(python_float_repr(1e300 * 1e300), "inf");
}

TEST(JinjaTemplate, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(template_error_of("line one\n{% if x %}\nno end"),
            "template: line 3: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(template_error_of("{{ 1 +\n}}"), "template: line 2: unexpected '}}' in an expression");
  EXPECT_EQ(template_error_of("a\n{{ 'open"), "template: line 2: string literal is never closed");
  EXPECT_EQ(template_error_of("{% foo %}"), "template: line 1: unknown tag 'foo'");
  EXPECT_EQ(template_error_of("{% break %}"), "template: line 1: 'break' outside of a for loop");
  EXPECT_EQ(template_error_of("{# never closed"),
            "template: line 1: comment {# is never closed with #}");
}

TEST(JinjaTemplate, UnsupportedFeaturesAreNamed) {
  EXPECT_EQ(template_error_of("\n{% include 'x.jinja' %}"),
            "template: line 2: the 'include' tag is not supported by tern's template engine");
  EXPECT_EQ(template_error_of("{{ xs | batch(2) }}"),
            "template: line 1: the 'batch' filter is not supported by tern's template engine");
  EXPECT_EQ(template_error_of("{% for x in xs recursive %}{% endfor %}"),
            "template: line 1: recursive for loops are not supported by tern's template engine");
  EXPECT_EQ(template_error_of("{{ 'a %s' % 1 }}"),
            "template: line 1: printf-style string formatting ('...' % value) is not supported");
  EXPECT_EQ(template_error_of("{{ xs | nosuch }}"), "template: line 1: no filter named 'nosuch'");
  EXPECT_EQ(template_error_of("{{ 1 is nosuch }}"), "template: line 1: no test named 'nosuch'");
}

TEST(JinjaTemplate, RuntimeErrorsLikeJinja2) {
  EXPECT_EQ(template_error_of("ok\n{{ missing.attr }}"),
            "template: line 2: 'missing' is undefined");
  EXPECT_EQ(template_error_of("{{ d.nokey.deeper }}"),
            "template: line 1: 'dict object' has no attribute 'nokey'");
  EXPECT_EQ(template_error_of("{{ 'a' + 1 }}"),
            "template: line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(template_error_of("{{ 1 / 0 }}"),
            "template: line 1: ZeroDivisionError: division by zero");
  EXPECT_EQ(template_error_of("{{ xs.append(4) }}"),
            "template: line 1: list.append() is not allowed: chat templates render in an immutable "
            "sandbox, as in transformers");
  EXPECT_EQ(template_error_of("{% set x.y = 1 %}"),
            "template: line 1: cannot set attribute 'y' of 'x': only namespace() objects take "
            "attribute assignment");
  EXPECT_EQ(template_error_of("{{ 1 < 'a' }}"),
            "template: line 1: '<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(template_error_of("{% for x in 5 %}{% endfor %}"),
            "template: line 1: 'int' object is not iterable");
  EXPECT_EQ(template_error_of("{{ 9223372036854775807 + 1 }}"),
            "template: line 1: integer overflow (tern's template integers are 64-bit)");
}

TEST(JinjaTemplate, RaiseExceptionSurfacesTheMessage) {
  EXPECT_EQ(template_error_of(
                "{% if true %}\n  {{ raise_exception('Roles must alternate!') }}\n{% endif %}"),
            "template: line 2: raise_exception: Roles must alternate!");
}

TEST(JinjaTemplate, RunawayTemplatesHitLimits) {
  TemplateOptions small;
  small.limits.max_output_bytes = 1000;
  small.limits.max_loop_iterations = 5000;
  small.limits.max_call_depth = 20;
  EXPECT_EQ(template_error_of("{% for i in range(2000) %}xxxxxxxxxx{% endfor %}", small),
            "template: line 1: the template wrote more than 1000 bytes");
  EXPECT_EQ(
      template_error_of(
          "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", small),
      "template: line 1: the template ran more than 5000 loop iterations");
  EXPECT_EQ(template_error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", small),
            "template: line 1: macro calls nest deeper than 20");
  EXPECT_EQ(template_error_of("{{ 'ab' * 100000 }}", small),
            "template: line 1: string repetition result is larger than the output limit");
  EXPECT_EQ(
      template_error_of("{{ range(1000000) }}"),
      "template: line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  EXPECT_NE(template_error_of("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}")
                .find("nests deeper than"),
            std::string::npos);
}

TEST(JinjaTemplate, NamespaceCyclesDoNotLeak) {
  // Leak-checked under ASan: a namespace that holds itself is freed after the render.
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns.self.self.a }}"), "1");
}

}  // namespace
}  // namespace tern::jinja
