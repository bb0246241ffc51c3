// The concise Einsum form: "Z[nz] = Y[ny] * C[ny, nz]" or "K[b, M: p, h] = ...".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "looptrace/spec/expression.hpp"

namespace looptrace {

struct ConciseAccess {
  std::string tensor;
  std::vector<std::string> ranks;       // `m` gives rank "M"; `M: p` gives "M"
  std::vector<AffineExpr> projection;   // one per rank
  bool is_output = false;
};

struct ConciseEinsum {
  std::string name;                     // the output tensor's name
  std::vector<ConciseAccess> accesses;  // inputs in order of appearance, output last
};

// Throws ExpressionError with the column of the offending character. The right-hand
// side is tensor references joined by `*`, `+`, `-` or `/` (each is read; constant
// factors are not allowed); a tensor named twice with the same indices is read once.
ConciseEinsum parse_concise_einsum(std::string_view text);

}  // namespace looptrace
