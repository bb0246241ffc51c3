// The concise Einsum form: "Z[nz] = Y[ny] * C[ny, nz]" or "K[b, M: p, h] = ...".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "looptrace/frontend/expression.hpp"

namespace looptrace {

struct ConciseAccess {
  std::string tensor;
  std::vector<std::string> ranks;       // `m` gives rank "M"; `M: p` gives "M"
  std::vector<AffineExpr> projection;   // one per rank
  bool is_output = false;
};

struct ConciseEinsum {
  std::string name;                     // the output tensor's name
  // One per tensor, in order of first appearance on the right, the output last unless
  // it appears there too (where AccelForge's _parse_einsum_entry puts it).
  std::vector<ConciseAccess> accesses;
  // Reads AccelForge's parser drops, said as warnings: the output named on the right
  // too (read as the output only), a tensor named twice with other indices (the last
  // wins).
  std::vector<std::string> notes;
};

// Throws ExpressionError with the column of the offending character. The right-hand
// side is tensor references joined by `*`, `+`, `-` or `/` (each is read; constant
// factors are not allowed); a tensor named twice is read once, as AccelForge reads it.
ConciseEinsum parse_concise_einsum(std::string_view text);

}  // namespace looptrace
