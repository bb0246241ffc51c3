// The Jinja2 subset that AccelForge spec files use, rendered before YAML parsing, and
// the same expression language for the values AccelForge evaluates as Python
// expressions (rank sizes such as `ceil(256*2/X)`).
//
// Templates: {{ expr }}, {% for a[, b] in iterable [if cond] %}...{% else %}...
// {% endfor %} (with `loop`), {% if %}/{% elif %}/{% else %}/{% endif %},
// {% set x = e %}, {% set a, b = e %}, {% set ns.attr = e %}, {% set x %}...{% endset %},
// {% with %}, {% macro %}, {% import %}, {% from ... import %}, {% include %},
// {% assert cond[, "message"] %} (AccelForge's extension), {% raw %}, {# comments #},
// whitespace control with `-`. Expressions: Jinja2's grammar (literals
// incl. lists, tuples and dicts; `a if c else b`; or/and/not; comparisons, `in`,
// `not in`; + - * / // % ** ~; attributes, subscripts, slices, calls with keyword
// arguments; filters `x | f(...)`; tests `x is [not] t`). Values are Python's: None,
// bool, int (64-bit, overflow is an error), float, str, list, tuple, dict.
// Undefined variables are errors (AccelForge uses StrictUndefined); `is defined` and
// `default` see them.
// Internal: spec loading renders files with it; not installed.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "looptrace/support/error.hpp"
#include "values.hpp"

namespace looptrace {

struct RenderedTemplate {
  std::string text;
  // source_line[k] is the 1-based line that produced output line k (0-based), in
  // files[source_file[k]]: 0 is the template itself, others are files whose text a
  // host function pasted (include_text), so YAML errors point at what the user wrote.
  std::vector<int> source_line;
  std::vector<int> source_file;
  std::vector<std::string> files;       // files[0] is the template's own name
  std::vector<std::string> file_notes;  // per file: "" or "included from a.yaml:3:1"

  int source_line_of(int output_line_1based) const;
  int source_file_of(int output_line_1based) const;  // an index into files
};

// A call of a function the host defines (AccelForge's include(), find_path(), ...).
struct JinjaCall {
  std::vector<JinjaValue> args;
  std::vector<std::pair<std::string, JinjaValue>> kwargs;
  SourceLocation where;        // the tag that calls
  const JinjaVariables* base;  // the variables the template was rendered with
  JinjaVariables locals;       // what `set` and `for` made visible at the call (inner wins)
  // A function whose result is text from another file (include_text) may say where
  // each of its lines came from, so that YAML errors in it point into that file.
  std::shared_ptr<const RenderedTemplate> pasted;

  const JinjaValue* kwarg(std::string_view name) const;
};
// Throws SpecError (with the location of a problem elsewhere) or JinjaError (a problem
// of the call, which the renderer places at the calling tag).
using JinjaFunction = std::function<JinjaValue(JinjaCall&)>;
using JinjaGlobals = std::map<std::string, JinjaFunction, std::less<>>;

// A problem inside one tag or expression; the renderer adds the tag's location.
class JinjaError : public std::runtime_error {
 public:
  explicit JinjaError(const std::string& message) : std::runtime_error(without_nul(message)) {}
};


struct JinjaOptions {
  const JinjaGlobals* globals = nullptr;  // host functions, after Jinja's own
  std::int64_t max_iterations = 1'000'000;  // loop iterations (and range() items) in all
  // When set, the count of what is left of max_iterations, shared with other renders
  // (the files that include() renders), so that includes cannot multiply the work.
  std::int64_t* iteration_budget = nullptr;
  // Every variable name the template looked up (defined or not), so that a caller can
  // warn about -D values nothing used.
  std::set<std::string, std::less<>>* looked_up = nullptr;
  // The -D values among the variables: an error in a tag that read one names it, so
  // that a wrong -D value is easy to find.
  const JinjaVariables* defines = nullptr;
  // Jinja's own {% include %}, {% import %} and {% from ... import %}: the text and
  // file name of a template by its name (AccelForge: relative to the file's folder).
  // Throws JinjaError when there is none. Without it those statements are errors.
  std::function<std::pair<std::string, std::string>(const std::string& name)> load_template;
};

// Renders `source`; errors (undefined variable, bad expression, unclosed block, a
// failed assert, too many loop iterations) throw SpecError naming `filename` and the
// line and column of the tag.
RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename, const JinjaOptions& options);
RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename,
                              std::int64_t max_iterations = 1'000'000);

// Evaluates one expression as AccelForge evaluates a spec value: Python syntax (the
// Jinja grammar above) with Python's math functions (ceil, floor, min, max, round,
// sqrt, log2, ...) and `lookup` for names. Throws JinjaError.
JinjaValue evaluate_python_expression(
    std::string_view text, const std::function<std::optional<JinjaValue>(std::string_view)>& lookup);

}  // namespace looptrace
