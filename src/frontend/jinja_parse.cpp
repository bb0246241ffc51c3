// Jinja expressions: tokens and trees (the grammar of jinja2/parser.py).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

namespace {

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's string escapes; an unknown escape keeps its backslash, as Python does.
std::string lex_string(std::string_view s, std::size_t& i) {
  const char quote = s[i++];
  std::string out;
  for (; i < s.size() && s[i] != quote; ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;  // a line continuation
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::uint32_t cp = 0;
        std::size_t k = 0;
        for (; k < n && i + 1 + k < s.size() && hex_digit(s[i + 1 + k]) >= 0; ++k)
          cp = cp * 16 + static_cast<std::uint32_t>(hex_digit(s[i + 1 + k]));
        if (k < n || cp > 0x10FFFF) throw JinjaError(std::string("bad \\") + e + " escape in a string literal");
        append_utf8(out, cp);
        i += n;
        break;
      }
      default: out += '\\'; out += e;
    }
  }
  if (i >= s.size()) throw JinjaError("unterminated string literal");
  ++i;
  return out;
}

// An integer (with `_` separators, 0x/0o/0b prefixes) or a float (`1.5`, `2e3`).
Token lex_number(std::string_view s, std::size_t& i) {
  Token t{Tok::Int, {}, 0, 0, i};
  auto digits = [&](auto valid) {
    std::string out;
    while (i < s.size() && (valid(s[i]) || (s[i] == '_' && i + 1 < s.size() && valid(s[i + 1])))) {
      if (s[i] != '_') out += s[i];
      ++i;
    }
    return out;
  };
  if (s[i] == '0' && i + 1 < s.size() && std::strchr("xXoObB", s[i + 1])) {
    const char base_char = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1])));
    const int base = base_char == 'x' ? 16 : base_char == 'o' ? 8 : 2;
    i += 2;
    if (i < s.size() && s[i] == '_') ++i;
    std::string d = digits([base](char c) { return hex_digit(c) >= 0 && hex_digit(c) < base; });
    if (d.empty()) throw JinjaError("invalid integer literal");
    for (char c : d)
      if (__builtin_mul_overflow(t.int_value, base, &t.int_value) ||
          __builtin_add_overflow(t.int_value, hex_digit(c), &t.int_value))
        throw JinjaError("integer literal too large");
    return t;
  }
  std::string text = digits(is_digit);
  bool is_float = false;
  if (i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1])) {
    ++i;
    text += "." + digits(is_digit);
    is_float = true;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      text += 'e';
      if (s[i + 1] == '-') text += '-';
      i = j;
      text += digits(is_digit);
      is_float = true;
    }
  }
  if (is_float) {
    t.kind = Tok::Float;
    t.float_value = std::strtod(text.c_str(), nullptr);
    return t;
  }
  for (char c : text)
    if (__builtin_mul_overflow(t.int_value, 10, &t.int_value) ||
        __builtin_add_overflow(t.int_value, c - '0', &t.int_value))
      throw JinjaError("integer literal too large");
  return t;
}

std::string lex_operator(std::string_view s, std::size_t i) {
  static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
  for (std::string_view op : kTwo)
    if (s.substr(i, 2) == op) return std::string(op);
  static constexpr std::string_view kOne = "+-*/%~<>()[]{}.,:|=;";
  if (kOne.find(s[i]) != std::string_view::npos) return std::string(1, s[i]);
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x20 || c >= 0x7f) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    throw JinjaError(std::string("unexpected byte ") + buf);
  }
  throw JinjaError(std::string("unexpected character '") + s[i] + "'");
}

bool is_keyword(std::string_view name) {
  return name == "and" || name == "or" || name == "not" || name == "in" || name == "if" ||
         name == "else" || name == "is";
}

}  // namespace

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
    } else if (is_digit(c)) {
      // After a '.', digits are an index (`x.0.1` is x[0][1]), never a float.
      const bool after_dot = !out.empty() && out.back().kind == Tok::Op && out.back().text == ".";
      if (after_dot) {
        const std::size_t start = i;
        Token t{Tok::Int, {}, 0, 0, start};
        while (i < s.size() && is_digit(s[i]))
          if (__builtin_mul_overflow(t.int_value, 10, &t.int_value) ||
              __builtin_add_overflow(t.int_value, s[i++] - '0', &t.int_value))
            throw JinjaError("integer literal too large");
        out.push_back(t);
      } else {
        out.push_back(lex_number(s, i));
      }
    } else if (c == '\'' || c == '"') {
      const std::size_t start = i;
      std::string text = lex_string(s, i);
      // Adjacent string literals join, as in Python.
      if (!out.empty() && out.back().kind == Tok::Str) out.back().text += text;
      else out.push_back({Tok::Str, std::move(text), 0, 0, start});
    } else if (is_ident_start(c)) {
      const std::size_t start = i;
      while (i < s.size() && is_ident_char(s[i])) ++i;
      out.push_back({Tok::Name, std::string(s.substr(start, i - start)), 0, 0, start});
    } else {
      Token t{Tok::Op, lex_operator(s, i), 0, 0, i};
      i += t.text.size();
      out.push_back(std::move(t));
    }
  }
  out.push_back({Tok::End, {}, 0, 0, s.size()});
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Int: return std::to_string(t.int_value);
    case Tok::Float: return JinjaValue(t.float_value).str();
    case Tok::Str: return "string " + JinjaValue(t.text).repr();
    case Tok::End: return "end of tag";
    default: return "'" + t.text + "'";
  }
}

ExprPtr make_expr(ExprKind kind, std::size_t offset, std::string name, std::vector<ExprPtr> children) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  e->name = std::move(name);
  for (const auto& child : children)
    if (child) e->depth = std::max(e->depth, child->depth + 1);
  // Long operator chains build deep trees; evaluation recurses over them.
  if (e->depth > kMaxExprDepth) throw JinjaError("expression too long");
  e->children = std::move(children);
  return e;
}

namespace {

ExprPtr literal(JinjaValue v, std::size_t offset) {
  auto e = make_expr(ExprKind::Literal, offset);
  e->value = std::move(v);
  return e;
}

template <class... Children>
std::vector<ExprPtr> list_of(Children&&... children) {
  std::vector<ExprPtr> out;
  (out.push_back(std::move(children)), ...);
  return out;
}

// Keeps the depth of a node whose children were added after it was made.
void update_depth(Expr& e) {
  for (const auto& c : e.children)
    if (c) e.depth = std::max(e.depth, c->depth + 1);
  for (const auto& [k, c] : e.kwargs) e.depth = std::max(e.depth, c->depth + 1);
  if (e.depth > kMaxExprDepth) throw JinjaError("expression too long");
}

struct DepthGuard {
  explicit DepthGuard(int& depth) : depth_(depth) {
    if (++depth_ > kMaxNesting) throw JinjaError("expression nested too deeply");
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

}  // namespace

const Token& ExprParser::peek(std::size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}
Token ExprParser::next() { return pos_ + 1 < tokens_.size() ? tokens_[pos_++] : tokens_[pos_]; }
bool ExprParser::at_name(std::string_view name) const { return peek().kind == Tok::Name && peek().text == name; }
bool ExprParser::at_op(std::string_view op) const { return peek().kind == Tok::Op && peek().text == op; }
bool ExprParser::accept_op(std::string_view op) {
  if (!at_op(op)) return false;
  ++pos_;
  return true;
}
bool ExprParser::accept_name(std::string_view name) {
  if (!at_name(name)) return false;
  ++pos_;
  return true;
}
void ExprParser::expect_op(std::string_view op) {
  if (!accept_op(op)) throw JinjaError("expected '" + std::string(op) + "' but found " + describe(peek()));
}
std::string ExprParser::expect_identifier(std::string_view what) {
  if (peek().kind != Tok::Name || is_keyword(peek().text))
    throw JinjaError("expected " + std::string(what) + " but found " + describe(peek()));
  return next().text;
}
void ExprParser::expect_end() const {
  if (!at_end()) throw JinjaError("unexpected " + describe(peek()));
}

ExprPtr ExprParser::expression(bool with_condexpr) { return with_condexpr ? condexpr() : or_expr(); }

ExprPtr ExprParser::tuple(bool with_condexpr, std::initializer_list<std::string_view> stop_names) {
  const std::size_t offset = peek().offset;
  auto ends = [&] {
    if (at_end() || at_op(")") || at_op("]") || at_op("}")) return true;
    for (std::string_view n : stop_names)
      if (at_name(n)) return true;
    return false;
  };
  std::vector<ExprPtr> items;
  bool comma = false;
  for (;;) {
    if (!items.empty()) {
      if (!accept_op(",")) break;
      comma = true;
      if (ends()) break;  // a trailing comma
    }
    if (ends() && items.empty()) throw JinjaError("expected an expression but found " + describe(peek()));
    items.push_back(expression(with_condexpr));
  }
  if (!comma && items.size() == 1) return std::move(items[0]);
  return make_expr(ExprKind::Tuple, offset, {}, std::move(items));
}

std::vector<std::string> ExprParser::targets(std::string_view before) {
  std::vector<std::string> names;
  const bool paren = accept_op("(");
  do {
    if (paren && at_op(")")) break;
    names.push_back(expect_identifier("a variable name"));
  } while (accept_op(",") && !at_name(before) && !at_op("="));
  if (paren) expect_op(")");
  return names;
}

ExprPtr ExprParser::condexpr() {
  ExprPtr e = or_expr();
  while (at_name("if")) {
    const std::size_t offset = next().offset;
    ExprPtr condition = or_expr();
    ExprPtr otherwise = accept_name("else") ? condexpr() : nullptr;
    e = make_expr(ExprKind::Cond, offset, {}, list_of(std::move(e), std::move(condition), std::move(otherwise)));
  }
  return e;
}

ExprPtr ExprParser::or_expr() {
  ExprPtr e = and_expr();
  while (at_name("or")) {
    const std::size_t offset = next().offset;
    e = make_expr(ExprKind::Or, offset, "or", list_of(std::move(e), and_expr()));
  }
  return e;
}

ExprPtr ExprParser::and_expr() {
  ExprPtr e = not_expr();
  while (at_name("and")) {
    const std::size_t offset = next().offset;
    e = make_expr(ExprKind::And, offset, "and", list_of(std::move(e), not_expr()));
  }
  return e;
}

ExprPtr ExprParser::not_expr() {
  if (!at_name("not")) return compare();
  const std::size_t offset = next().offset;
  DepthGuard guard(depth_);
  return make_expr(ExprKind::Not, offset, "not", list_of(not_expr()));
}

ExprPtr ExprParser::compare() {
  const std::size_t offset = peek().offset;
  ExprPtr first = math1();
  std::vector<ExprPtr> operands;
  std::vector<CompareOp> ops;
  for (;;) {
    const Token& t = peek();
    std::string op;
    if (t.kind == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                              t.text == ">" || t.text == ">=")) {
      op = next().text;
    } else if (at_name("in")) {
      next();
      op = "in";
    } else if (at_name("not") && peek(1).kind == Tok::Name && peek(1).text == "in") {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    if (operands.empty()) operands.push_back(std::move(first));
    ops.push_back(compare_op_of(op));
    operands.push_back(math1());
  }
  if (operands.empty()) return first;
  ExprPtr e = make_expr(ExprKind::Compare, offset, {}, std::move(operands));
  e->ops = std::move(ops);
  return e;
}

ExprPtr ExprParser::math1() {
  ExprPtr e = concat();
  while (at_op("+") || at_op("-")) {
    const Token t = next();
    e = make_expr(ExprKind::Binary, t.offset, t.text, list_of(std::move(e), concat()));
    e->binary = binary_op_of(t.text);
  }
  return e;
}

ExprPtr ExprParser::concat() {
  ExprPtr e = math2();
  while (at_op("~")) {
    const Token t = next();
    e = make_expr(ExprKind::Binary, t.offset, "~", list_of(std::move(e), math2()));
    e->binary = BinaryOp::Concat;
  }
  return e;
}

ExprPtr ExprParser::math2() {
  ExprPtr e = power();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token t = next();
    e = make_expr(ExprKind::Binary, t.offset, t.text, list_of(std::move(e), power()));
    e->binary = binary_op_of(t.text);
  }
  return e;
}

// Jinja's ** is left-associative (2 ** 3 ** 2 == 64), unlike Python's.
ExprPtr ExprParser::power() {
  ExprPtr e = unary(true);
  while (at_op("**")) {
    const Token t = next();
    e = make_expr(ExprKind::Binary, t.offset, "**", list_of(std::move(e), unary(true)));
    e->binary = BinaryOp::Pow;
  }
  return e;
}

// `-x | f` is `(-x) | f`: a filter applies to the unary expression.
ExprPtr ExprParser::unary(bool with_filter) {
  ExprPtr e;
  if (at_op("-") || at_op("+")) {
    const Token t = next();
    DepthGuard guard(depth_);
    e = make_expr(ExprKind::Unary, t.offset, t.text, list_of(unary(false)));
    e->unary = unary_op_of(t.text);
  } else {
    e = postfix(primary());
  }
  return with_filter ? filter_expr(std::move(e)) : std::move(e);
}

ExprPtr ExprParser::primary() {
  const Token t = next();
  switch (t.kind) {
    case Tok::Int: return literal(t.int_value, t.offset);
    case Tok::Float: return literal(t.float_value, t.offset);
    case Tok::Str: return literal(t.text, t.offset);
    case Tok::End: throw JinjaError("unexpected end of tag");
    case Tok::Name:
      if (t.text == "true" || t.text == "True") return literal(true, t.offset);
      if (t.text == "false" || t.text == "False") return literal(false, t.offset);
      if (t.text == "none" || t.text == "None") return literal(JinjaValue(), t.offset);
      if (is_keyword(t.text)) throw JinjaError("unexpected '" + t.text + "'");
      return make_expr(ExprKind::Name, t.offset, t.text);
    case Tok::Op:
      if (t.text == "(") {
        DepthGuard guard(depth_);
        if (accept_op(")")) return make_expr(ExprKind::Tuple, t.offset);
        ExprPtr inner = tuple();
        expect_op(")");
        return inner;
      }
      if (t.text == "[") {
        DepthGuard guard(depth_);
        return list_literal(t.offset);
      }
      if (t.text == "{") {
        DepthGuard guard(depth_);
        return dict_literal(t.offset);
      }
      break;
    default: break;
  }
  throw JinjaError("unexpected " + describe(t));
}

ExprPtr ExprParser::list_literal(std::size_t offset) {
  std::vector<ExprPtr> items;
  while (!at_op("]")) {
    if (!items.empty()) {
      expect_op(",");
      if (at_op("]")) break;
    }
    items.push_back(expression());
  }
  expect_op("]");
  return make_expr(ExprKind::List, offset, {}, std::move(items));
}

ExprPtr ExprParser::dict_literal(std::size_t offset) {
  std::vector<ExprPtr> items;
  while (!at_op("}")) {
    if (!items.empty()) {
      expect_op(",");
      if (at_op("}")) break;
    }
    items.push_back(expression());
    expect_op(":");
    items.push_back(expression());
  }
  expect_op("}");
  return make_expr(ExprKind::Dict, offset, {}, std::move(items));
}

ExprPtr ExprParser::postfix(ExprPtr e) {
  for (;;) {
    if (at_op(".")) {
      const std::size_t offset = next().offset;
      if (peek().kind == Tok::Int) {  // `x.0` is x[0]
        const Token index = next();
        e = make_expr(ExprKind::GetItem, offset, {}, list_of(std::move(e), literal(index.int_value, index.offset)));
      } else {
        if (peek().kind != Tok::Name) throw JinjaError("expected an attribute name after '.' but found " + describe(peek()));
        e = make_expr(ExprKind::GetAttr, offset, next().text, list_of(std::move(e)));
      }
    } else if (at_op("[")) {
      const std::size_t offset = next().offset;
      DepthGuard guard(depth_);
      e = subscript(std::move(e), offset);
    } else if (at_op("(")) {
      const std::size_t offset = next().offset;
      DepthGuard guard(depth_);
      ExprPtr call = make_expr(ExprKind::Call, offset, {}, list_of(std::move(e)));
      call_args(*call);
      e = std::move(call);
    } else {
      return e;
    }
  }
}

ExprPtr ExprParser::subscript(ExprPtr e, std::size_t offset) {
  // [index] or [start:stop:step], any part of a slice omitted.
  std::vector<ExprPtr> parts;
  bool slice = false;
  parts.push_back(at_op(":") || at_op("]") ? nullptr : expression());
  while (parts.size() < 3 && accept_op(":")) {
    slice = true;
    parts.push_back(at_op(":") || at_op("]") ? nullptr : expression());
  }
  expect_op("]");
  if (!slice) {
    if (!parts[0]) throw JinjaError("an empty subscript '[]'");
    return make_expr(ExprKind::GetItem, offset, {}, list_of(std::move(e), std::move(parts[0])));
  }
  parts.resize(3);
  return make_expr(ExprKind::Slice, offset, {},
                   list_of(std::move(e), std::move(parts[0]), std::move(parts[1]), std::move(parts[2])));
}

// (a, b, key=value); the opening parenthesis is already read.
void ExprParser::call_args(Expr& call) {
  while (!at_op(")")) {
    if (call.children.size() > 1 || !call.kwargs.empty()) {
      expect_op(",");
      if (at_op(")")) break;
    }
    if (at_op("*") || at_op("**")) throw JinjaError("*args and **kwargs are not supported");
    if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), expression());
    } else {
      if (!call.kwargs.empty()) throw JinjaError("a positional argument follows a keyword argument");
      call.children.push_back(expression());
    }
  }
  expect_op(")");
  update_depth(call);
}

ExprPtr ExprParser::filter_expr(ExprPtr e) {
  for (;;) {
    if (at_op("|")) {
      const std::size_t offset = next().offset;
      std::string name = expect_identifier("a filter name");
      while (accept_op(".")) {
        name += '.';
        name += expect_identifier("a filter name");
      }
      ExprPtr f = make_expr(ExprKind::Filter, offset, std::move(name), list_of(std::move(e)));
      if (accept_op("(")) {
        DepthGuard guard(depth_);
        call_args(*f);
      }
      e = std::move(f);
    } else if (at_name("is")) {
      const std::size_t offset = next().offset;
      const bool negated = accept_name("not");
      std::string name;
      // `is none`, `is true`, `is in`: tests named by keywords and literals.
      if (peek().kind == Tok::Name) name = next().text;
      else throw JinjaError("expected a test name after 'is' but found " + describe(peek()));
      while (accept_op(".")) {
        name += '.';
        name += expect_identifier("a test name");
      }
      ExprPtr t = make_expr(ExprKind::Test, offset, std::move(name), list_of(std::move(e)));
      t->negated = negated;
      if (accept_op("(")) {
        DepthGuard guard(depth_);
        call_args(*t);
      } else {
        // `x is divisibleby 3`: one argument without parentheses.
        const Token& a = peek();
        const bool starts_primary = a.kind == Tok::Int || a.kind == Tok::Float || a.kind == Tok::Str ||
                                    (a.kind == Tok::Op && (a.text == "(" || a.text == "[" || a.text == "{")) ||
                                    (a.kind == Tok::Name && a.text != "else" && a.text != "or" &&
                                     a.text != "and" && a.text != "if" && a.text != "in" && a.text != "not");
        if (starts_primary) {
          if (at_name("is")) throw JinjaError("tests cannot be chained with 'is'");
          t->children.push_back(postfix(primary()));
          update_depth(*t);
        }
      }
      e = std::move(t);
    } else if (at_op("(")) {
      const std::size_t offset = next().offset;
      DepthGuard guard(depth_);
      ExprPtr call = make_expr(ExprKind::Call, offset, {}, list_of(std::move(e)));
      call_args(*call);
      e = std::move(call);
    } else {
      return e;
    }
  }
}

}  // namespace looptrace::jinja
