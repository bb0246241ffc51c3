// Dedup within a timestep. Within one (leaf, tensor) the same element at the
// same timestep is one access (SEMANTICS "Accesses"): records of one timestep and
// trace are sorted by element and equal ones merged, their multiplicities summed.
// Batches a projection already emits deduplicated (separable projections) pass
// through untouched, so the stage costs nothing where it has nothing to do.
// It belongs before merge_by_time(): after it, two leaves of one Einsum that compute
// at the same timestep would be merged too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

// Merges equal (trace, element) records of each timestep of `records` (in time order):
// sorted by trace in order of first appearance, then element, multiplicities summed
// (saturating). Returns how many records are left at its front; `order` is scratch.
std::size_t merge_equal_accesses(std::span<AccessRecord> records, std::vector<std::uint32_t>& order);

template <AccessSource Up>
class Dedup : public BatchStage<Dedup<Up>, Up> {
 public:
  // Per (timestep, trace): dropping a trace or skipping time upstream changes nothing here.
  static constexpr bool passes_trace_masks = true, passes_seeks = true;
  Dedup() = default;
  // `ones`: the merged records' multiplicities set to 1 (runs of one element, as
  // project(..., runs) takes them).
  explicit Dedup(Up up, bool ones = false) : BatchStage<Dedup<Up>, Up>(std::move(up)), ones_(ones) {}

  AccessBatch process(const AccessBatch& b) {
    if (b.deduplicated) return b;
    buffer_.assign(b.begin(), b.end());
    buffer_.resize(merge_equal_accesses(buffer_, order_));
    if (ones_)
      for (AccessRecord& r : buffer_) r.multiplicity = 1;
    return {buffer_, true};
  }

 private:
  bool ones_ = false;
  std::vector<AccessRecord> buffer_;
  std::vector<std::uint32_t> order_;
};

struct DedupAdaptor : StageAdaptor {
  bool ones = false;
  template <AccessSource Up>
  Dedup<Up> operator()(Up up) const {
    return Dedup<Up>(std::move(up), ones);
  }
  template <AccessSource Up>
  LeafSet<Dedup<Up>> operator()(LeafSet<Up> set) const {
    return map_leaves(std::move(set), *this);
  }
};

// `... | dedup()`: one access per element, timestep and (leaf, tensor).
inline DedupAdaptor dedup() { return {}; }
// The same, each merged record's multiplicity then 1: a run of one element.
inline DedupAdaptor dedup_runs() {
  DedupAdaptor a;
  a.ones = true;
  return a;
}

}  // namespace looptrace
