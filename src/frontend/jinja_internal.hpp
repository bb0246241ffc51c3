// Inside the Jinja engine: expression tokens, trees, the parser and the evaluator that
// templates (jinja.cpp) and Python-style spec values (evaluate_python_expression) share.
#pragma once

#include <cstdint>
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
  std::vector<std::string> ops;                         // Compare: between children
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
JinjaValue binary_op(const std::string& op, const JinjaValue& a, const JinjaValue& b);
bool compare_op(const std::string& op, const JinjaValue& a, const JinjaValue& b);
bool contains(const JinjaValue& container, const JinjaValue& item);
std::string printf_format(const std::string& format, const JinjaValue& args);
bool is_builtin_global(std::string_view name, bool python_mode);

}  // namespace jinja
}  // namespace looptrace
