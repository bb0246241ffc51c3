#include <cstdint>
#include "looptrace/frontend/expression.hpp"

#include <cctype>
#include <cstdio>

namespace looptrace {

namespace {

// Deep enough for any real projection, shallow enough that hostile input cannot
// exhaust the stack.
constexpr int kMaxDepth = 100;

enum class Tok { Int, Ident, Plus, Minus, Star, SlashSlash, LParen, RParen, Lt, Le, Gt, Ge, EqEq, End };

struct Token {
  Tok kind;
  std::size_t col;
  std::string_view text;
  std::int64_t value = 0;
};

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string describe_char(char c) {
  if (std::isprint(static_cast<unsigned char>(c))) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::size_t col) {
  std::int64_t r;
  // -2^63 has no positive counterpart: str() could not write it back as "- 2^63".
  if (__builtin_add_overflow(a, b, &r) || r == INT64_MIN) throw ExpressionError(col, "integer overflow");
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::size_t col) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r == INT64_MIN) throw ExpressionError(col, "integer overflow");
  return r;
}

Token lex_number(std::string_view text, std::size_t& i) {
  const std::size_t start = i;
  std::int64_t value = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    value = checked_add(checked_mul(value, 10, start), text[i] - '0', start);
  }
  return {Tok::Int, start, text.substr(start, i - start), value};
}

// Two-character operators first, so `<=` is not read as `<` then `=`.
Token lex_operator(std::string_view text, std::size_t i) {
  const char c = text[i];
  const char d = i + 1 < text.size() ? text[i + 1] : '\0';
  auto tok = [&](Tok kind, std::size_t len) { return Token{kind, i, text.substr(i, len)}; };
  if (c == '/' && d == '/') return tok(Tok::SlashSlash, 2);
  if (c == '<' && d == '=') return tok(Tok::Le, 2);
  if (c == '>' && d == '=') return tok(Tok::Ge, 2);
  if (c == '=' && d == '=') return tok(Tok::EqEq, 2);
  switch (c) {
    case '+': return tok(Tok::Plus, 1);
    case '-': return tok(Tok::Minus, 1);
    case '*': return tok(Tok::Star, 1);
    case '(': return tok(Tok::LParen, 1);
    case ')': return tok(Tok::RParen, 1);
    case '<': return tok(Tok::Lt, 1);
    case '>': return tok(Tok::Gt, 1);
    default: break;
  }
  if (c == '/') throw ExpressionError(i, "unexpected '/': only floor division '//' is affine");
  if (c == '=') throw ExpressionError(i, "unexpected '=': use '==' for equality");
  throw ExpressionError(i, "unexpected character " + describe_char(c));
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (is_digit(c)) {
      tokens.push_back(lex_number(text, i));
    } else if (is_ident_start(c)) {
      const std::size_t start = i;
      while (i < text.size() && is_ident_char(text[i])) ++i;
      tokens.push_back({Tok::Ident, start, text.substr(start, i - start)});
    } else {
      tokens.push_back(lex_operator(text, i));
      i += tokens.back().text.size();
    }
  }
  tokens.push_back({Tok::End, text.size(), {}});
  return tokens;
}

bool has_variables(const AffineExpr& e) {
  for (const auto& [name, coefficient] : e.terms)
    if (coefficient != 0) return true;
  return false;
}

// acc += factor * rhs. New variables go after acc's, which keeps text order when
// rhs comes from further right.
void add_scaled(AffineExpr& acc, const AffineExpr& rhs, std::int64_t factor, std::size_t col) {
  for (const auto& [name, coefficient] : rhs.terms) {
    const std::int64_t delta = checked_mul(coefficient, factor, col);
    auto it = acc.terms.begin();
    while (it != acc.terms.end() && it->first != name) ++it;
    if (it == acc.terms.end()) {
      acc.terms.emplace_back(name, delta);
    } else {
      it->second = checked_add(it->second, delta, col);
    }
  }
  acc.constant = checked_add(acc.constant, checked_mul(rhs.constant, factor, col), col);
}

AffineExpr scaled(const AffineExpr& e, std::int64_t factor, std::size_t col) {
  AffineExpr out;
  add_scaled(out, e, factor, col);
  return out;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b, std::size_t col) {
  if (a == INT64_MIN && b == -1) throw ExpressionError(col, "integer overflow");
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// floor((k*x + c) / k) == x + floor(c / k) for integer x, so only the coefficients
// need to be multiples of the divisor.
AffineExpr divided(const AffineExpr& e, std::int64_t divisor, std::size_t col) {
  if (divisor == 0) throw ExpressionError(col, "division by zero");
  AffineExpr out;
  for (const auto& [name, coefficient] : e.terms) {
    if (coefficient % divisor != 0)
      throw ExpressionError(col, "not affine: the coefficient of " + name +
                                     " is not a multiple of " + std::to_string(divisor));
    out.terms.emplace_back(name, floor_div(coefficient, divisor, col));
  }
  out.constant = floor_div(e.constant, divisor, col);
  return out;
}

AffineExpr normalized(AffineExpr e) {
  std::erase_if(e.terms, [](const auto& term) { return term.second == 0; });
  return e;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(tokenize(text)) {}

  const Token& peek() const { return tokens_[pos_]; }
  Token next() { return tokens_[pos_ == tokens_.size() - 1 ? pos_ : pos_++]; }

  bool accept_keyword(std::string_view word) {
    if (peek().kind != Tok::Ident || peek().text != word) return false;
    ++pos_;
    return true;
  }

  void expect_end() const {
    const Token& t = peek();
    if (t.kind == Tok::End) return;
    if (t.kind == Tok::RParen) throw ExpressionError(t.col, "unbalanced ')'");
    throw ExpressionError(t.col, "unexpected '" + std::string(t.text) + "'");
  }

  // sum := product (('+' | '-') product)*
  AffineExpr sum() {
    AffineExpr acc = product();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token op = next();
      add_scaled(acc, product(), op.kind == Tok::Plus ? 1 : -1, op.col);
    }
    return acc;
  }

 private:
  // product := unary (('*' | '//') unary)*
  AffineExpr product() {
    AffineExpr acc = unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::SlashSlash) {
      const Token op = next();
      const AffineExpr rhs = unary();
      if (has_variables(rhs)) {
        if (op.kind == Tok::SlashSlash)
          throw ExpressionError(op.col, "not affine: the divisor of '//' must be a constant");
        if (has_variables(acc))
          throw ExpressionError(op.col, "not affine: both operands of '*' contain variables");
        acc = scaled(rhs, acc.constant, op.col);
      } else {
        acc = op.kind == Tok::Star ? scaled(acc, rhs.constant, op.col)
                                   : divided(acc, rhs.constant, op.col);
      }
    }
    return acc;
  }

  // unary := ('-' | '+')* primary; a loop, so long sign chains cost no stack.
  AffineExpr unary() {
    bool negate = false;
    std::size_t col = peek().col;
    while (peek().kind == Tok::Minus || peek().kind == Tok::Plus) {
      if (next().kind == Tok::Minus) negate = !negate;
    }
    AffineExpr e = primary();
    return negate ? scaled(e, -1, col) : e;
  }

  AffineExpr primary() {
    const Token t = next();
    switch (t.kind) {
      case Tok::Int: return AffineExpr{{}, t.value};
      case Tok::Ident:
        if (t.text == "and") throw ExpressionError(t.col, "expected an operand before 'and'");
        return AffineExpr{{{std::string(t.text), 1}}, 0};
      case Tok::LParen: return parenthesized(t);
      case Tok::End:
        throw ExpressionError(t.col, tokens_.size() == 1
                                         ? "empty expression"
                                         : "expected an operand at the end of the expression");
      default: throw ExpressionError(t.col, "unexpected '" + std::string(t.text) + "'");
    }
  }

  AffineExpr parenthesized(const Token& open) {
    if (++depth_ > kMaxDepth) throw ExpressionError(open.col, "expression nested too deeply");
    AffineExpr inner = sum();
    const Token close = next();
    if (close.kind == Tok::End) throw ExpressionError(open.col, "unbalanced '(': missing ')'");
    if (close.kind != Tok::RParen)
      throw ExpressionError(close.col, "expected ')' but found '" + std::string(close.text) + "'");
    --depth_;
    return inner;
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

bool is_comparison(Tok kind) {
  return kind == Tok::Lt || kind == Tok::Le || kind == Tok::Gt || kind == Tok::Ge || kind == Tok::EqEq;
}

// lhs_sign*lhs + rhs_sign*rhs + constant with lhs's variables first (text order).
AffineExpr combine(const AffineExpr& lhs, std::int64_t lhs_sign, const AffineExpr& rhs,
                   std::int64_t rhs_sign, std::int64_t constant, std::size_t col) {
  AffineExpr out;
  add_scaled(out, lhs, lhs_sign, col);
  add_scaled(out, rhs, rhs_sign, col);
  out.constant = checked_add(out.constant, constant, col);
  return normalized(std::move(out));
}

// Each comparison as `expr >= 0`; over the integers `a < b` is `b - a - 1 >= 0`.
void add_inequalities(const AffineExpr& a, const Token& op, const AffineExpr& b,
                      std::vector<AffineExpr>& out) {
  switch (op.kind) {
    case Tok::Lt: out.push_back(combine(a, -1, b, 1, -1, op.col)); break;
    case Tok::Le: out.push_back(combine(a, -1, b, 1, 0, op.col)); break;
    case Tok::Gt: out.push_back(combine(a, 1, b, -1, -1, op.col)); break;
    case Tok::Ge: out.push_back(combine(a, 1, b, -1, 0, op.col)); break;
    default:
      out.push_back(combine(a, 1, b, -1, 0, op.col));
      out.push_back(combine(a, -1, b, 1, 0, op.col));
      break;
  }
}

// clause := sum (comparison sum)+ ; a chain compares each adjacent pair.
void parse_clause(Parser& parser, std::vector<AffineExpr>& out) {
  AffineExpr lhs = parser.sum();
  int comparisons = 0;
  while (is_comparison(parser.peek().kind)) {
    const Token op = parser.next();
    AffineExpr rhs = parser.sum();
    add_inequalities(lhs, op, rhs, out);
    lhs = std::move(rhs);
    ++comparisons;
  }
  if (comparisons == 0)
    throw ExpressionError(parser.peek().col, "expected a comparison (<, <=, >, >=, ==)");
}

void append_magnitude(std::string& out, std::int64_t value) {
  // Unsigned, so the magnitude of INT64_MIN is representable.
  const std::uint64_t magnitude =
      value < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  out += std::to_string(magnitude);
}

}  // namespace

std::int64_t AffineExpr::coefficient(std::string_view variable) const {
  for (const auto& [name, value] : terms)
    if (name == variable) return value;
  return 0;
}

std::string AffineExpr::str() const {
  std::string out;
  for (const auto& [name, value] : terms) {
    if (out.empty()) {
      if (value < 0) out += '-';
    } else {
      out += value < 0 ? " - " : " + ";
    }
    if (value != 1 && value != -1) {
      append_magnitude(out, value);
      out += '*';
    }
    out += name;
  }
  if (out.empty()) return std::to_string(constant);
  if (constant != 0) {
    out += constant < 0 ? " - " : " + ";
    append_magnitude(out, constant);
  }
  return out;
}

AffineExpr parse_affine(std::string_view text) {
  Parser parser(text);
  AffineExpr e = parser.sum();
  parser.expect_end();
  return normalized(std::move(e));
}

std::vector<AffineExpr> parse_constraint(std::string_view text) {
  Parser parser(text);
  std::vector<AffineExpr> out;
  do {
    parse_clause(parser, out);
  } while (parser.accept_keyword("and"));
  parser.expect_end();
  return out;
}

}  // namespace looptrace
