// A small Jinja2 subset. It follows Jinja2's default Environment: no trim_blocks, no
// lstrip_blocks, one trailing newline of the template dropped, `{%-`/`-%}` strip all
// whitespace. It differs on purpose in one place: an undefined variable is an error
// (StrictUndefined), because a typo in a spec should not silently render as "".
#include "looptrace/spec/jinja.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

namespace looptrace {

namespace {

constexpr int kMaxNesting = 100;               // block nesting and parentheses
constexpr int kMaxExprDepth = 1000;            // expression tree depth (eval recursion)
// Rendered bytes. yaml-cpp spends a few hundred bytes a node, and "[1,1,...]" is a
// node every two bytes: 8 MiB of YAML can take ~1 GiB to load. Real specs are kilobytes.
constexpr std::size_t kMaxOutput = 8u << 20;
constexpr std::size_t kMaxString = 16u << 20;   // one string value

// A problem inside a tag; the renderer adds the tag's location.
struct TagProblem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// ---------------------------------------------------------------- values

bool truthy(const JinjaValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i != 0;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return !std::get<std::string>(v).empty();
}

// What `{{ }}` prints: Python's str().
std::string to_text(const JinjaValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  return std::get<std::string>(v);
}

// Python treats booleans as integers in arithmetic.
std::int64_t to_int(const JinjaValue& v, std::string_view op) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  throw TagProblem("unsupported operand for '" + std::string(op) + "': a string");
}

std::int64_t floor_div(std::int64_t x, std::int64_t y) {
  if (y == 0) throw TagProblem("division by zero");
  if (x == INT64_MIN && y == -1) throw TagProblem("integer overflow");
  std::int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t x, std::int64_t y) {
  if (y == 0) throw TagProblem("division by zero");
  if (y == -1) return 0;  // x % -1 overflows for INT64_MIN in C++
  std::int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

JinjaValue arithmetic(const std::string& op, const JinjaValue& a, const JinjaValue& b) {
  const auto* sa = std::get_if<std::string>(&a);
  const auto* sb = std::get_if<std::string>(&b);
  if (op == "+" && sa && sb) {
    if (sa->size() + sb->size() > kMaxString) throw TagProblem("string too long");
    return *sa + *sb;
  }
  const std::int64_t x = to_int(a, op);
  const std::int64_t y = to_int(b, op);
  std::int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  else if (op == "//") r = floor_div(x, y);
  else r = floor_mod(x, y);
  if (overflow) throw TagProblem("integer overflow");
  return r;
}

bool values_equal(const JinjaValue& a, const JinjaValue& b) {
  const auto* sa = std::get_if<std::string>(&a);
  const auto* sb = std::get_if<std::string>(&b);
  if (sa || sb) return sa && sb && *sa == *sb;
  return to_int(a, "==") == to_int(b, "==");
}

bool compare(const std::string& op, const JinjaValue& a, const JinjaValue& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  const auto* sa = std::get_if<std::string>(&a);
  const auto* sb = std::get_if<std::string>(&b);
  if ((sa == nullptr) != (sb == nullptr))
    throw TagProblem("cannot compare a string with a number using '" + op + "'");
  const int c = sa ? sa->compare(*sb) : (to_int(a, op) < to_int(b, op) ? -1 : to_int(a, op) > to_int(b, op));
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

// ---------------------------------------------------------------- expression tokens

enum class Tok { Int, Str, Name, Op, End };

struct Token {
  Tok kind;
  std::string text;  // operator, name or string contents
  std::int64_t value = 0;
};

std::int64_t lex_int(std::string_view s, std::size_t& i) {
  std::int64_t value = 0;
  for (; i < s.size() && (is_digit(s[i]) || (s[i] == '_' && i + 1 < s.size() && is_digit(s[i + 1]))); ++i) {
    if (s[i] == '_') continue;  // Python/Jinja digit separators: 1_000
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, s[i] - '0', &value))
      throw TagProblem("integer literal too large");
  }
  if (i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1]))
    throw TagProblem("floating-point numbers are not supported");
  return value;
}

std::string lex_string(std::string_view s, std::size_t& i) {
  const char quote = s[i++];
  std::string out;
  for (; i < s.size() && s[i] != quote; ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
  }
  if (i >= s.size()) throw TagProblem("unterminated string literal");
  ++i;
  return out;
}

std::string lex_operator(std::string_view s, std::size_t i) {
  static constexpr std::string_view kTwo[] = {"//", "==", "!=", "<=", ">=", "**"};
  for (std::string_view op : kTwo)
    if (s.substr(i, 2) == op) return std::string(op);
  static constexpr std::string_view kOne = "+-*/%<>()|,=.[]{}:~";
  if (kOne.find(s[i]) != std::string_view::npos) return std::string(1, s[i]);
  throw TagProblem(std::string("unexpected character '") + s[i] + "'");
}

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
    } else if (is_digit(c)) {
      const std::int64_t v = lex_int(s, i);
      out.push_back({Tok::Int, {}, v});
    } else if (c == '\'' || c == '"') {
      out.push_back({Tok::Str, lex_string(s, i)});
    } else if (is_ident_start(c)) {
      const std::size_t start = i;
      while (i < s.size() && is_ident_char(s[i])) ++i;
      out.push_back({Tok::Name, std::string(s.substr(start, i - start))});
    } else {
      out.push_back({Tok::Op, lex_operator(s, i)});
      i += out.back().text.size();
    }
  }
  out.push_back({Tok::End, {}});
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Int: return std::to_string(t.value);
    case Tok::Str: return "string '" + t.text + "'";
    case Tok::End: return "end of tag";
    default: return "'" + t.text + "'";
  }
}

// ---------------------------------------------------------------- expression trees

enum class ExprKind { Literal, Variable, Unary, Binary, Compare, Default };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  std::string op;  // operator, or the variable's name
  JinjaValue value;
  std::vector<ExprPtr> children;
  std::vector<std::string> comparisons;  // Compare: between adjacent children
  int depth = 1;
};

ExprPtr make_expr(ExprKind kind, std::string op, std::vector<ExprPtr> children) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->op = std::move(op);
  for (const auto& child : children) e->depth = std::max(e->depth, child->depth + 1);
  // Long operator chains build deep trees; evaluation recurses over them.
  if (e->depth > kMaxExprDepth) throw TagProblem("expression too long");
  e->children = std::move(children);
  return e;
}

ExprPtr make_literal(JinjaValue value) {
  auto e = make_expr(ExprKind::Literal, {}, {});
  e->value = std::move(value);
  return e;
}

template <class... Children>
std::vector<ExprPtr> list(Children&&... children) {
  std::vector<ExprPtr> out;
  (out.push_back(std::move(children)), ...);
  return out;
}

bool is_keyword(std::string_view name) {
  return name == "and" || name == "or" || name == "not" || name == "in" || name == "if" ||
         name == "else" || name == "is";
}

// Recursive descent with Jinja2's precedence: or < and < not < comparisons < + - <
// * // % < unary - < filters (which bind to the unary operand, as `(-x)|f`).
class ExprParser {
 public:
  explicit ExprParser(std::string_view text) : tokens_(tokenize(text)) {}

  const Token& peek() const { return tokens_[pos_]; }
  Token next() { return pos_ + 1 < tokens_.size() ? tokens_[pos_++] : tokens_[pos_]; }
  bool at_end() const { return peek().kind == Tok::End; }

  bool accept_op(std::string_view op) {
    if (peek().kind != Tok::Op || peek().text != op) return false;
    ++pos_;
    return true;
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) throw TagProblem("expected '" + std::string(op) + "' but found " + describe(peek()));
  }
  bool accept_name(std::string_view name) {
    if (peek().kind != Tok::Name || peek().text != name) return false;
    ++pos_;
    return true;
  }
  std::string expect_identifier(std::string_view what) {
    if (peek().kind != Tok::Name || is_keyword(peek().text))
      throw TagProblem("expected " + std::string(what) + " but found " + describe(peek()));
    return next().text;
  }
  void expect_end() const {
    if (!at_end()) throw TagProblem("unexpected " + describe(peek()));
  }

  ExprPtr expression() { return or_expr(); }

 private:
  struct DepthGuard {
    explicit DepthGuard(int& depth) : depth_(depth) {
      if (++depth_ > kMaxNesting) throw TagProblem("expression nested too deeply");
    }
    ~DepthGuard() { --depth_; }
    int& depth_;
  };

  ExprPtr or_expr() {
    ExprPtr lhs = and_expr();
    while (accept_name("or")) lhs = make_expr(ExprKind::Binary, "or", list(std::move(lhs), and_expr()));
    return lhs;
  }

  ExprPtr and_expr() {
    ExprPtr lhs = not_expr();
    while (accept_name("and")) lhs = make_expr(ExprKind::Binary, "and", list(std::move(lhs), not_expr()));
    return lhs;
  }

  ExprPtr not_expr() {
    if (!accept_name("not")) return comparison();
    DepthGuard guard(depth_);
    return make_expr(ExprKind::Unary, "not", list(not_expr()));
  }

  static bool is_comparison(const Token& t) {
    return t.kind == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                 t.text == "<=" || t.text == ">" || t.text == ">=");
  }

  // Python chains: a < b <= c means a < b and b <= c.
  ExprPtr comparison() {
    ExprPtr first = additive();
    if (!is_comparison(peek())) return first;
    std::vector<ExprPtr> operands = list(std::move(first));
    std::vector<std::string> ops;
    while (is_comparison(peek())) {
      ops.push_back(next().text);
      operands.push_back(additive());
    }
    ExprPtr e = make_expr(ExprKind::Compare, {}, std::move(operands));
    e->comparisons = std::move(ops);
    return e;
  }

  ExprPtr additive() {
    ExprPtr lhs = multiplicative();
    while (peek().kind == Tok::Op && (peek().text == "+" || peek().text == "-")) {
      std::string op = next().text;
      lhs = make_expr(ExprKind::Binary, std::move(op), list(std::move(lhs), multiplicative()));
    }
    return lhs;
  }

  ExprPtr multiplicative() {
    ExprPtr lhs = unary(true);
    for (;;) {
      const Token& t = peek();
      if (t.kind != Tok::Op) return lhs;
      if (t.text == "/") throw TagProblem("'/' gives a float; use '//' for integer division");
      if (t.text == "**") throw TagProblem("'**' is not supported");
      if (t.text != "*" && t.text != "//" && t.text != "%") return lhs;
      std::string op = next().text;
      lhs = make_expr(ExprKind::Binary, std::move(op), list(std::move(lhs), unary(true)));
    }
  }

  ExprPtr unary(bool with_filters) {
    ExprPtr e;
    if (peek().kind == Tok::Op && (peek().text == "-" || peek().text == "+")) {
      DepthGuard guard(depth_);
      std::string op = next().text;
      e = make_expr(ExprKind::Unary, std::move(op), list(unary(false)));
    } else {
      e = primary();
    }
    return with_filters ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token t = next();
    if (t.kind == Tok::Int) return make_literal(t.value);
    if (t.kind == Tok::Str) return make_literal(t.text);
    if (t.kind == Tok::Op && t.text == "(") {
      DepthGuard guard(depth_);
      ExprPtr inner = expression();
      expect_op(")");
      return inner;
    }
    if (t.kind != Tok::Name || is_keyword(t.text)) throw TagProblem("unexpected " + describe(t));
    if (t.text == "true" || t.text == "True") return make_literal(true);
    if (t.text == "false" || t.text == "False") return make_literal(false);
    if (peek().kind == Tok::Op && peek().text == "(") {
      if (t.text == "range") throw TagProblem("range() is only supported in a for loop");
      throw TagProblem("unknown function '" + t.text + "'");
    }
    return make_expr(ExprKind::Variable, t.text, {});
  }

  // `| default(value[, boolean])` (alias `d`); the only filter the specs use.
  ExprPtr filters(ExprPtr e) {
    while (accept_op("|")) {
      const std::string name = expect_identifier("a filter name");
      if (name != "default" && name != "d") throw TagProblem("unknown filter '" + name + "'");
      expect_op("(");
      std::vector<ExprPtr> args = list(std::move(e), expression());
      if (accept_op(",")) args.push_back(expression());
      expect_op(")");
      e = make_expr(ExprKind::Default, name, std::move(args));
    }
    return e;
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------- scopes and evaluation

class Scopes {
 public:
  explicit Scopes(const JinjaVariables& base) : base_(base), frames_(1) {}

  const JinjaValue* find(std::string_view name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (auto found = it->find(name); found != it->end()) return &found->second;
    }
    auto found = base_.find(name);
    return found == base_.end() ? nullptr : &found->second;
  }
  void set(const std::string& name, JinjaValue value) { frames_.back()[name] = std::move(value); }
  void push() { frames_.emplace_back(); }
  void pop() { frames_.pop_back(); }

 private:
  const JinjaVariables& base_;
  std::vector<JinjaVariables> frames_;
};

JinjaValue eval(const Expr& e, const Scopes& scopes);

JinjaValue eval_unary(const Expr& e, const Scopes& scopes) {
  const JinjaValue v = eval(*e.children[0], scopes);
  if (e.op == "not") return !truthy(v);
  const std::int64_t x = to_int(v, e.op);
  if (e.op == "+") return x;
  std::int64_t r;
  if (__builtin_sub_overflow(std::int64_t{0}, x, &r)) throw TagProblem("integer overflow");
  return r;
}

// `and`/`or` short-circuit and return an operand, as in Python.
JinjaValue eval_binary(const Expr& e, const Scopes& scopes) {
  JinjaValue lhs = eval(*e.children[0], scopes);
  if (e.op == "and") return truthy(lhs) ? eval(*e.children[1], scopes) : lhs;
  if (e.op == "or") return truthy(lhs) ? lhs : eval(*e.children[1], scopes);
  return arithmetic(e.op, lhs, eval(*e.children[1], scopes));
}

JinjaValue eval_compare(const Expr& e, const Scopes& scopes) {
  JinjaValue lhs = eval(*e.children[0], scopes);
  for (std::size_t i = 0; i < e.comparisons.size(); ++i) {
    JinjaValue rhs = eval(*e.children[i + 1], scopes);
    if (!compare(e.comparisons[i], lhs, rhs)) return false;
    lhs = std::move(rhs);
  }
  return true;
}

// Only a plain undefined variable falls back, as with Jinja2's Undefined.
JinjaValue eval_default(const Expr& e, const Scopes& scopes) {
  const Expr& operand = *e.children[0];
  const bool undefined = operand.kind == ExprKind::Variable && scopes.find(operand.op) == nullptr;
  if (undefined) return eval(*e.children[1], scopes);
  JinjaValue v = eval(operand, scopes);
  const bool falsy_counts = e.children.size() > 2 && truthy(eval(*e.children[2], scopes));
  return falsy_counts && !truthy(v) ? eval(*e.children[1], scopes) : v;
}

JinjaValue eval(const Expr& e, const Scopes& scopes) {
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Variable:
      if (const JinjaValue* v = scopes.find(e.op)) return *v;
      throw TagProblem("undefined variable '" + e.op + "'");
    case ExprKind::Unary: return eval_unary(e, scopes);
    case ExprKind::Binary: return eval_binary(e, scopes);
    case ExprKind::Compare: return eval_compare(e, scopes);
    case ExprKind::Default: return eval_default(e, scopes);
  }
  return {};
}

// ---------------------------------------------------------------- template lexing

enum class PieceKind { Text, Output, Statement };

// Text: [begin, end) of the source. Tags: [begin, end) is the inside without the
// delimiters and whitespace-control marks; `tag` is the offset of the opening `{`.
struct Piece {
  PieceKind kind;
  std::size_t begin, end, tag;
};

class LineTable {
 public:
  explicit LineTable(std::string_view source) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < source.size(); ++i)
      if (source[i] == '\n') starts_.push_back(i + 1);
  }
  int line_of(std::size_t offset) const {
    return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin());
  }
  int column_of(std::size_t offset) const {
    return static_cast<int>(offset - starts_[line_of(offset) - 1]) + 1;
  }

 private:
  std::vector<std::size_t> starts_;
};

// Jinja2 turns \r\n and \r into \n and drops one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
    } else {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class TemplateLexer {
 public:
  TemplateLexer(const std::string& source, const LineTable& lines, const std::string& filename)
      : src_(source), lines_(lines), filename_(filename) {}

  std::vector<Piece> run() {
    std::size_t pos = 0;
    while (pos < src_.size()) {
      const std::size_t open = find_open(pos);
      push_text(pos, open);
      if (open == src_.size()) break;
      pos = tag(open);
    }
    return std::move(pieces_);
  }

 private:
  std::size_t find_open(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  void push_text(std::size_t begin, std::size_t end) {
    if (begin < end) pieces_.push_back({PieceKind::Text, begin, end, begin});
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw SpecError({filename_, lines_.line_of(offset), lines_.column_of(offset)}, message);
  }

  // Finds `closer` outside string literals, so `{{ '}}' }}` works.
  std::size_t find_close(std::size_t from, std::string_view closer, bool quotes, std::size_t open) const {
    for (std::size_t i = from; i < src_.size(); ++i) {
      if (src_.compare(i, closer.size(), closer) == 0) return i;
      if (quotes && (src_[i] == '\'' || src_[i] == '"')) {
        const char quote = src_[i];
        for (++i; i < src_.size() && src_[i] != quote; ++i)
          if (src_[i] == '\\') ++i;
        if (i >= src_.size()) fail(open, "unterminated string literal in tag");
      }
    }
    fail(open, "'" + src_.substr(open, 2) + "' is not closed by '" + std::string(closer) + "'");
  }

  // Lexes the tag at `open`; returns the offset after it.
  std::size_t tag(std::size_t open) {
    const char kind = src_[open + 1];
    const std::string closer = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    std::size_t begin = open + 2;
    const bool strip_before = begin < src_.size() && src_[begin] == '-';
    if (strip_before || (kind == '%' && begin < src_.size() && src_[begin] == '+')) ++begin;
    const std::size_t close = find_close(begin, closer, kind != '#', open);
    std::size_t end = close;
    const bool strip_after = end > begin && src_[end - 1] == '-';
    if (strip_after || (kind == '%' && end > begin && src_[end - 1] == '+')) --end;
    if (strip_before) rstrip_previous_text();
    if (kind != '#')
      pieces_.push_back({kind == '{' ? PieceKind::Output : PieceKind::Statement, begin, end, open});
    std::size_t after = close + 2;
    while (strip_after && after < src_.size() && is_space(src_[after])) ++after;
    return after;
  }

  void rstrip_previous_text() {
    if (pieces_.empty() || pieces_.back().kind != PieceKind::Text) return;
    Piece& text = pieces_.back();
    while (text.end > text.begin && is_space(src_[text.end - 1])) --text.end;
    if (text.begin == text.end) pieces_.pop_back();
  }

  const std::string& src_;
  const LineTable& lines_;
  const std::string& filename_;
  std::vector<Piece> pieces_;
};

// ---------------------------------------------------------------- template tree

struct Node;
using Body = std::vector<Node>;

struct TextNode {
  std::size_t begin, end;
};
struct OutputNode {
  ExprPtr expr;
};
struct ForNode {
  std::string variable;
  std::vector<ExprPtr> range_args;
  Body body, else_body;
};
struct IfNode {
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::size_t> branch_tags;  // where each condition is, for its errors
  Body else_body;
};
struct SetNode {
  std::string name;
  ExprPtr value;
};

struct Node {
  std::size_t tag;  // source offset, for error locations
  std::variant<TextNode, OutputNode, ForNode, IfNode, SetNode> content;
};

class TemplateParser {
 public:
  TemplateParser(const std::string& source, std::vector<Piece> pieces, const LineTable& lines,
                 const std::string& filename)
      : src_(source), pieces_(std::move(pieces)), lines_(lines), filename_(filename) {}

  Body run() {
    Body body;
    parse_body(body, {}, 0);  // with no stops, a stray end tag is an error inside
    return body;
  }

 private:
  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw SpecError({filename_, lines_.line_of(offset), lines_.column_of(offset)}, message);
  }

  // Runs `f`, blaming its TagProblem on the tag at `tag`.
  template <class F>
  void at_tag(std::size_t tag, F&& f) const {
    try {
      f();
    } catch (const TagProblem& problem) {
      fail(tag, problem.what());
    }
  }

  // The terminating tag (`{% endfor %}`, `{% else %}`...) must have nothing after its keyword.
  void expect_stop_end() const {
    at_tag(pieces_[index_ - 1].tag, [this] { stop_tokens_->expect_end(); });
  }

  std::string_view inside(const Piece& p) const { return std::string_view(src_).substr(p.begin, p.end - p.begin); }

  // Appends nodes until a statement whose keyword is in `stops`; returns that keyword
  // ("" at the end of the template) and leaves its tokens in `stop_tokens_`.
  std::string parse_body(Body& out, std::initializer_list<std::string_view> stops, int depth) {
    while (index_ < pieces_.size()) {
      const Piece& piece = pieces_[index_++];
      try {
        if (piece.kind == PieceKind::Text) {
          out.push_back({piece.tag, TextNode{piece.begin, piece.end}});
        } else if (piece.kind == PieceKind::Output) {
          out.push_back({piece.tag, OutputNode{parse_output(piece)}});
        } else if (auto stop = statement(piece, out, stops, depth)) {
          return *stop;
        }
      } catch (const TagProblem& problem) {
        fail(piece.tag, problem.what());
      }
    }
    return {};
  }

  ExprPtr parse_output(const Piece& piece) {
    ExprParser parser(inside(piece));
    if (parser.at_end()) throw TagProblem("empty expression");
    ExprPtr e = parser.expression();
    parser.expect_end();
    return e;
  }

  std::optional<std::string> statement(const Piece& piece, Body& out,
                                       std::initializer_list<std::string_view> stops, int depth) {
    auto tokens = std::make_unique<ExprParser>(inside(piece));
    ExprParser& parser = *tokens;
    if (parser.peek().kind != Tok::Name) throw TagProblem("expected a statement name");
    const std::string keyword = parser.next().text;
    if (std::find(stops.begin(), stops.end(), keyword) != stops.end()) {
      stop_tokens_ = std::move(tokens);  // the enclosing block reads the rest (an elif's condition)
      return keyword;
    }
    if (depth >= kMaxNesting && (keyword == "for" || keyword == "if"))
      throw TagProblem("blocks nested too deeply");
    if (keyword == "for") out.push_back({piece.tag, parse_for(parser, piece, depth + 1)});
    else if (keyword == "if") out.push_back({piece.tag, parse_if(parser, piece, depth + 1)});
    else if (keyword == "set") out.push_back({piece.tag, parse_set(parser)});
    else if (keyword == "endfor" || keyword == "endif" || keyword == "elif" || keyword == "else")
      throw TagProblem("unexpected '{% " + keyword + " %}'");
    else
      throw TagProblem("unknown statement '" + keyword + "'");
    return std::nullopt;
  }

  // for NAME in range(a[, b[, step]])
  ForNode parse_for(ExprParser& parser, const Piece& piece, int depth) {
    ForNode node;
    node.variable = parser.expect_identifier("a loop variable");
    if (!parser.accept_name("in")) throw TagProblem("expected 'in' after the loop variable");
    if (!parser.accept_name("range")) throw TagProblem("only 'for ... in range(...)' loops are supported");
    parser.expect_op("(");
    do node.range_args.push_back(parser.expression());
    while (node.range_args.size() < 4 && parser.accept_op(","));
    parser.expect_op(")");
    parser.expect_end();
    if (node.range_args.size() > 3) throw TagProblem("range() takes 1 to 3 arguments");
    std::string stop = parse_body(node.body, {"endfor", "else"}, depth);
    if (stop == "else") {
      expect_stop_end();
      stop = parse_body(node.else_body, {"endfor"}, depth);
    }
    if (stop.empty()) fail(piece.tag, "'{% for %}' is not closed by '{% endfor %}'");
    expect_stop_end();
    return node;
  }

  IfNode parse_if(ExprParser& parser, const Piece& piece, int depth) {
    IfNode node;
    std::size_t branch_tag = piece.tag;
    std::unique_ptr<ExprParser> elif;  // the tokens of the current `{% elif %}`
    ExprParser* condition = &parser;
    for (;;) {
      ExprPtr e;
      at_tag(branch_tag, [&] {
        e = condition->expression();
        condition->expect_end();
      });
      node.branches.emplace_back(std::move(e), Body{});
      node.branch_tags.push_back(branch_tag);
      std::string stop = parse_body(node.branches.back().second, {"elif", "else", "endif"}, depth);
      branch_tag = pieces_[index_ - 1].tag;
      if (stop == "else") {
        expect_stop_end();
        stop = parse_body(node.else_body, {"endif"}, depth);
      }
      if (stop.empty()) fail(piece.tag, "'{% if %}' is not closed by '{% endif %}'");
      if (stop == "endif") {
        expect_stop_end();
        return node;
      }
      elif = std::move(stop_tokens_);
      condition = elif.get();
    }
  }

  SetNode parse_set(ExprParser& parser) {
    SetNode node;
    node.name = parser.expect_identifier("a variable name");
    if (!parser.accept_op("=")) throw TagProblem("expected '=' in '{% set %}' (block set is not supported)");
    node.value = parser.expression();
    parser.expect_end();
    return node;
  }

  const std::string& src_;
  std::vector<Piece> pieces_;
  const LineTable& lines_;
  const std::string& filename_;
  std::size_t index_ = 0;
  std::unique_ptr<ExprParser> stop_tokens_;
};

// ---------------------------------------------------------------- rendering

class Renderer {
 public:
  Renderer(const std::string& source, const LineTable& lines, const JinjaVariables& variables,
           const std::string& filename, std::int64_t max_iterations)
      : src_(source), lines_(lines), scopes_(variables), filename_(filename), max_iterations_(max_iterations) {}

  RenderedTemplate run(const Body& body) {
    render(body);
    // The line after a final newline maps to where the template continues.
    if (at_line_start_) result_.source_line.push_back(next_line_);
    return std::move(result_);
  }

 private:
  void render(const Body& body) {
    for (const Node& node : body) {
      try {
        std::visit([&](const auto& content) { render_node(content, node.tag); }, node.content);
      } catch (const TagProblem& problem) {
        throw SpecError({filename_, lines_.line_of(node.tag), lines_.column_of(node.tag)}, problem.what());
      }
    }
  }

  // Appends text; `line` is the template line of its first character, advancing at
  // each newline when the text is template text (not a value).
  void emit(std::string_view text, int line, bool advance) {
    if (result_.text.size() + text.size() > kMaxOutput) throw TagProblem("the rendered file is larger than 8 MiB");
    for (char c : text) {
      if (at_line_start_) result_.source_line.push_back(line);
      at_line_start_ = false;
      result_.text += c;
      if (c == '\n') {
        at_line_start_ = true;
        if (advance) ++line;
      }
    }
    next_line_ = line;
  }

  void render_node(const TextNode& node, std::size_t) {
    emit(std::string_view(src_).substr(node.begin, node.end - node.begin), lines_.line_of(node.begin), true);
  }

  void render_node(const OutputNode& node, std::size_t tag) {
    emit(to_text(eval(*node.expr, scopes_)), lines_.line_of(tag), false);
  }

  void render_node(const SetNode& node, std::size_t) { scopes_.set(node.name, eval(*node.value, scopes_)); }

  void render_node(const IfNode& node, std::size_t) {
    for (std::size_t i = 0; i < node.branches.size(); ++i) {
      bool taken;
      try {
        taken = truthy(eval(*node.branches[i].first, scopes_));
      } catch (const TagProblem& problem) {  // an elif's error belongs to the elif's tag
        const std::size_t tag = node.branch_tags[i];
        throw SpecError({filename_, lines_.line_of(tag), lines_.column_of(tag)}, problem.what());
      }
      if (taken) return render(node.branches[i].second);
    }
    render(node.else_body);
  }

  void render_node(const ForNode& node, std::size_t) {
    std::int64_t args[3] = {0, 0, 1};
    const std::size_t n = node.range_args.size();
    for (std::size_t i = 0; i < n; ++i) args[n == 1 ? 1 : i] = to_int(eval(*node.range_args[i], scopes_), "range");
    const auto [start, stop, step] = args;
    if (step == 0) throw TagProblem("range() step must not be zero");
    const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
    const __int128 count = span <= 0 ? 0 : (span - 1) / (step > 0 ? __int128{step} : -__int128{step}) + 1;
    if (count > max_iterations_ - iterations_)
      throw TagProblem("more than " + std::to_string(max_iterations_) + " loop iterations in total");
    iterations_ += static_cast<std::int64_t>(count);
    if (count == 0) return render(node.else_body);
    for (__int128 k = 0; k < count; ++k) {
      scopes_.push();  // each iteration gets its own scope, as in Jinja2
      scopes_.set(node.variable, static_cast<std::int64_t>(start + k * step));
      render(node.body);
      scopes_.pop();
    }
  }

  const std::string& src_;
  const LineTable& lines_;
  Scopes scopes_;
  const std::string& filename_;
  std::int64_t max_iterations_;
  std::int64_t iterations_ = 0;
  RenderedTemplate result_;
  bool at_line_start_ = true;
  int next_line_ = 1;
};

}  // namespace

JinjaValue jinja_value_from_text(std::string_view text) {
  const std::size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  const bool numeric = text.size() > digits &&
                       std::all_of(text.begin() + static_cast<std::ptrdiff_t>(digits), text.end(), is_digit);
  if (numeric) {
    std::int64_t value = 0;
    const bool negative = text[0] == '-';
    bool fits = true;
    for (std::size_t i = digits; i < text.size() && fits; ++i) {
      // Accumulate toward the sign so INT64_MIN fits.
      const int d = text[i] - '0';
      fits = !__builtin_mul_overflow(value, 10, &value) &&
             !(negative ? __builtin_sub_overflow(value, d, &value) : __builtin_add_overflow(value, d, &value));
    }
    if (fits) return value;
  }
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return true;
  if (lower == "false") return false;
  return std::string(text);
}

int RenderedTemplate::source_line_of(int output_line_1based) const {
  if (source_line.empty()) return 1;
  const int last = static_cast<int>(source_line.size());
  return source_line[static_cast<std::size_t>(std::clamp(output_line_1based, 1, last) - 1)];
}

RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename, std::int64_t max_iterations) {
  const std::string src = normalize_newlines(source);
  const LineTable lines(src);
  std::vector<Piece> pieces = TemplateLexer(src, lines, filename).run();
  const Body body = TemplateParser(src, std::move(pieces), lines, filename).run();
  return Renderer(src, lines, variables, filename, max_iterations).run(body);
}

}  // namespace looptrace
