// Looks at each batch as it passes, unchanged: `... | tap(fn)`, fn(const Batch&), over
// a stream of any batches (accesses, tile steps, window traffic, transfer requests):
// counters, progress, logging. A tap sees everything its source yields: a filter or a
// time selection after it drops what it does not want as it passes, never before.
#pragma once

#include <utility>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <Source Up, class Fn>
class Tap : public BatchStage<Tap<Up, Fn>, Up> {
 public:
  using Batch = BatchOf<Up>;
  Tap(Up up, Fn fn) : BatchStage<Tap<Up, Fn>, Up>(std::move(up)), fn_(std::move(fn)) {}

  Batch process(const Batch& batch) {
    fn_(batch);
    return batch;
  }
  // The function, with whatever it counted: `p.stage<Fn>()` finds it too.
  Fn& function() { return fn_; }
  const Fn& function() const { return fn_; }

 private:
  Fn fn_;
};

template <class Fn>
FunctionAdaptor<Tap, Fn> tap(Fn fn) {
  return {{}, std::move(fn)};
}

}  // namespace looptrace
