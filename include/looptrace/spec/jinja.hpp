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
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "looptrace/error.hpp"

namespace looptrace {

class JinjaValue;
using JinjaList = std::vector<JinjaValue>;
using JinjaDict = std::vector<std::pair<JinjaValue, JinjaValue>>;  // insertion order, as Python
struct JinjaCallable;                                                // a function value (internal)

// An undefined name, kept so that `is defined` and `default` can see it and anything
// else can say what was undefined.
struct JinjaUndefined {
  std::string name;     // the variable, or "d.key" for a missing attribute or item
  std::string message;  // what using it says: "undefined variable 'x' (did you mean 'y'?)"
  // Jinja's plain Undefined (what `a if c` gives when c is false): prints as "", is
  // false and iterates as empty; anything else still fails.
  bool lenient = false;
};

class JinjaValue {
 public:
  enum class Kind { None, Bool, Int, Float, String, List, Tuple, Dict, Undefined, Callable };

  JinjaValue() = default;  // None
  JinjaValue(bool b) : v_(b) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JinjaValue(T i) : v_(static_cast<std::int64_t>(i)) {}
  JinjaValue(double d) : v_(d) {}
  JinjaValue(std::string s) : v_(std::move(s)) {}
  JinjaValue(std::string_view s) : v_(std::string(s)) {}
  JinjaValue(const char* s) : v_(std::string(s)) {}
  JinjaValue(JinjaList list, bool tuple = false);
  JinjaValue(JinjaDict dict);
  JinjaValue(JinjaUndefined u) : v_(std::make_shared<const JinjaUndefined>(std::move(u))) {}
  explicit JinjaValue(std::shared_ptr<const JinjaCallable> f) : v_(std::move(f)) {}

  Kind kind() const;
  bool is_none() const { return kind() == Kind::None; }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }      // not bool
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_tuple() const { return kind() == Kind::Tuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return is_dict() && namespace_; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  // Lists, tuples and dicts are shared, as Python objects are: `d.update()` and
  // `l.append()` change every name that refers to them.
  JinjaList& list() const { return *std::get<std::shared_ptr<JinjaList>>(v_); }
  JinjaDict& dict() const { return *std::get<std::shared_ptr<JinjaDict>>(v_); }
  const JinjaUndefined& undefined() const { return *std::get<std::shared_ptr<const JinjaUndefined>>(v_); }
  const JinjaCallable& callable() const { return *std::get<std::shared_ptr<const JinjaCallable>>(v_); }

  static JinjaValue make_namespace(JinjaDict attributes);
  // The value of `key` in a dict, or nullptr.
  const JinjaValue* find(const JinjaValue& key) const;
  const JinjaValue* find(std::string_view key) const;
  const JinjaValue* find(const std::string& key) const { return find(std::string_view(key)); }
  const JinjaValue* find(const char* key) const { return find(std::string_view(key)); }

  std::string str() const;   // Python's str(): what {{ }} prints
  std::string repr() const;  // Python's repr(): how a list prints its items
  std::string type_name() const;  // "int", "str", "list", ...
  bool truthy() const;            // Python's bool(); an undefined value throws
  JinjaValue deep_copy() const;   // lists and dicts copied, not shared

  // Python's ==: 1 == 1.0 == True, lists and dicts by content, different types unequal.
  friend bool operator==(const JinjaValue& a, const JinjaValue& b);
  friend bool operator!=(const JinjaValue& a, const JinjaValue& b) { return !(a == b); }

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, std::shared_ptr<JinjaList>,
               std::shared_ptr<JinjaDict>, std::shared_ptr<const JinjaUndefined>,
               std::shared_ptr<const JinjaCallable>>
      v_;
  bool tuple_ = false;      // a list that prints as (a, b)
  bool namespace_ = false;  // a dict whose attributes `set ns.x = ...` may assign
};

using JinjaVariables = std::map<std::string, JinjaValue, std::less<>>;

// "-D KEY=VALUE" text to a value: True/False (any case) give booleans; text that looks
// like an integer gives an integer and throws SpecError when it does not fit in 64 bits;
// anything else is a string.
JinjaValue jinja_value_from_text(std::string_view text);

// "KEY=VALUE" to (KEY, value), as every caller of -D should read it. Throws SpecError
// naming the variable (or the text, when there is no KEY=).
std::pair<std::string, JinjaValue> parse_define(std::string_view text);

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
  using std::runtime_error::runtime_error;
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
