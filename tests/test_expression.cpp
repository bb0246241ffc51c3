#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/expression.hpp"

using looptrace::AffineExpr;
using looptrace::ExpressionError;
using looptrace::parse_affine;
using looptrace::parse_constraint;
using looptrace::SourceLocation;
using looptrace::SpecError;

namespace {

// The column and message of the ExpressionError that parsing `text` throws.
struct Failure {
  std::size_t column = SIZE_MAX;
  std::string message;
};

template <class Parse>
Failure failure_of(Parse parse, const std::string& text) {
  try {
    parse(text);
  } catch (const ExpressionError& e) {
    return {e.column(), e.what()};
  }
  FAIL("no error for: " << text);
  return {};
}

Failure affine_failure(const std::string& text) {
  return failure_of([](const std::string& t) { parse_affine(t); }, text);
}

Failure constraint_failure(const std::string& text) {
  return failure_of([](const std::string& t) { parse_constraint(t); }, text);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("SourceLocation::str omits the unknown parts") {
  CHECK(SourceLocation{"a.yaml", 3, 7}.str() == "a.yaml:3:7");
  CHECK(SourceLocation{"a.yaml", 3, 0}.str() == "a.yaml:3");
  CHECK(SourceLocation{"a.yaml", 0, 0}.str() == "a.yaml");
  CHECK(SourceLocation{"a.yaml", 0, 5}.str() == "a.yaml");  // a column needs its line
  CHECK(SourceLocation{"", 4, 2}.str() == "4:2");
  CHECK(SourceLocation{}.str() == "");
}

TEST_CASE("SpecError prefixes its location") {
  const SpecError located({"w.yaml", 2, 5}, "bad rank");
  CHECK(std::string(located.what()) == "w.yaml:2:5: bad rank");
  CHECK(located.message() == "bad rank");
  CHECK(located.where().line == 2);
  const SpecError bare("no spec given");
  CHECK(std::string(bare.what()) == "no spec given");
  CHECK(bare.where().file.empty());
}

TEST_CASE("parse_affine: sums of variables") {
  const AffineExpr e = parse_affine("p + r");
  REQUIRE(e.terms.size() == 2);
  CHECK(e.terms[0] == std::pair<std::string, std::int64_t>{"p", 1});
  CHECK(e.terms[1] == std::pair<std::string, std::int64_t>{"r", 1});
  CHECK(e.constant == 0);
  CHECK_FALSE(e.is_constant());
  CHECK(e.str() == "p + r");
  CHECK(e.coefficient("p") == 1);
  CHECK(e.coefficient("q") == 0);
}

TEST_CASE("parse_affine: products with constants and parentheses") {
  const AffineExpr e = parse_affine("2*(m+1) - 3");
  CHECK(e.terms == decltype(e.terms){{"m", 2}});
  CHECK(e.constant == -1);
  CHECK(e.str() == "2*m - 1");

  CHECK(parse_affine("m*3").coefficient("m") == 3);
  CHECK(parse_affine("-2*(a - 3*b)").str() == "-2*a + 6*b");
  CHECK(parse_affine("(6*m + 3) // 3").str() == "2*m + 1");
  // floor((2m + 1) / 2) is m for every integer m.
  CHECK(parse_affine("(2*m + 1) // 2").str() == "m");
  CHECK(parse_affine("(4*m - 1) // 2").str() == "2*m - 1");
}

TEST_CASE("parse_affine: unary minus and str()") {
  const AffineExpr e = parse_affine("-n");
  CHECK(e.terms == decltype(e.terms){{"n", -1}});
  CHECK(e.constant == 0);
  CHECK(e.str() == "-n");
  CHECK(parse_affine("3 - n").str() == "-n + 3");
  CHECK(parse_affine("- -n").str() == "n");
  CHECK(parse_affine("p + r - 1").str() == "p + r - 1");
  CHECK(parse_affine("2*m").str() == "2*m");
  CHECK(parse_affine("x - 2*y").str() == "x - 2*y");
  CHECK(parse_affine("-3*x - 4").str() == "-3*x - 4");
}

TEST_CASE("parse_affine: constant folding") {
  const AffineExpr e = parse_affine("2*3 + 4//3 - (1 - 5)");  // 6 + 1 + 4
  CHECK(e.is_constant());
  CHECK(e.constant == 11);
  CHECK(e.str() == "11");
  CHECK(parse_affine("7 // -2").constant == -4);  // floor, not truncation
  CHECK(parse_affine("-7 // 2").constant == -4);
  CHECK(parse_affine("0").str() == "0");
  CHECK(parse_affine("-5").str() == "-5");
}

TEST_CASE("parse_affine: like terms merge, zero terms vanish, order is first appearance") {
  const AffineExpr e = parse_affine("r + p + r");
  CHECK(e.terms == decltype(e.terms){{"r", 2}, {"p", 1}});
  const AffineExpr zero = parse_affine("m - m + 2");
  CHECK(zero.is_constant());
  CHECK(zero.str() == "2");
  CHECK(parse_affine("m - m").str() == "0");
  CHECK(parse_affine("_x1 + B_2").str() == "_x1 + B_2");
}

TEST_CASE("parse_affine: non-affine input names the operator's column") {
  Failure f = affine_failure("m * n");
  CHECK(f.column == 2);
  CHECK(contains(f.message, "not affine"));
  f = affine_failure("2 * (m * n)");
  CHECK(f.column == 7);
  CHECK(contains(f.message, "not affine"));
  f = affine_failure("(m+1)*(n)");
  CHECK(f.column == 5);
  CHECK(contains(f.message, "not affine"));
  f = affine_failure("6 // m");
  CHECK(f.column == 2);
  CHECK(contains(f.message, "not affine"));
  f = affine_failure("(3*m) // 2");  // 3 is not a multiple of 2
  CHECK(f.column == 6);
  CHECK(contains(f.message, "not affine"));
}

TEST_CASE("parse_affine: syntax errors carry their column") {
  CHECK(affine_failure("m + $").column == 4);
  CHECK(affine_failure("m / 2").column == 2);
  CHECK(affine_failure("m n").column == 2);
  CHECK(affine_failure("m +").column == 3);
  CHECK(affine_failure("m + 1)").column == 5);
  CHECK(contains(affine_failure("m + 1)").message, "unbalanced"));
  const Failure open = affine_failure("x + (m + 1");
  CHECK(open.column == 4);  // the unclosed '('
  CHECK(contains(open.message, "unbalanced"));
  const Failure empty = affine_failure("");
  CHECK(empty.column == 0);
  CHECK(contains(empty.message, "empty"));
  CHECK(contains(affine_failure("   ").message, "empty"));
  CHECK(affine_failure("1 / 0").column == 2);
  CHECK(contains(affine_failure("m // 0").message, "division by zero"));
  CHECK(affine_failure("m < 3").column == 2);  // a comparison is not an affine expression
}

TEST_CASE("parse_affine: integer overflow is an error, not wraparound") {
  CHECK(parse_affine("9223372036854775807").constant == INT64_MAX);
  Failure f = affine_failure("99999999999999999999");
  CHECK(f.column == 0);
  CHECK(contains(f.message, "integer overflow"));
  f = affine_failure("9223372036854775807 + 1");
  CHECK(f.column == 20);
  CHECK(contains(f.message, "integer overflow"));
  f = affine_failure("4611686018427387904 * 2");
  CHECK(f.column == 20);
  CHECK(contains(f.message, "integer overflow"));
  CHECK(contains(affine_failure("4611686018427387904 * (m + m)").message, "integer overflow"));
  // -2^63 is refused too: str() could not write it back in a sum ("m - 9223372036854775808"
  // overflows when read), a round trip fuzz_expression checks.
  CHECK(contains(affine_failure("-4611686018427387904 * 2").message, "integer overflow"));
  CHECK(contains(affine_failure("-4611686018427387904 * 2*m").message, "integer overflow"));
  CHECK(contains(affine_failure("m - 4611686018427387904 - 4611686018427387904").message, "integer overflow"));
  CHECK(parse_affine("m - 9223372036854775807").str() == "m - 9223372036854775807");
  CHECK(contains(affine_failure("-(-4611686018427387904 * 2)").message, "integer overflow"));
}

TEST_CASE("parse_affine: deep nesting is bounded, long chains are fine") {
  const std::string nested50 = std::string(50, '(') + "m" + std::string(50, ')');
  CHECK(parse_affine(nested50).str() == "m");
  const std::string nested200 = std::string(200, '(') + "m" + std::string(200, ')');
  CHECK(contains(affine_failure(nested200).message, "nested too deeply"));
  const std::string nested_deep = std::string(100000, '(');
  CHECK(contains(affine_failure(nested_deep).message, "nested too deeply"));

  std::string chain = "0";
  for (int i = 0; i < 10000; ++i) chain += " + 1";
  CHECK(parse_affine(chain).constant == 10000);
  CHECK(parse_affine(std::string(10001, '-') + "m").str() == "-m");
}

TEST_CASE("parse_constraint: chains and `and`") {
  const auto c = parse_constraint("0 <= p + r < 28 and 0 <= r < 3");
  REQUIRE(c.size() == 4);
  CHECK(c[0].str() == "p + r");        // p + r - 0 >= 0
  CHECK(c[1].str() == "-p - r + 27");  // 28 - (p + r) - 1 >= 0
  CHECK(c[2].str() == "r");
  CHECK(c[3].str() == "-r + 2");
  CHECK(c[1].coefficient("p") == -1);
  CHECK(c[1].constant == 27);
}

TEST_CASE("parse_constraint: each operator") {
  auto one = [](const char* text) {
    const auto c = parse_constraint(text);
    REQUIRE(c.size() == 1);
    return c[0].str();
  };
  CHECK(one("m < n") == "-m + n - 1");  // variables in text order
  CHECK(one("m <= n") == "-m + n");
  CHECK(one("a > b") == "a - b - 1");
  CHECK(one("a >= 2*b") == "a - 2*b");
  CHECK(one("3 > m") == "-m + 2");
  CHECK(one("0 <= m") == "m");

  const auto eq = parse_constraint("m == 4");
  REQUIRE(eq.size() == 2);
  CHECK(eq[0].str() == "m - 4");
  CHECK(eq[1].str() == "-m + 4");

  const auto chain = parse_constraint("0 <= m < n <= 8");
  REQUIRE(chain.size() == 3);
  CHECK(chain[0].str() == "m");
  CHECK(chain[1].str() == "-m + n - 1");
  CHECK(chain[2].str() == "-n + 8");
}

TEST_CASE("parse_constraint: errors") {
  Failure f = constraint_failure("m");
  CHECK(f.column == 1);
  CHECK(contains(f.message, "comparison"));
  f = constraint_failure("0 <= m and m");
  CHECK(f.column == 12);
  CHECK(contains(f.message, "comparison"));
  CHECK(constraint_failure("0 <= m < 4 and").column == 14);
  CHECK(constraint_failure("0 <= m = 4").column == 7);
  CHECK(constraint_failure("0 <= m != 4").column == 7);
  f = constraint_failure("0 <= m * n < 4");
  CHECK(f.column == 7);
  CHECK(contains(f.message, "not affine"));
  CHECK(constraint_failure("0 <= m < 4 4").column == 11);
  CHECK(contains(constraint_failure("").message, "empty"));
  CHECK(contains(constraint_failure("0 <= m < 9223372036854775807 + 1").message, "integer overflow"));
  // -(-2^63) - 1 does not fit: the subtraction itself is checked.
  CHECK(contains(constraint_failure("m < -4611686018427387904 * 2").message, "integer overflow"));
}
