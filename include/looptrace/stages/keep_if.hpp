// Keeps the accesses a predicate accepts: `... | keep_if(pred)`, pred(const
// AccessRecord&) -> bool. Timesteps keep their numbers, and the stream goes on past
// batches where nothing is kept. For whole traces, filter_traces() is cheaper: it
// tells the projections not to compute what it drops.
#pragma once

#include <utility>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <AccessSource Up, class Pred>
class KeepIf : public BatchStage<KeepIf<Up, Pred>, Up> {
 public:
  KeepIf(Up up, Pred pred) : BatchStage<KeepIf<Up, Pred>, Up>(std::move(up)), pred_(std::move(pred)) {}

  AccessBatch process(const AccessBatch& batch) {
    buffer_.clear();
    for (const AccessRecord& r : batch)
      if (pred_(r)) buffer_.push_back(r);
    return {buffer_, batch.deduplicated};
  }

 private:
  Pred pred_;
  std::vector<AccessRecord> buffer_;
};

template <class Pred>
FunctionAdaptor<KeepIf, Pred> keep_if(Pred pred) {
  return {{}, std::move(pred)};
}

}  // namespace looptrace
