// libFuzzer target: the concise Einsum parser ("Z[m, n] = A[m, k] * B[k, n]").
// Any input may be rejected with ExpressionError (at a column within the text);
// nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/concise_einsum.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const looptrace::ConciseEinsum einsum = looptrace::parse_concise_einsum(text);
    // One output, named as the Einsum: last, or where the tensor was first read (as
    // AccelForge keys accesses by tensor name).
    std::size_t outputs = 0;
    for (const auto& a : einsum.accesses) {
      if (a.ranks.size() != a.projection.size() || a.tensor.empty()) __builtin_trap();
      if (a.is_output) ++outputs;
      if (a.is_output != (a.tensor == einsum.name)) __builtin_trap();
    }
    if (outputs != 1) __builtin_trap();
  } catch (const looptrace::ExpressionError& e) {
    if (e.column() > text.size()) __builtin_trap();
  }
  return 0;
}
