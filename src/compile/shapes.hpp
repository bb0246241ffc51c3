// Nominal tensor shapes (SEMANTICS "Accesses"), for the compiler (compile_workload): along
// each rank, the image of the writers' boxes intersected (the readers' if no Einsum
// writes the tensor), from 0 to the image's top. Internal (not installed).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/workload.hpp"

namespace looptrace::shapes {

using Wide = __int128;

// The top coordinate `expr` reaches over `box`; false when it overflows 128 bits.
inline bool top_of(const AffineExpr& expr, const EinsumBox& box, Wide& hi) {
  hi = expr.constant;
  for (const auto& [var, coef] : expr.terms) {
    if (coef <= 0) continue;
    const auto v = std::size_t(std::find(box.variables.begin(), box.variables.end(), var) - box.variables.begin());
    if (__builtin_add_overflow(hi, Wide(coef) * (box.extent[v] - 1), &hi)) return false;
  }
  return true;
}

inline bool written(const Workload& w, const std::string& tensor) {
  for (const auto& e : w.einsums)
    for (const auto& a : e.accesses)
      if (a.tensor == tensor && a.is_output) return true;
  return false;
}

// Per rank (of `ranks`), the top of the nominal image; box_of(einsum) gives an
// Einsum's box. Throws SpecError when a projection overflows 128 bits.
template <class BoxOf>
std::vector<Wide> nominal_tops(const Workload& w, const std::string& tensor, std::size_t ranks, BoxOf box_of) {
  const bool any_writer = written(w, tensor);
  std::vector<Wide> top(ranks, std::numeric_limits<Wide>::max());
  for (const auto& e : w.einsums)
    for (const auto& a : e.accesses) {
      if (a.tensor != tensor || (any_writer && !a.is_output)) continue;
      const EinsumBox& box = box_of(e);
      for (std::size_t r = 0; r < a.projection.size() && r < top.size(); ++r) {
        Wide hi;
        if (!top_of(a.projection[r], box, hi))
          throw SpecError(a.where, "the projection of tensor '" + tensor + "' along rank '" + a.ranks[r] + "' (" +
                                       a.projection[r].str() + ") overflows 128-bit arithmetic in Einsum '" +
                                       e.name + "'");
        top[r] = std::min(top[r], hi);
      }
    }
  return top;
}

}  // namespace looptrace::shapes
