// Changes each value: `... | transform(fn)`, over a stream of any batches:
// fn(const AccessRecord&) -> AccessRecord over accesses (and the accesses of tile
// steps), fn(const TransferRequest&) -> TransferRequest over transfers, and so on. The
// result must stay in time order (fn may change the timestep only within it); access
// batches count as not deduplicated, since fn may map two elements to one.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <Source Up, class Fn>
class Transform : public BatchStage<Transform<Up, Fn>, Up> {
 public:
  using Batch = BatchOf<Up>;
  using Traits = BatchTraits<Batch>;
  using Value = typename Traits::value_type;
  Transform(Up up, Fn fn) : BatchStage<Transform<Up, Fn>, Up>(std::move(up)), fn_(std::move(fn)) {}

  Batch process(const Batch& batch) {
    buffer_.clear();
    for (const Value& v : Traits::values(batch)) buffer_.push_back(fn_(v));
    return Traits::rebuilt(batch, std::span<const Value>(buffer_), false);
  }
  Fn& function() { return fn_; }
  const Fn& function() const { return fn_; }

 private:
  Fn fn_;
  std::vector<Value> buffer_;
};

template <class Fn>
FunctionAdaptor<Transform, Fn> transform(Fn fn) {
  return {{}, std::move(fn)};
}

}  // namespace looptrace
