// Dedup within a timestep. Within one (leaf, tensor) the same element at the
// same timestep is one access (SEMANTICS "Accesses"): records of one timestep and
// trace are sorted by element and equal ones merged, their multiplicities summed.
// Batches a projection already emits deduplicated (separable projections) pass
// through untouched, so the stage costs nothing where it has nothing to do.
// It belongs before merge_by_time(): after it, two leaves of one Einsum that compute
// at the same timestep would be merged too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <AccessSource Up>
class Dedup : public BatchStage<Dedup<Up>, Up> {
 public:
  Dedup() = default;
  explicit Dedup(Up up) : BatchStage<Dedup<Up>, Up>(std::move(up)) {}

  AccessBatch process(const AccessBatch& b) {
    if (b.deduplicated) return b;
    buffer_.assign(b.begin(), b.end());
    std::size_t out = 0;
    for (std::size_t i = 0; i < buffer_.size();) {
      std::size_t j = i + 1;
      while (j < buffer_.size() && buffer_[j].timestep == buffer_[i].timestep) ++j;
      out = merge_timestep(i, j, out);
      i = j;
    }
    buffer_.resize(out);
    return {buffer_, true};
  }

 private:
  // Sorts the records [i, j) of one timestep by (trace in order of first appearance,
  // element), writes each distinct (trace, element) once at `out`, returns the new end.
  std::size_t merge_timestep(std::size_t i, std::size_t j, std::size_t out) {
    order_.clear();
    for (std::size_t k = i; k < j; ++k)
      if (std::find(order_.begin(), order_.end(), buffer_[k].trace) == order_.end())
        order_.push_back(buffer_[k].trace);
    auto rank = [&](std::uint32_t trace) {
      return std::find(order_.begin(), order_.end(), trace) - order_.begin();
    };
    std::sort(buffer_.begin() + std::ptrdiff_t(i), buffer_.begin() + std::ptrdiff_t(j),
              [&](const AccessRecord& a, const AccessRecord& b) {
                if (a.trace != b.trace) return rank(a.trace) < rank(b.trace);
                return a.element < b.element;
              });
    for (std::size_t k = i; k < j;) {
      AccessRecord r = buffer_[k++];
      std::uint64_t m = r.multiplicity;
      for (; k < j && buffer_[k].trace == r.trace && buffer_[k].element == r.element; ++k)
        m = std::min<std::uint64_t>(m + buffer_[k].multiplicity, 0xffffffffu);
      r.multiplicity = std::uint32_t(m);
      buffer_[out++] = r;
    }
    return out;
  }

  std::vector<AccessRecord> buffer_;
  std::vector<std::uint32_t> order_;
};

struct DedupAdaptor : StageAdaptor {
  template <AccessSource Up>
  Dedup<Up> operator()(Up up) const {
    return Dedup<Up>(std::move(up));
  }
  template <AccessSource Up>
  LeafSet<Dedup<Up>> operator()(LeafSet<Up> set) const {
    return map_leaves(std::move(set), *this);
  }
};

// `... | dedup()`: one access per element, timestep and (leaf, tensor).
inline DedupAdaptor dedup() { return {}; }

}  // namespace looptrace
