#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "looptrace/support/error.hpp"
#include "frontend/jinja.hpp"  // internal: the template engine

using looptrace::define_value_from_text;
using looptrace::JinjaValue;
using looptrace::JinjaVariables;
using looptrace::render_jinja;
using looptrace::RenderedTemplate;
using looptrace::SpecError;

namespace {

// matmuls.yaml, verbatim (trailing spaces included).
constexpr std::string_view kMatmuls = R"yaml(# A chain of N_EINSUMS back-to-back matrix multiplications. Einsum i computes T{i+1} =
# T{i} * W{i};
workload:
  iteration_space_shape:
    {% set M = M | default(128) %}
    {% set KN = KN | default(128) %}
    m:  0 <= m  < {{M}}                # Input & output tensor rows, weight columns
    {% for i in range(N_EINSUMS+1) %}
    n{{i}}: 0 <= n{{i}} < {{KN}}       # Input & output columns, weight rows 
    {% endfor %}

  bits_per_value: {All: 8}

  einsums:
  {% for i in range(N_EINSUMS) %}
  - name: Matmul{{i}}
    tensor_accesses:
    - {name: T{{i}}, projection: [m, n{{i}}]}
    - {name: W{{i}}, projection: [n{{i}}, n{{i+1}}]}
    - {name: T{{i+1}}, projection: [m, n{{i+1}}], output: True}
    renames: {weight: W{{i}}, input: T{{i}}, output: T{{i+1}}}
  {% endfor %}
)yaml";

// fused_matmuls_to_simple.mapping.yaml, verbatim (trailing spaces included).
constexpr std::string_view kFused = R"yaml(mapping:
  nodes:
  - !Storage
    tensors:
    - T0
    - T{{N_EINSUMS}}
    {% for i in range(N_EINSUMS) %}
    - W{{i}}
    {% endfor %}
    component: MainMemory
  - !Storage
    tensors:
    {% for i in range(N_EINSUMS) %}
    - W{{i}}
    {% endfor %}
    component: GlobalBuffer
  - !Temporal
    rank_variable: m
    tile_shape: 1
  - !Storage
    tensors:
    - T0
    - T{{N_EINSUMS}}
    component: GlobalBuffer
  {% for i in range(1, N_EINSUMS) %}
  - !Storage
    tensors: [T{{i}}]
    component: GlobalBuffer
  {% endfor %}
  {% if N_EINSUMS > 1 %}
  - !Sequential
    nodes:
    {% for i in range(N_EINSUMS) %}
    - !Nested
      nodes:
      - !Temporal
        rank_variable: n{{i}}
        tile_shape: 1
      - !Temporal
        rank_variable: n{{i+1}}
        tile_shape: 1
      - !Compute
        einsum: Matmul{{i}}
        component: MAC
    {% endfor %}
  {% else %}
  - !Storage
    tensors: [T0, T1]
    component: GlobalBuffer
  - !Temporal
    rank_variable: n0
    tile_shape: 1
  - !Temporal
    rank_variable: n1
    tile_shape: 1
  - !Compute
    einsum: Matmul0
    component: MAC
  {% endif %}
)yaml";

// unfused_matmuls_to_simple.mapping.yaml, verbatim (trailing spaces included).
constexpr std::string_view kUnfused = R"yaml(mapping:
  nodes:
  {% for i in range(N_EINSUMS+1) %}
  - !Storage
    tensors: [T{{i}}]
    component: MainMemory
  {% endfor %}
  {% for i in range(N_EINSUMS) %}
  - !Storage
    tensors: [W{{i}}]
    component: MainMemory
  {% endfor %}
  {% if N_EINSUMS > 1 %}
  - !Sequential
    nodes:
    {% for i in range(N_EINSUMS) %}
    - !Nested
      nodes:
      - !Storage
        tensors: [T{{i}}, W{{i}}, T{{i+1}}]
        component: GlobalBuffer
      - !Temporal
        rank_variable: m
        tile_shape: 1
      - !Temporal
        rank_variable: n{{i}}
        tile_shape: 1
      - !Temporal
        rank_variable: n{{i+1}}
        tile_shape: 1
      - !Compute
        einsum: Matmul{{i}}
        component: MAC
    {% endfor %}
  {% else %}
  - !Storage
    tensors: [T0, W0, T1]
    component: GlobalBuffer
  - !Temporal
    rank_variable: m
    tile_shape: 1
  - !Temporal
    rank_variable: n0
    tile_shape: 1
  - !Temporal
    rank_variable: n1
    tile_shape: 1
  - !Compute
    einsum: Matmul0
    component: MAC
  {% endif %}
)yaml";

}  // namespace

namespace {

using Lines = std::vector<std::string>;

Lines split_lines(const std::string& text) {
  Lines out{""};
  for (char c : text) {
    if (c == '\n') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

bool has_line(const Lines& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

std::size_t count_lines(const Lines& lines, const std::string& line) {
  return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
}

JinjaVariables matmul_vars(std::int64_t n_einsums) {
  return {{"N_EINSUMS", n_einsums}, {"M", std::int64_t{8}}, {"KN", std::int64_t{4}}};
}

std::string render(std::string_view source, const JinjaVariables& vars = {}) {
  return render_jinja(source, vars, "t.yaml").text;
}

// The SpecError that rendering throws.
SpecError error_of(std::string_view source, const JinjaVariables& vars = {},
                   std::int64_t max_iterations = 1'000'000) {
  try {
    render_jinja(source, vars, "t.yaml", max_iterations);
  } catch (const SpecError& e) {
    return e;
  }
  FAIL("no error for: " << source);
  return SpecError("unreachable");
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("jinja: matmuls.yaml with N_EINSUMS=2 M=8 KN=4") {
  const RenderedTemplate r = render_jinja(kMatmuls, matmul_vars(2), "matmuls.yaml");
  const Lines lines = split_lines(r.text);
  REQUIRE(lines.size() == 33);
  CHECK(lines[3] == "  iteration_space_shape:");
  CHECK(lines[4] == "    ");  // a `{% set %}` line keeps its indentation and newline
  CHECK(lines[6] == "    m:  0 <= m  < 8                # Input & output tensor rows, weight columns");
  CHECK(lines[8] == "    n0: 0 <= n0 < 4       # Input & output columns, weight rows ");
  CHECK(lines[10] == "    n1: 0 <= n1 < 4       # Input & output columns, weight rows ");
  CHECK(lines[12] == "    n2: 0 <= n2 < 4       # Input & output columns, weight rows ");
  CHECK(lines[19] == "  - name: Matmul0");
  CHECK(lines[22] == "    - {name: W0, projection: [n0, n1]}");
  CHECK(lines[23] == "    - {name: T1, projection: [m, n1], output: True}");
  CHECK(lines[26] == "  - name: Matmul1");
  CHECK(lines[29] == "    - {name: W1, projection: [n1, n2]}");
  CHECK(lines[31] == "    renames: {weight: W1, input: T1, output: T2}");
  // Jinja2 drops the template's final newline: the text ends with the indentation
  // before the last `{% endfor %}`.
  CHECK(lines[32] == "  ");
  CHECK(r.text.back() == ' ');
}

TEST_CASE("jinja: matmuls.yaml line map follows loop bodies") {
  const RenderedTemplate r = render_jinja(kMatmuls, matmul_vars(2), "matmuls.yaml");
  REQUIRE(r.source_line.size() == 33);
  const std::vector<int> expected = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 9,  10, 9,  10, 11, 12, 13,
                                     14, 15, 16, 17, 18, 19, 20, 21, 22, 16, 17, 18, 19, 20, 21, 22};
  CHECK(r.source_line == expected);
  CHECK(r.source_line_of(13) == 9);   // "n2: ..." comes from the loop body's line 9
  CHECK(r.source_line_of(30) == 19);  // Matmul1's W access, template line 19
  CHECK(r.source_line_of(1) == 1);
}

TEST_CASE("jinja: `x | default(v)` works with and without -D") {
  const Lines defaulted = split_lines(render(kMatmuls, {{"N_EINSUMS", std::int64_t{1}}}));
  CHECK(has_line(defaulted, "    m:  0 <= m  < 128                # Input & output tensor rows, weight columns"));
  CHECK(has_line(defaulted, "    n1: 0 <= n1 < 128       # Input & output columns, weight rows "));
  CHECK_FALSE(has_line(defaulted, "    n2: 0 <= n2 < 128       # Input & output columns, weight rows "));

  const Lines given = split_lines(render(kMatmuls, matmul_vars(1)));
  CHECK(has_line(given, "    m:  0 <= m  < 8                # Input & output tensor rows, weight columns"));

  CHECK(render("{{ x | default(3) + 1 }}") == "4");
  CHECK(render("{{ x | default(3) + 1 }}", {{"x", std::int64_t{10}}}) == "11");
  CHECK(render("{{ x|d('s') }}") == "s");
  // A defined but falsy value is kept unless the second argument is true.
  CHECK(render("{{ y | default(3) }},{{ y | default(3, true) }}", {{"y", std::int64_t{0}}}) == "0,3");
  CHECK(render("{% set M = M | default(128) %}{{ M * 2 }}") == "256");
  CHECK(render("{% set M = M | default(128) %}{{ M * 2 }}", {{"M", std::int64_t{5}}}) == "10");
}

TEST_CASE("jinja: fused_matmuls_to_simple.mapping.yaml") {
  const Lines two = split_lines(render(kFused, matmul_vars(2)));
  CHECK(two[5] == "    - T2");  // T{{N_EINSUMS}}
  CHECK(count_lines(two, "    - W0") == 2);
  CHECK(count_lines(two, "    - W1") == 2);
  CHECK(has_line(two, "    tensors: [T1]"));
  CHECK(has_line(two, "  - !Sequential"));
  CHECK(count_lines(two, "    - !Nested") == 2);
  CHECK(has_line(two, "        rank_variable: n2"));
  CHECK(has_line(two, "        einsum: Matmul1"));
  CHECK_FALSE(has_line(two, "    tensors: [T0, T1]"));  // the else branch

  const Lines one = split_lines(render(kFused, matmul_vars(1)));
  CHECK(one[5] == "    - T1");
  CHECK_FALSE(has_line(one, "  - !Sequential"));
  CHECK_FALSE(has_line(one, "    tensors: [T1]"));  // range(1, 1) is empty
  CHECK(has_line(one, "    tensors: [T0, T1]"));
  CHECK(has_line(one, "    einsum: Matmul0"));
}

TEST_CASE("jinja: unfused_matmuls_to_simple.mapping.yaml") {
  const RenderedTemplate r = render_jinja(kUnfused, matmul_vars(2), "u.yaml");
  const Lines lines = split_lines(r.text);
  CHECK(lines[0] == "mapping:");
  CHECK(lines[2] == "  ");
  CHECK(lines[3] == "  - !Storage");
  CHECK(lines[4] == "    tensors: [T0]");
  CHECK(has_line(lines, "    tensors: [T2]"));
  CHECK_FALSE(has_line(lines, "    tensors: [T3]"));
  CHECK(has_line(lines, "    tensors: [W1]"));
  CHECK(has_line(lines, "        tensors: [T0, W0, T1]"));
  CHECK(has_line(lines, "        tensors: [T1, W1, T2]"));
  CHECK(count_lines(lines, "        einsum: Matmul1") == 1);
  // Line 9 "    tensors: [T1]" is the second iteration of the loop on template lines 3-7.
  CHECK(lines[8] == "    tensors: [T1]");
  CHECK(r.source_line_of(9) == 5);
}

TEST_CASE("jinja: arithmetic follows Python") {
  CHECK(render("{{ -7 // 2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 // 2 }}") == "-4 -4 2 -2 3");
  CHECK(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 3 - 2 }} {{ -(3) }} {{ - -3 }}") == "7 9 5 -3 3");
  CHECK(render("{{ N + 1 }}", {{"N", std::int64_t{41}}}) == "42");
  CHECK(render("{{ True + 1 }} {{ 1_000 }}") == "2 1000");
  CHECK(render("{{ 'a' + \"b\" }}") == "ab");
  CHECK(contains(error_of("{{ 1 // 0 }}").message(), "division by zero"));
  CHECK(contains(error_of("{{ 'a' + 1 }}").message(), "'str' and 'int'"));
  CHECK(contains(error_of("{{ 9223372036854775807 + 1 }}").message(), "overflow"));
  CHECK(render("{{ 7 / 2 }} {{ 6 / 2 }} {{ 7.0 // 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}") == "3.5 3.0 3.0 1024 0.5");
}

TEST_CASE("jinja: booleans, comparisons and logic print like Python") {
  CHECK(render("{{ 1 < 2 }} {{ 2 <= 1 }} {{ 1 == True }} {{ 'x' == 1 }} {{ 1 != 2 }}") ==
        "True False True False True");
  CHECK(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}") == "True False");
  CHECK(render("{{ 0 or 5 }} {{ 3 and 0 }} {{ not 3 }} {{ not 1 == 2 }}") == "5 0 False True");
  CHECK(render("{{ true }}{{ False }}{{ 'ab' < 'b' }}") == "TrueFalseTrue");
  CHECK(render("{{ flag }}", {{"flag", true}}) == "True");
  CHECK(render("{{ name }}", {{"name", std::string("MainMemory")}}) == "MainMemory");
}

TEST_CASE("jinja: for loops, ranges and scoping") {
  CHECK(render("{% for i in range(3) %}{{ i }},{% endfor %}") == "0,1,2,");
  CHECK(render("{% for i in range(2, 5) %}{{ i }}{% endfor %}") == "234");
  CHECK(render("{% for i in range(10, 0, -3) %}{{ i }},{% endfor %}") == "10,7,4,1,");
  CHECK(render("{% for i in range(5, 2) %}x{% else %}none{% endfor %}") == "none");
  CHECK(render("{% for i in range(2) %}{% for j in range(i + 1) %}{{ i }}{{ j }} {% endfor %}{% endfor %}") ==
        "00 10 11 ");
  // The loop variable is restored afterwards; a `set` inside the body is per iteration.
  CHECK(render("{% set i = 9 %}{% for i in range(2) %}{{ i }}{% endfor %}{{ i }}") == "019");
  CHECK(render("{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}") == "2221");
  CHECK(contains(error_of("{% for i in range(2) %}{% endfor %}{{ i }}").message(), "'i'"));
  CHECK(contains(error_of("{% for i in range(1, 5, 0) %}{% endfor %}").message(), "zero"));
}

TEST_CASE("jinja: if / elif / else") {
  const char* tmpl = "{% if n > 2 %}big{% elif n == 2 %}two{% else %}small{% endif %}";
  CHECK(render(tmpl, {{"n", std::int64_t{5}}}) == "big");
  CHECK(render(tmpl, {{"n", std::int64_t{2}}}) == "two");
  CHECK(render(tmpl, {{"n", std::int64_t{-1}}}) == "small");
  // `set` inside an `if` is visible afterwards.
  CHECK(render("{% set x = 1 %}{% if true %}{% set x = 5 %}{% endif %}{{ x }}") == "5");
  CHECK(render("{% if '' %}a{% elif 0 %}b{% endif %}.") == ".");
  CHECK(render("{% for i in range(4) %}{% if i % 2 == 0 %}{{ i }}{% endif %}{% endfor %}") == "02");
}

TEST_CASE("jinja: whitespace, comments and newlines match Jinja2 defaults") {
  CHECK(render("a\n") == "a");  // one trailing newline dropped
  CHECK(render("a\n\n") == "a\n");
  CHECK(render("a\r\nb\r\n") == "a\nb");
  CHECK(render("x {# a\ncomment #} y") == "x  y");
  CHECK(render("  {% if true %}\n  yes\n  {% endif %}\nend") == "  \n  yes\n  \nend");
  CHECK(render("  {% for i in range(2) -%}\n  - {{ i }}\n  {%- endfor %}\nend") == "  - 0- 1\nend");
  CHECK(render("{{- 1 -}}\n  \n {{ 2 }}  {#- c -#}  x") == "12x");
  CHECK(render("{{ '}}' }}") == "}}");
  CHECK(render("{ not a tag } {{ 1 }}") == "{ not a tag } 1");
}

TEST_CASE("jinja: the line map") {
  const RenderedTemplate r =
      render_jinja("a\n{% for i in range(2) %}\nx{{i}}\n{% endfor %}\nb", {}, "t.yaml");
  CHECK(r.text == "a\n\nx0\n\nx1\n\nb");
  CHECK(r.source_line == std::vector<int>{1, 2, 3, 2, 3, 4, 5});
  CHECK(r.source_line_of(5) == 3);  // "x1" is the body's line 3
  CHECK(r.source_line_of(0) == 1);  // clamped
  CHECK(r.source_line_of(100) == 5);

  // Whitespace control moves the start of a text to a later template line.
  const RenderedTemplate stripped = render_jinja("{% if true -%}\n\n\nz\n{%- endif %}", {}, "t.yaml");
  CHECK(stripped.text == "z");
  CHECK(stripped.source_line == std::vector<int>{4});

  // An output that ends with a newline has a last, empty line after it.
  const RenderedTemplate trailing = render_jinja("a\n{{ 1 }}\n\n", {}, "t.yaml");
  CHECK(trailing.text == "a\n1\n");
  CHECK(trailing.source_line == std::vector<int>{1, 2, 3});
}

TEST_CASE("jinja: errors name the file, line and column of the tag") {
  SpecError e = error_of("a\nb {{ q + 1 }}");
  CHECK(e.where().file == "t.yaml");
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 3);
  CHECK(contains(e.message(), "'q'"));
  CHECK(std::string(e.what()).rfind("t.yaml:2:3: ", 0) == 0);

  e = error_of("a\n  {% for i in range(3) %}\nx");
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 3);
  CHECK(contains(e.message(), "endfor"));

  e = error_of("{% if 1 %}\n{% for i in range(1) %}{% endif %}");
  CHECK(e.where().line == 2);  // the endif does not close the for
  CHECK(contains(e.message(), "endif"));

  e = error_of("x\n\n   {% include 'other.yaml' %}");
  CHECK(e.where().line == 3);
  CHECK(e.where().column == 4);
  CHECK(contains(e.message(), "include"));

  e = error_of("{% if 0 %}\n{% elif nope %}{% endif %}");
  CHECK(e.where().line == 2);  // the elif's condition fails, not the if's
  CHECK(contains(e.message(), "nope"));

  CHECK(error_of("{{ 1 + }}").where().line == 1);
  CHECK(contains(error_of("{% endfor %}").message(), "endfor"));
  CHECK(contains(error_of("{% if 1 %}x").message(), "endif"));
  CHECK(contains(error_of("{{ x").message(), "}}"));
  CHECK(contains(error_of("{# open").message(), "#}"));
  CHECK(contains(error_of("{{ }}").message(), "empty"));
  CHECK(contains(error_of("{{ x | upper }}").message(), "undefined variable 'x'"));
  CHECK(contains(error_of("{{ 1 | uper }}").message(), "unknown filter 'uper' (did you mean 'upper'?)"));
  CHECK(contains(error_of("{% for i in range(3) %}{% endfor extra %}").message(), "extra"));
}

TEST_CASE("jinja: iteration and nesting bounds") {
  CHECK(render_jinja("{% for i in range(10) %}{% endfor %}", {}, "t.yaml", 10).text.empty());
  CHECK(contains(error_of("{% for i in range(11) %}{% endfor %}", {}, 10).message(), "iterations"));
  // 3 outer + 3*4 inner iterations exceed 10 in all.
  SpecError nested = error_of("{% for i in range(3) %}\n{% for j in range(4) %}{% endfor %}{% endfor %}", {}, 10);
  CHECK(contains(nested.message(), "iterations"));
  CHECK(nested.where().line == 2);
  CHECK(contains(error_of("{% for i in range(9223372036854775807) %}{% endfor %}").message(), "iterations"));

  std::string deep_ifs;
  for (int i = 0; i < 150; ++i) deep_ifs += "{% if 1 %}";
  deep_ifs += "x";
  for (int i = 0; i < 150; ++i) deep_ifs += "{% endif %}";
  CHECK(contains(error_of(deep_ifs).message(), "nested"));

  const std::string deep_parens = "{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}";
  CHECK(contains(error_of(deep_parens).message(), "nested"));
  CHECK(contains(error_of("{{ " + std::string(100000, '-') + "1 }}").message(), "nested"));
  std::string chain = "{{ 0";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  CHECK(contains(error_of(chain + " }}").message(), "too long"));
}

TEST_CASE("define_value_from_text") {
  using looptrace::DefineValue;
  CHECK(define_value_from_text("42") == DefineValue{std::int64_t{42}});
  CHECK(define_value_from_text("-7") == DefineValue{std::int64_t{-7}});
  CHECK(define_value_from_text("+3") == DefineValue{std::int64_t{3}});
  CHECK(define_value_from_text("-9223372036854775808") == DefineValue{INT64_MIN});
  // Digits that do not fit in 64 bits are an error, not a string the template would see.
  CHECK_THROWS_WITH_AS(define_value_from_text("99999999999999999999"),
                       "the integer 99999999999999999999 does not fit in 64 bits "
                       "(-9223372036854775808 to 9223372036854775807)",
                       SpecError);
  CHECK_THROWS_AS(define_value_from_text("-9223372036854775809"), SpecError);
  CHECK(define_value_from_text("True") == DefineValue{true});
  CHECK(define_value_from_text("FALSE") == DefineValue{false});
  CHECK(define_value_from_text("12a") == DefineValue{std::string("12a")});
  CHECK(define_value_from_text("-") == DefineValue{std::string("-")});
  CHECK(define_value_from_text("") == DefineValue{std::string("")});
}

// ---------------------------------------------------------------- the grown dialect

namespace {

using looptrace::JinjaCall;
using looptrace::JinjaDict;
using looptrace::JinjaGlobals;
using looptrace::JinjaList;
using looptrace::JinjaOptions;

std::string render_with(std::string_view source, const JinjaVariables& vars, const JinjaOptions& options) {
  return render_jinja(source, vars, "t.yaml", options).text;
}

}  // namespace

TEST_CASE("jinja: the expression grammar and its precedence (Jinja2's)") {
  CHECK(render("{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 * 3 ** 2 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }}") == "14 20 18 4 64");
  CHECK(render("{{ 1 ~ 2 ~ 3 }} {{ 'a' ~ 2 * 3 }} {{ 'a' ~ 'b' * 2 }}") == "123 a6 abb");  // * binds tighter than ~
  CHECK(contains(error_of("{{ 1 ~ 2 + 3 }}").message(), "'str' and 'int'"));  // ~ binds tighter than +
  CHECK(render("{{ not 1 == 2 }} {{ not (1 == 1) }} {{ 1 < 2 and 3 > 4 or 5 }}") == "True False 5");
  CHECK(render("{{ 1 if 0 else 2 if 0 else 3 }} {{ (1 if 1 else 2) + 10 }}") == "3 11");
  CHECK(render("{{ 'y' if 2 in [1, 2] else 'n' }} {{ 3 not in (1, 2) }} {{ 'bc' in 'abc' }} {{ 'k' in {'k': 1} }}") ==
        "y True True True");
  CHECK(render("{{ [1, 2, 3][1] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][1:] }} {{ 'abcd'[::2] }} {{ {'a': {'b': 7}}.a.b }}") ==
        "2 3 [2, 3] ac 7");
  CHECK(render("{{ 1_000 + 0x10 + 0o10 + 0b10 }} {{ 'a' 'b' }} {{ \"it's\" }} {{ 'tab\\tx' }}") == "1026 ab it's tab\tx");
  CHECK(contains(error_of("{{ 1 + }}").message(), "end of tag"));
  CHECK(contains(error_of("{{ (1, 2 }}").message(), "a bracket in it is not closed"));
  CHECK(contains(error_of("{{ (1, 2] }}").message(), "expected ')'"));
  CHECK(contains(error_of("{{ [1 2] }}").message(), "expected ','"));
  CHECK(contains(error_of("{{ x is }}").message(), "test name"));
}

TEST_CASE("jinja: values print as Python prints them") {
  CHECK(render("{{ 7 / 2 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 3.0 }} {{ -0.5 }}") ==
        "3.5 0.30000000000000004 1e+16 1000000000000000.0 0.0001 1e-05 3.0 -0.5");
  CHECK(render("{{ none }} {{ true }} {{ [1, 'a', none, 2.5] }} {{ (1,) }} {{ (1, 'b') }} {{ {'k': [1]} }} {{ [] }}") ==
        "None True [1, 'a', None, 2.5] (1,) (1, 'b') {'k': [1]} []");
  CHECK(render("{{ [\"it's\"] }} {{ ['a\\nb'] }}") == "[\"it's\"] ['a\\nb']");
  CHECK(render("{{ x }}", {{"x", JinjaValue(2.0)}}) == "2.0");
  CHECK(render("{{ 1 == 1.0 }} {{ 1 == True }} {{ [1] == [1.0] }} {{ (1,) == [1] }} {{ {'a': 1} == {'a': 1} }}") ==
        "True True True False True");
}

TEST_CASE("jinja: tests: `is defined`, `is not none` and the rest") {
  const JinjaVariables v = {{"n", 3}, {"z", JinjaValue()}, {"s", "Ab"}, {"l", JinjaValue(JinjaList{1, 2})}};
  CHECK(render("{{ n is defined }} {{ q is defined }} {{ q is undefined }} {{ z is none }} {{ n is not none }}", v) ==
        "True False True True True");
  CHECK(render("{{ n is number }} {{ n is integer }} {{ n is float }} {{ s is string }} {{ l is sequence }} {{ l is mapping }}", v) ==
        "True True False True True False");
  CHECK(render("{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 2 is in l }} {{ n is gt 2 }}", v) ==
        "True False True False True True");
  CHECK(render("{{ true is true }} {{ 1 is true }} {{ false is boolean }} {{ 'ab' is lower }} {{ s is upper }}", v) ==
        "True False True True False");
  CHECK(render("{{ n if n is defined else 0 }},{{ q if q is defined else 0 }}", v) == "3,0");
  CHECK(contains(error_of("{{ 1 is frobnicated }}").message(), "unknown test 'frobnicated'"));
}

TEST_CASE("jinja: filters, `default` with and without an argument, `[a, b] | min`") {
  const JinjaVariables v = {{"n", 3}, {"z", JinjaValue()}, {"e", ""}, {"l", JinjaValue(JinjaList{3, 1, 2})}};
  CHECK(render("{{ q | default(5) }} {{ q | default }}|{{ q | d('x') }} {{ z | default(1) }} {{ e | default('E', true) }}", v) ==
        "5 |x None E");
  CHECK(render("{{ [n, 10] | min }} {{ [n * 4, 10] | max }} {{ l | sum }} {{ l | length }} {{ l | first }} {{ l | last }}", v) ==
        "3 12 6 3 3 2");
  CHECK(render("{{ l | sort }} {{ l | sort(reverse=true) }} {{ l | reverse | list }} {{ [1, 2, 1] | unique | list }}", v) ==
        "[1, 2, 3] [3, 2, 1] [2, 1, 3] [1, 2]");
  CHECK(render("{{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A'] | min }} {{ l | join('-') }} {{ l | map('string') | join }}", v) ==
        "['A', 'b', 'c'] A 3-1-2 312");
  CHECK(render("{{ 'ab c' | upper }} {{ 'ab c' | title }} {{ '  x ' | trim }} {{ 'aXa' | replace('a', 'b') }} {{ 'x' | length }}") ==
        "AB C Ab C x bXb 1");
  CHECK(render("{{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ 2.7 | int }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }}") ==
        "43 0 2.5 2 2.0 4.0 2.57");
  CHECK(render("{{ {'b': 2, 'a': 1} | dictsort }} {{ {'a': 1} | items | list }} {{ [1, 0, 2] | select | list }} {{ l | select('odd') | list }}", v) ==
        "[('a', 1), ('b', 2)] [('a', 1)] [1, 2] [3, 1]");
  CHECK(render("{{ [{'a': 2}, {'a': 1}] | sort(attribute='a') | map(attribute='a') | list }} {{ {'b': [1, 'x']} | tojson }}") ==
        "[1, 2] {\"b\": [1, \"x\"]}");
  CHECK(render("{{ 'a\\nb' | indent(2) }}|{{ '%d-%s' % (n, 'x') }}|{{ '%.2f' | format(2.5) }}|{{ '{} {}'.format(1, 2) }}", v) ==
        "a\n  b|3-x|2.50|1 2");
  CHECK(contains(error_of("{{ [] | frist }}").message(), "unknown filter 'frist' (did you mean 'first'?)"));
}

TEST_CASE("jinja: for over lists, dicts and .items(); loop; else; a filter") {
  const JinjaVariables v = {{"d", JinjaValue(JinjaDict{{"a", 1}, {"b", "x"}})}};
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", v) == "a=1;b=x;");
  CHECK(render("{% for k in d %}{{ k }}{% endfor %} {% for c in 'xy' %}{{ c }}.{% endfor %}", v) == "ab x.y.");
  CHECK(render("{% for a, b in [(1, 2), [3, 4]] %}{{ a * b }},{% endfor %}") == "2,12,");
  CHECK(render("{% for x in [5, 6, 7] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}") ==
        "103TrueFalse3 212FalseFalse3 321FalseTrue3 ");
  CHECK(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ ',' if not loop.last }}{% endfor %}") == "2,4");
  CHECK(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in range(2) %}{% for y in range(2) %}{{ loop.index0 }}{% endfor %}{{ loop.index0 }}|{% endfor %}") ==
        "010|011|");
  CHECK(contains(error_of("{% for a, b in [1, 2] %}{% endfor %}").message(), "an int is not iterable"));
}

TEST_CASE("jinja: set forms, namespace, block set and with") {
  CHECK(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set t = 1, 2 %}{{ t }}") == "(1, 2)");
  CHECK(render("{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}") == "6");
  CHECK(render("{% set d = dict(a=1, b=2) %}{{ d.a + d['b'] }} {{ d.get('c', 9) }} {{ dict() }}") == "3 9 {}");
  CHECK(render("{% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.append(2) %}{{ l }}") == "[1, 2]");
  CHECK(render("{% set block %}a{{ 1 + 1 }}b{% endset %}[{{ block }}]") == "[a2b]");
  CHECK(render("{% with q = 2, r = 3 %}{{ q * r }}{% endwith %}{{ q is defined }}") == "6False");
  CHECK(contains(error_of("{% set x = 1 %}{% set x.y = 2 %}").message(), "needs a namespace()"));
}

TEST_CASE("jinja: {% assert %} (AccelForge's extension) fails with its message at its tag") {
  const JinjaVariables v = {{"N", 3}};
  CHECK(render("{% assert N > 1, 'N too small' %}ok", v) == "ok");
  SpecError e = error_of("a\n  {% assert N > 5, \"N must exceed \" ~ 5 %}", v);
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 3);
  CHECK(e.message() == "{% assert %} failed: N must exceed 5");
  // Without a message: the line, as AccelForge says it.
  CHECK(error_of("\n\n{% assert N in [1, 2] %}", v).message() == "{% assert %} failed: assertion failed on line 3");
  CHECK(contains(error_of("{% assert %}").message(), "needs a condition"));
}

TEST_CASE("jinja: {% raw %} keeps tags as text; comments inside YAML comments still render") {
  CHECK(render("{% raw %}{{ x }} {% if %}{% endraw %}.") == "{{ x }} {% if %}.");
  CHECK(render("a {%- raw %} {{ y }} {% endraw -%} b") == "a {{ y }} b");
  CHECK(contains(error_of("{% raw %}{{ x }}").message(), "endraw"));
  // A tag in a YAML comment is still a tag (AccelForge's arch files rely on it).
  CHECK(render("#  {% if X | default(False) %}on{% endif %}") == "#  ");
}

TEST_CASE("jinja: undefined variables are errors, with the nearest name") {
  const JinjaVariables v = {{"N_EINSUMS", 2}};
  SpecError e = error_of("{{ N_EINSUM + 1 }}", v);
  CHECK(e.message() == "undefined variable 'N_EINSUM' (did you mean 'N_EINSUMS'?)");
  CHECK(contains(error_of("{{ x.y }}").message(), "undefined variable 'x'"));
  CHECK(contains(error_of("{{ {'a': 1}.b + 1 }}").message(), "has no attribute 'b'"));
  CHECK(contains(error_of("{% if q %}{% endif %}").message(), "undefined variable 'q'"));
  // Jinja's own globals exist; AccelForge's Jinja has no ceil() or max() (so neither do we).
  CHECK(render("{{ range(3) | list }} {{ dict(a=1) }}") == "[0, 1, 2] {'a': 1}");
  CHECK(contains(error_of("{{ ceil(2.5) }}").message(), "undefined variable 'ceil'"));
  CHECK(contains(error_of("{{ max(1, 2) }}").message(), "undefined variable 'max'"));
  // An inline `if` without `else` that is false prints nothing, as in Jinja2.
  CHECK(render("[{{ 'x' if false }}]") == "[]");
}

TEST_CASE("jinja: a failing tag names the -D value it read") {
  JinjaOptions options;
  const JinjaVariables defines = {{"N_EINSUMS", "two"}};
  options.defines = &defines;
  try {
    render_with("x\n{% for i in range(N_EINSUMS + 1) %}{% endfor %}", defines, options);
    FAIL("no error");
  } catch (const SpecError& e) {
    CHECK(e.where().line == 2);
    CHECK(e.message() == "unsupported operand types for +: 'str' and 'int' (N_EINSUMS is 'two' from -D N_EINSUMS=two)");
  }
  // A `set` that shadows it is not blamed on -D.
  try {
    render_with("{% set N_EINSUMS = [] %}{{ N_EINSUMS + 1 }}", defines, options);
    FAIL("no error");
  } catch (const SpecError& e) {
    CHECK(e.message() == "unsupported operand types for +: 'list' and 'int'");
  }
}

TEST_CASE("jinja: host functions get positional and keyword arguments and the visible variables") {
  std::vector<std::string> seen;
  JinjaGlobals globals;
  globals["probe"] = [&](JinjaCall& call) {
    std::string s = "args=" + std::to_string(call.args.size());
    for (const auto& [k, v] : call.kwargs) s += " " + k + "=" + v.str();
    for (const auto& [k, v] : call.locals) s += " local:" + k + "=" + v.str();
    s += " at " + call.where.str();
    seen.push_back(s);
    return JinjaValue("!");
  };
  globals["boom"] = [](JinjaCall&) -> JinjaValue { throw looptrace::JinjaError("boom failed"); };
  JinjaOptions options;
  options.globals = &globals;
  const JinjaVariables base = {{"B", 1}};
  CHECK(render_with("{% set top = 2 %}\n{% for i in range(1) %}{{ probe(1, 2, k='v') }}{% endfor %}", base, options) == "\n!");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "args=2 k=v local:i=0 local:loop={'index': 1, 'index0': 0, 'revindex': 1, 'revindex0': 0, "
                   "'first': True, 'last': True, 'length': 1, 'depth': 1, 'depth0': 0} local:top=2 at t.yaml:2:24");
  try {
    render_with("a\n  {{ boom() }}", base, options);
    FAIL("no error");
  } catch (const SpecError& e) {
    CHECK(e.where().line == 2);
    CHECK(e.where().column == 3);
    CHECK(e.message() == "boom failed");
  }
}

TEST_CASE("evaluate_python_expression: rank sizes as AccelForge evaluates them") {
  const auto lookup = [](std::string_view name) -> std::optional<JinjaValue> {
    if (name == "X") return JinjaValue(8);
    return std::nullopt;
  };
  auto eval = [&](std::string_view text) { return looptrace::evaluate_python_expression(text, lookup); };
  CHECK(eval("128*32") == JinjaValue(4096));
  CHECK(eval("16 * 8") == JinjaValue(128));
  CHECK(eval("512 // 3") == JinjaValue(170));
  CHECK(eval("ceil(256*2/X)").is_int());
  CHECK(eval("ceil(256*2/X)") == JinjaValue(64));
  CHECK(eval("ceil(256*1/3)") == JinjaValue(86));
  CHECK(eval("512 / 2").is_float());  // a float, which a rank size refuses
  CHECK(eval("min(X, 3) + max([1, 5]) + round(2.5) + floor(-0.5) + abs(-2)") == JinjaValue(3 + 5 + 2 - 1 + 2));
  CHECK(eval("2 ** 10 + int(3.9) + len([1, 2]) + gcd(12, 18)") == JinjaValue(1024 + 3 + 2 + 6));
  CHECK(eval("log2(1024)") == JinjaValue(10.0));
  CHECK_THROWS_WITH_AS(eval("Y + 1"), "name 'Y' is not defined", looptrace::JinjaError);
  CHECK_THROWS_WITH_AS(eval("1 / 0"), "division by zero", looptrace::JinjaError);
  CHECK_THROWS_WITH_AS(eval("9223372036854775807 + 1"), "integer overflow (looptrace computes with 64-bit integers)",
                       looptrace::JinjaError);
  // One list per slice: a huge count is refused, not allocated (it ran out of memory).
  CHECK(render("{{ 'abcde' | slice(2) | list }}") == "[['a', 'b', 'c'], ['d', 'e']]");
  CHECK_THROWS_WITH_AS(render("{{ 'abc' | slice(9223372036854775807) }}"), doctest::Contains("more than 1048576 slices"),
                       std::exception);
}

TEST_CASE("parse_define: -D KEY=VALUE, True/False booleans, and the variable in errors") {
  CHECK(looptrace::parse_define("DECODE=False") == std::pair<std::string, looptrace::DefineValue>{"DECODE", false});
  CHECK(looptrace::parse_define("DECODE=True").second == looptrace::DefineValue(true));
  CHECK(looptrace::parse_define("N=-12") == std::pair<std::string, looptrace::DefineValue>{"N", -12});
  CHECK(looptrace::parse_define("T=grouped_query").second == looptrace::DefineValue("grouped_query"));
  CHECK(looptrace::parse_define("E=").second == looptrace::DefineValue(""));
  CHECK(looptrace::parse_define("X=1.5").second == looptrace::DefineValue("1.5"));  // integers only; the rest is text
  CHECK_THROWS_WITH_AS(looptrace::parse_define("N=99999999999999999999"),
                       "-D N=99999999999999999999: the integer 99999999999999999999 does not fit in 64 bits "
                       "(-9223372036854775808 to 9223372036854775807)",
                       SpecError);
  CHECK_THROWS_WITH_AS(looptrace::parse_define("novalue"), "-D takes KEY=VALUE, not 'novalue'", SpecError);
  CHECK_THROWS_WITH_AS(looptrace::parse_define("=3"), "-D takes KEY=VALUE, not '=3'", SpecError);
  // A boolean from -D is a boolean in the template.
  CHECK(render("{% if D %}yes{% else %}no{% endif %} {{ D }} {{ D is boolean }}", {{"D", looptrace::to_jinja(looptrace::parse_define("D=False").second)}}) ==
        "no False True");
}

TEST_CASE("jinja: macros with defaults, keyword arguments, recursion and closures") {
  CHECK(render("{% macro m(a, b=2) %}[{{ a }}-{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(b=5, a=4) }}") ==
        "[1-2][1-3][4-5]");
  CHECK(render("{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(3) }}") == "6");
  CHECK(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=4) }}") == "1(2,){'x': 4}");
  CHECK(render("{% macro m(n) %}{% if n > 0 %}{{ n }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(3) }}") == "321");
  CHECK(render("{% set top = 'T' %}{% macro m() %}{{ top }}{% endmacro %}{{ m() | lower }}") == "t");
  CHECK(render("{% for i in range(2) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}") == "01");
  // AccelForge's _matmul_convention.yaml: whitespace-stripped macro bodies.
  CHECK(render("{%- macro tn(i) -%}\n  {% if i == 0 %}\n    {{- 'I' -}}\n  {% else %}\n    {{- 'ABC'[i-1] -}}\n"
               "  {% endif %}\n{%- endmacro -%}{{ tn(0) }}{{ tn(2) }}") == "IB");
  CHECK(contains(error_of("{% macro m(a) %}{{ a + 1 }}{% endmacro %}{{ m() }}").message(),
                 "macro 'm' was called without 'a'"));
  CHECK(contains(error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").message(), "more than 50 levels deep"));
  CHECK(contains(error_of("{% macro m() %}x").message(), "endmacro"));
}

TEST_CASE("jinja: {% import %}, {% from ... import %} and {% include %} through the host's loader") {
  const std::map<std::string, std::string> files = {
      {"conv.yaml", "{% set NAMES = 'ABC' %}{% set _hidden = 1 %}{% macro name(i) %}{{ NAMES[i] }}{% endmacro %}ignored"},
      {"part.yaml", "- {{ who }}\n- two"},
      {"self.yaml", "{% include 'self.yaml' %}"},
  };
  JinjaOptions options;
  options.load_template = [&](const std::string& name) {
    auto it = files.find(name);
    if (it == files.end()) throw looptrace::JinjaError("template '" + name + "' is not found");
    return std::make_pair(it->second, "lib/" + name);
  };
  CHECK(render_with("{% from 'conv.yaml' import name, NAMES as N %}{{ name(1) }}{{ N }}", {}, options) == "BABC");
  CHECK(render_with("{% import 'conv.yaml' as c %}{{ c.name(2) }} {{ c.NAMES }} {{ c._hidden is defined }}", {}, options) ==
        "C ABC False");
  // An include sees the current variables (with context, Jinja's default) and keeps its
  // own lines in the line map.
  const auto r = render_jinja("x:\n{% set who = 'one' %}{% include 'part.yaml' %}", {}, "t.yaml", options);
  CHECK(r.text == "x:\n- one\n- two");
  CHECK(r.source_file == std::vector<int>{0, 1, 1});
  CHECK(r.source_line == std::vector<int>{1, 1, 2});
  CHECK(r.files[1] == "lib/part.yaml");
  CHECK(r.file_notes[1] == "included from t.yaml:2:22");  // the tag, after 21 characters
  CHECK(render_with("{% include 'missing.yaml' ignore missing %}.", {}, options) == ".");
  auto error = [&](const std::string& source) -> std::string {
    try {
      render_with(source, {}, options);
    } catch (const SpecError& e) {
      return e.message();
    }
    return "no error";
  };
  CHECK(error("{% include 'missing.yaml' %}") == "template 'missing.yaml' is not found");
  CHECK(error("{% from 'conv.yaml' import nme %}") == "the template 'lib/conv.yaml' does not define 'nme' (did you mean 'name'?)");
  CHECK(contains(error("{% include 'self.yaml' %}"), "more than 50 levels deep"));
  // Without a loader (plain render_jinja), they are errors.
  CHECK(contains(error_of("{% import 'conv.yaml' as c %}").message(), "only spec files can load templates"));
}

// The parser resolves each operator once and the evaluator dispatches through a table:
// each spelling must reach its own operation (a table out of step with its enum fails here).
TEST_CASE("jinja: every operator reaches its own operation") {
  CHECK(render("{{ 7 + 2 }},{{ 7 - 2 }},{{ 7 * 2 }},{{ 7 / 2 }},{{ -7 // 2 }},{{ -7 % 3 }},{{ 2 ** 3 }},{{ 7 ~ 2 }}") ==
        "9,5,14,3.5,-4,2,8,72");
  CHECK(render("{{ 1 == 1 }},{{ 1 != 1 }},{{ 1 < 2 }},{{ 2 <= 1 }},{{ 2 > 1 }},{{ 1 >= 2 }},{{ 1 in [1] }},"
               "{{ 1 not in [1] }}") == "True,False,True,False,True,False,True,False");
  CHECK(render("{{ [1, 2] < [1, 3] }},{{ 2 >= 2 }},{{ -(3) }},{{ +True }},{{ 1 < 2 < 3 }}") == "True,True,-3,1,True");
  // Messages still spell the operator as written.
  CHECK(contains(error_of("{{ 'a' - 1 }}").message(), "unsupported operand types for -: 'str' and 'int'"));
  CHECK(contains(error_of("{{ [1] >= 'a' }}").message(), "'>=' is not supported between"));
  CHECK(contains(error_of("{{ -'a' }}").message(), "bad operand type for unary -: 'str'"));
}
