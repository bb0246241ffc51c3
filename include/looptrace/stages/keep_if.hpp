// Keeps the values a predicate accepts: `... | keep_if(pred)`, over a stream of any
// batches: pred(const AccessRecord&) over accesses (and over the accesses of tile
// steps, whose window events always pass), pred(const TransferRequest&) over
// transfers, and so on. Timesteps keep their numbers, and the stream goes on past
// batches where nothing is kept. For whole traces, filter_traces() is cheaper: it
// tells the projections not to compute what it drops.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <Source Up, class Pred>
class KeepIf : public BatchStage<KeepIf<Up, Pred>, Up> {
 public:
  using Batch = BatchOf<Up>;
  using Traits = BatchTraits<Batch>;
  using Value = typename Traits::value_type;
  KeepIf(Up up, Pred pred) : BatchStage<KeepIf<Up, Pred>, Up>(std::move(up)), pred_(std::move(pred)) {}

  Batch process(const Batch& batch) {
    buffer_.clear();
    for (const Value& v : Traits::values(batch))
      if (pred_(v)) buffer_.push_back(v);
    return Traits::rebuilt(batch, std::span<const Value>(buffer_), true);
  }
  Pred& function() { return pred_; }
  const Pred& function() const { return pred_; }

 private:
  Pred pred_;
  std::vector<Value> buffer_;
};

template <class Pred>
FunctionAdaptor<KeepIf, Pred> keep_if(Pred pred) {
  return {{}, std::move(pred)};
}

}  // namespace looptrace
