// Inside the Jinja engine: expression tokens, trees, the parser and the evaluator that
// templates (jinja.cpp) and Python-style spec values (evaluate_python_expression) share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja.hpp"

namespace looptrace {

// A function value: one of Jinja's (range, dict, namespace), one of Python's math
// functions (Python expressions only), a method bound to its object, or the host's.
struct JinjaCallable {
  enum class Kind { Builtin, Method, Host, Macro };
  Kind kind;
  std::string name;
  JinjaValue self;                    // Method: the object
  std::shared_ptr<const void> macro;  // Macro: its definition and template (jinja.cpp)
};

namespace jinja {

constexpr int kMaxNesting = 100;     // parentheses, unary operators, blocks
constexpr int kMaxExprDepth = 1000;  // expression tree depth (evaluation recurses)
constexpr std::size_t kMaxString = 16u << 20;  // one string value
constexpr std::size_t kMaxItems = 1u << 20;    // one list or dict

bool is_space(char c);
bool is_digit(char c);
bool is_ident_start(char c);
bool is_ident_char(char c);
// " (did you mean 'x'?)" for the nearest of `candidates`, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
// "an int", "a str": a value's type with its article, for messages.
std::string an(const JinjaValue& v);

// ---------------------------------------------------------------- tokens

enum class Tok { Int, Float, Str, Name, Op, End };

struct Token {
  Tok kind;
  std::string text;  // operator, name or string contents
  std::int64_t int_value = 0;
  double float_value = 0;
  std::size_t offset = 0;  // in the expression text
};

std::vector<Token> tokenize(std::string_view text);
std::string describe(const Token& t);

// ---------------------------------------------------------------- operators

// Operators as the parser resolves them, once; the evaluator dispatches on them through
// tables indexed by these values (jinja_eval.cpp), in the order written here.
enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat };
enum class CompareOp : std::uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
enum class UnaryOp : std::uint8_t { Plus, Minus };

// The operator spelled `text` ("//", "not in", "-"); throws for another spelling.
BinaryOp binary_op_of(std::string_view text);
CompareOp compare_op_of(std::string_view text);
UnaryOp unary_op_of(std::string_view text);
std::string_view spelling(BinaryOp op);
std::string_view spelling(CompareOp op);
std::string_view spelling(UnaryOp op);

// ---------------------------------------------------------------- trees

enum class ExprKind {
  Literal, Name, List, Tuple, Dict, Unary, Binary, And, Or, Not, Compare, Cond,
  GetAttr, GetItem, Slice, Call, Filter, Test,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  std::size_t offset = 0;  // where it starts in the expression text
  std::string name;        // Name, GetAttr, Filter, Test; the operator of Unary/Binary
  JinjaValue value;        // Literal
  // Operands. Call: callee then positional arguments; Filter/Test: operand then
  // arguments; Cond: then, condition, else (may be null); Slice: object, start, stop,
  // step (each may be null); Dict: key, value, key, value, ...
  std::vector<ExprPtr> children;
  std::vector<CompareOp> ops;                           // Compare: between children
  BinaryOp binary = BinaryOp::Add;                      // Binary
  UnaryOp unary = UnaryOp::Plus;                        // Unary
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter, Test
  bool negated = false;                                 // Test: `is not`
  int depth = 1;
};

// Recursive descent over Jinja2's grammar (jinja2/parser.py): condexpr < or < and <
// not < comparisons < + - < ~ < * / // % < ** < unary - + < postfix and filters.
class ExprParser {
 public:
  explicit ExprParser(std::string_view text) : tokens_(tokenize(text)) {}

  const Token& peek(std::size_t ahead = 0) const;
  Token next();
  bool at_end() const { return peek().kind == Tok::End; }
  bool at_name(std::string_view name) const;
  bool at_op(std::string_view op) const;
  bool accept_op(std::string_view op);
  bool accept_name(std::string_view name);
  void expect_op(std::string_view op);
  std::string expect_identifier(std::string_view what);
  void expect_end() const;

  ExprPtr expression(bool with_condexpr = true);
  // `a, b` is a tuple (as in `{% set x = 1, 2 %}`); a single expression stays itself.
  ExprPtr tuple(bool with_condexpr = true, std::initializer_list<std::string_view> stop_names = {});
  // Assignment targets: `a`, `a, b`, `(a, b)`; returns the names.
  std::vector<std::string> targets(std::string_view before);

 private:
  ExprPtr condexpr();
  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr power();
  ExprPtr unary(bool with_filter);
  ExprPtr primary();
  ExprPtr postfix(ExprPtr e);
  ExprPtr filter_expr(ExprPtr e);
  ExprPtr subscript(ExprPtr e, std::size_t offset);
  void call_args(Expr& call);
  ExprPtr list_literal(std::size_t offset);
  ExprPtr dict_literal(std::size_t offset);

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

ExprPtr make_expr(ExprKind kind, std::size_t offset, std::string name = {},
                  std::vector<ExprPtr> children = {});

// ---------------------------------------------------------------- evaluation

// Evaluates trees; names and host functions come from the subclass.
class Evaluator {
 public:
  // `budget` counts down loop iterations and range() items; `limit` is what it started
  // from (for the message), shared by every render of one load.
  Evaluator(bool python_mode, std::int64_t* budget, std::int64_t limit)
      : python_(python_mode), budget_(budget), limit_(limit) {}
  virtual ~Evaluator() = default;

  JinjaValue eval(const Expr& e);
  // Calls a function value with evaluated arguments.
  JinjaValue call(const JinjaValue& f, std::vector<JinjaValue> args,
                  std::vector<std::pair<std::string, JinjaValue>> kwargs);
  // Items of a for loop: list and tuple items, dict keys, string characters.
  JinjaList iterate(const JinjaValue& v);
  // Charges n items (loop iterations, range() items) against the budget.
  void charge(std::int64_t n);
  JinjaValue get_attr(const JinjaValue& obj, const std::string& name);
  JinjaValue get_item(const JinjaValue& obj, const JinjaValue& key);

 protected:
  // The value of a name; an undefined value (with a message) when there is none.
  virtual JinjaValue lookup(const std::string& name) = 0;
  virtual JinjaValue call_host(const JinjaCallable& f, std::vector<JinjaValue> args,
                               std::vector<std::pair<std::string, JinjaValue>> kwargs) = 0;
  virtual JinjaValue call_macro(const JinjaCallable& f, std::vector<JinjaValue> args,
                                std::vector<std::pair<std::string, JinjaValue>> kwargs) {
    (void)args;
    (void)kwargs;
    throw JinjaError("macro '" + f.name + "' cannot be called here");
  }
  bool python_;

 private:
  JinjaValue eval_call(const Expr& e);
  JinjaValue eval_filter(const Expr& e);
  JinjaValue eval_test(const Expr& e);
  JinjaValue call_builtin(const std::string& name, std::vector<JinjaValue>& args,
                          std::vector<std::pair<std::string, JinjaValue>>& kwargs);
  JinjaValue call_method(const JinjaValue& self, const std::string& name, std::vector<JinjaValue>& args,
                         std::vector<std::pair<std::string, JinjaValue>>& kwargs);
  JinjaValue apply_filter(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                          std::vector<std::pair<std::string, JinjaValue>>& kwargs);
  bool apply_test(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args);

  std::int64_t* budget_;
  std::int64_t limit_;
};

// Python semantics shared by the evaluator and the template renderer.
[[noreturn]] void fail_undefined(const JinjaValue& v);
const JinjaValue& defined(const JinjaValue& v);  // throws for an undefined value
JinjaValue binary_op(BinaryOp op, const JinjaValue& a, const JinjaValue& b);
bool compare_op(CompareOp op, const JinjaValue& a, const JinjaValue& b);
JinjaValue unary_op(UnaryOp op, const JinjaValue& v);
bool contains(const JinjaValue& container, const JinjaValue& item);
std::string printf_format(const std::string& format, const JinjaValue& args);
bool is_builtin_global(std::string_view name, bool python_mode);

// ---------------------------------------------------------------- shared helpers

using Kwargs = std::vector<std::pair<std::string, JinjaValue>>;

[[noreturn]] inline void type_error(const std::string& message) { throw JinjaError(message); }

// Python's integers in 64 bits, checked (jinja_int.cpp); bools count as ints.
bool is_integral(const JinjaValue& v);
std::int64_t int_of(const JinjaValue& v);
double float_of(const JinjaValue& v);
[[noreturn]] void overflow();
std::int64_t add(std::int64_t a, std::int64_t b);
std::int64_t sub(std::int64_t a, std::int64_t b);
std::int64_t mul(std::int64_t a, std::int64_t b);
std::int64_t floor_div(std::int64_t x, std::int64_t y);
std::int64_t floor_mod(std::int64_t x, std::int64_t y);
std::int64_t int_pow(std::int64_t base, std::int64_t exp);
std::int64_t to_int(const JinjaValue& v, int base = 10);  // Python's int()
double to_float(const JinjaValue& v);                     // Python's float()
double round_half_even(double x, std::int64_t digits);    // Python's round()

// Python's string operations (jinja_strings.cpp).
std::string repeat(const std::string& s, std::int64_t n);
std::vector<std::string> characters(const std::string& s);  // UTF-8 code points
std::string lower(std::string s);
std::string upper(std::string s);
std::string strip(const std::string& s, const std::string* chars, bool left, bool right);
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);
std::vector<std::string> split(const std::string& s, const JinjaValue& sep, std::int64_t max_split);
JinjaValue string_list(const std::vector<std::string>& items);
std::string html_escape(const std::string& s);
std::string title_case(const std::string& s);
std::string capitalize(const std::string& s);
std::string python_format(const std::string& f, const std::vector<JinjaValue>& args, const Kwargs& kwargs);

// Jinja's tojson (jinja_json.cpp).
std::string json_quote(const std::string& s);
std::string to_json(const JinjaValue& v, int indent, int level);

// Arguments and values (jinja_eval.cpp).
[[noreturn]] void unsupported(const std::string& op, const JinjaValue& a, const JinjaValue& b);
const JinjaValue* kwarg(const Kwargs& kwargs, std::string_view name);
// Argument `index` or keyword `name`, or `fallback`.
JinjaValue arg(const std::vector<JinjaValue>& args, const Kwargs& kwargs, std::size_t index,
               std::string_view name, JinjaValue fallback = {});
void expect_args(const std::string& f, const std::vector<JinjaValue>& args, std::size_t lo, std::size_t hi);
bool less_than(const JinjaValue& a, const JinjaValue& b, bool case_sensitive = true);
JinjaValue attribute_of(Evaluator& ev, const JinjaValue& item, const JinjaValue& attribute);
JinjaValue items_of(const JinjaValue& d);
bool has_method(const JinjaValue& self, std::string_view name);  // jinja_methods.cpp
// The built-in abs() of one value, for the abs filter (jinja_builtins.cpp).
JinjaValue builtin_abs_of(Evaluator& ev, const JinjaValue& v);

// A name -> function table, sorted by name so that a lookup is a binary search.
template <class F>
struct Named {
  std::string_view name;
  F fn;
};

template <class E, std::size_t N>
constexpr bool sorted_by_name(const E (&table)[N]) {
  return std::is_sorted(std::begin(table), std::end(table), [](const E& a, const E& b) { return a.name < b.name; });
}

// The entry of `table` named `name`, or null.
template <class E, std::size_t N>
const E* find_named(const E (&table)[N], std::string_view name) {
  const E* it = std::lower_bound(std::begin(table), std::end(table), name,
                                 [](const E& e, std::string_view n) { return e.name < n; });
  return it != std::end(table) && it->name == name ? it : nullptr;
}

}  // namespace jinja
}  // namespace looptrace
