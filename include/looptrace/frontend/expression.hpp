// Integer affine expressions and constraints, as they appear in projections
// (`p + r`, `2*m - 1`) and in iteration_space_shape (`0 <= p + r < 28 and 0 <= r < 3`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"

namespace looptrace {

// constant + sum(coefficient * variable); terms keep the order in which variables first
// appear in the text, with no zero coefficients and no variable twice.
struct AffineExpr {
  std::vector<std::pair<std::string, std::int64_t>> terms;
  std::int64_t constant = 0;

  bool is_constant() const { return terms.empty(); }
  std::int64_t coefficient(std::string_view variable) const;  // 0 when absent
  std::string str() const;                                     // "p + r - 1"
  friend bool operator==(const AffineExpr&, const AffineExpr&) = default;
};

// Parses integer affine arithmetic: identifiers, integer literals, + - *, unary minus,
// parentheses; `*` needs a constant on one side and `//` a constant divisor that
// divides every coefficient. Throws ExpressionError (with the offending column) for
// anything else, e.g. `m * n` ("not affine").
AffineExpr parse_affine(std::string_view text);

// Parses a constraint: chained comparisons (<, <=, >, >=, ==) of affine expressions,
// joined by `and`. Returns one expression per inequality, each meaning `expr >= 0`
// (strict comparisons become non-strict by 1; `==` gives two).
std::vector<AffineExpr> parse_constraint(std::string_view text);

}  // namespace looptrace
