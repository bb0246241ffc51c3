// The Jinja subset that AccelForge specs use, rendered before YAML parsing.
//   {{ expr }}, {% for i in range(a) %} / range(a, b), {% if e %}...{% elif e %}
//   ...{% else %}...{% endif %}, {% set x = x | default(128) %}, {# comments #},
//   integer + - * // %, comparisons, and/or/not, parentheses.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "looptrace/error.hpp"

namespace looptrace {

// A template value: an integer (what -D gives when the text looks like one), a
// boolean, or a string.
using JinjaValue = std::variant<std::int64_t, bool, std::string>;
using JinjaVariables = std::map<std::string, JinjaValue, std::less<>>;

// "-D KEY=VALUE" text to a value: an integer when it looks like one, else a string
// ("true"/"false" give booleans).
JinjaValue jinja_value_from_text(std::string_view text);

struct RenderedTemplate {
  std::string text;
  // source_line[k] is the 1-based line of the template that produced output line k
  // (0-based), so YAML errors can point at the file the user wrote.
  std::vector<int> source_line;

  int source_line_of(int output_line_1based) const;
};

// Renders `source`; errors (unknown variable, bad expression, unclosed block, a loop
// of more than `max_iterations` iterations in all) throw SpecError naming `filename`,
// the line and column in the template.
RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename,
                              std::int64_t max_iterations = 1'000'000);

}  // namespace looptrace
