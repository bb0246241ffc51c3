#include "looptrace/stages/filter.hpp"

#include <algorithm>

#include "looptrace/support/error.hpp"

namespace looptrace {

TraceFilter TraceFilter::from_names(const Schedule& s, const std::vector<std::string>& tensors,
                                    const std::vector<std::string>& einsums) {
  for (const auto& t : tensors)
    if (s.find_tensor(t) < 0) {
      std::string known;
      for (const auto& x : s.tensors) known += (known.empty() ? "" : ", ") + x.name;
      throw SpecError("--tensors names '" + t + "', which no traced Einsum accesses (tensors: " +
                      known + ")");
    }
  for (const auto& e : einsums)
    if (s.find_einsum(e) < 0) {
      std::string known;
      for (const auto& x : s.einsums) known += (known.empty() ? "" : ", ") + x;
      throw SpecError("--einsums names '" + e + "', which the workload does not define (Einsums: " +
                      known + ")");
    }
  auto keeps = [](const std::vector<std::string>& list, const std::string& name) {
    return list.empty() || std::find(list.begin(), list.end(), name) != list.end();
  };
  TraceFilter f;
  for (const auto& t : s.traces) f.trace_enabled.push_back(keeps(tensors, t.tensor) && keeps(einsums, t.einsum));
  for (const auto& l : s.leaves) f.leaf_enabled.push_back(keeps(einsums, l.einsum));
  return f;
}

}  // namespace looptrace
