// Lint of a mapping against its workload: mistakes that still trace, as warnings.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "front_end.hpp"

namespace looptrace::front_end {

namespace {

// Mistakes that still trace, said as warnings: a loop's tile_shape larger than its rank
// in every Einsum below it, a Storage node holding a tensor that no Einsum below it
// accesses, Einsums of the workload that no Compute node maps.
class MappingLint {
 public:
  explicit MappingLint(Spec& spec) : spec_(spec) {
    for (const Einsum& e : spec.workload.einsums) {
      try {
        boxes_.emplace(e.name, einsum_box(spec.workload, e));
      } catch (const SpecError&) {  // the compiler reports it, with its location
      }
    }
  }

  void run() {
    std::set<std::string> mapped = einsums_of(spec_.mapping.root);
    std::vector<std::string> unmapped;
    for (const Einsum& e : spec_.workload.einsums)
      if (!mapped.count(e.name)) unmapped.push_back("'" + e.name + "'");
    if (!unmapped.empty() && !mapped.empty())
      warn(spec_, spec_.mapping.root.where,
           "the mapping leaves Einsum" + std::string(unmapped.size() > 1 ? "s " : " ") + join(unmapped) +
               " of the workload unmapped (no !Compute names " +
               (unmapped.size() > 1 ? "them): they are" : "it): it is") + " not traced");
  }

 private:
  // The Einsums computed at or below `node`, warning of what its chain holds.
  std::set<std::string> einsums_of(const MappingNode& node) {
    if (node.kind == NodeKind::Compute) return {node.einsum};
    std::set<std::string> all;
    if (node.kind != NodeKind::Nested) {  // a split: each child is a branch
      for (const MappingNode& c : node.children) merge(all, einsums_of(c));
      return all;
    }
    // A chain: each node is the parent of the ones after it.
    std::vector<std::set<std::string>> below(node.children.size() + 1);
    for (std::size_t i = node.children.size(); i-- > 0;) {
      below[i] = below[i + 1];
      merge(below[i], einsums_of(node.children[i]));
    }
    for (std::size_t i = 0; i < node.children.size(); ++i) check(node.children[i], below[i + 1]);
    return below.front();
  }
  static void merge(std::set<std::string>& into, const std::set<std::string>& from) { into.insert(from.begin(), from.end()); }

  void check(const MappingNode& node, const std::set<std::string>& below) {
    if (below.empty()) return;
    if (node.kind == NodeKind::Storage)
      for (const std::string& t : node.tensors) {
        const bool accessed = std::any_of(below.begin(), below.end(), [&](const std::string& e) {
          const Einsum* einsum = spec_.workload.find_einsum(e);
          return einsum && std::any_of(einsum->accesses.begin(), einsum->accesses.end(),
                                       [&](const TensorAccess& a) { return a.tensor == t; });
        });
        const bool in_workload = std::any_of(spec_.workload.einsums.begin(), spec_.workload.einsums.end(),
                                             [&](const Einsum& e) {
          return std::any_of(e.accesses.begin(), e.accesses.end(), [&](const TensorAccess& a) { return a.tensor == t; });
        });
        if (!accessed && in_workload)  // (one no Einsum accesses at all is an error elsewhere)
          warn(spec_, node.where, "!Storage holds tensor '" + t + "', which no Einsum below it accesses (" +
                                      quoted(below) + ")");
      }
    if (node.is_loop() && node.tile_shape > 0) {
      std::int64_t widest = 0;
      for (const std::string& e : below)
        if (auto box = boxes_.find(e); box != boxes_.end())
          for (std::size_t v = 0; v < box->second.variables.size(); ++v)
            if (box->second.variables[v] == node.rank_variable) widest = std::max(widest, box->second.extent[v]);
      if (widest > 0 && node.tile_shape > widest)
        warn(spec_, node.where, "tile_shape " + std::to_string(node.tile_shape) + " of the !" + node.tag +
                                    " loop over '" + node.rank_variable + "' is larger than its rank (" +
                                    node.rank_variable + " < " + std::to_string(widest) + " below it): one tile");
    }
  }
  static std::string quoted(const std::set<std::string>& names) {
    std::vector<std::string> q;
    for (const auto& n : names) q.push_back("'" + n + "'");
    return join(q);
  }

  Spec& spec_;
  std::map<std::string, EinsumBox> boxes_;
};

}  // namespace

void lint_mapping(Spec& spec) {
  MappingLint(spec).run();
}

}  // namespace looptrace::front_end
