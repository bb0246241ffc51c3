#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "looptrace/error.hpp"
#include "looptrace/spec/jinja.hpp"

using looptrace::jinja_value_from_text;
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

TEST_CASE("jinja_value_from_text") {
  CHECK(jinja_value_from_text("42") == JinjaValue{std::int64_t{42}});
  CHECK(jinja_value_from_text("-7") == JinjaValue{std::int64_t{-7}});
  CHECK(jinja_value_from_text("+3") == JinjaValue{std::int64_t{3}});
  CHECK(jinja_value_from_text("-9223372036854775808") == JinjaValue{INT64_MIN});
  // Digits that do not fit in 64 bits are an error, not a string the template would see.
  CHECK_THROWS_WITH_AS(jinja_value_from_text("99999999999999999999"),
                       "the integer 99999999999999999999 does not fit in 64 bits "
                       "(-9223372036854775808 to 9223372036854775807)",
                       SpecError);
  CHECK_THROWS_AS(jinja_value_from_text("-9223372036854775809"), SpecError);
  CHECK(jinja_value_from_text("True") == JinjaValue{true});
  CHECK(jinja_value_from_text("FALSE") == JinjaValue{false});
  CHECK(jinja_value_from_text("12a") == JinjaValue{std::string("12a")});
  CHECK(jinja_value_from_text("-") == JinjaValue{std::string("-")});
  CHECK(jinja_value_from_text("") == JinjaValue{std::string("")});
}
