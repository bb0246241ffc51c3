// libFuzzer target: the affine expression and constraint parser.
// Any input may be rejected with ExpressionError (at a column within the text);
// nothing else may escape. An accepted expression prints back to an equal one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/expression.hpp"

namespace {

bool same(const looptrace::AffineExpr& a, const looptrace::AffineExpr& b) {
  if (a.constant != b.constant || a.terms.size() != b.terms.size()) return false;
  for (const auto& [name, c] : a.terms)
    if (b.coefficient(name) != c) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const looptrace::AffineExpr e = looptrace::parse_affine(text);
    // str() must print what parse_affine reads back to the same expression.
    if (!same(e, looptrace::parse_affine(e.str()))) __builtin_trap();
  } catch (const looptrace::ExpressionError& e) {
    if (e.column() > text.size()) __builtin_trap();
  }
  try {
    looptrace::parse_constraint(text);
  } catch (const looptrace::ExpressionError& e) {
    if (e.column() > text.size()) __builtin_trap();
  }
  return 0;
}
