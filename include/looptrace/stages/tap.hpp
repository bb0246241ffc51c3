// Looks at each batch as it passes, unchanged: `... | tap(fn)`, fn(const AccessBatch&)
// (counters, progress, logging).
#pragma once

#include <utility>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <AccessSource Up, class Fn>
class Tap : public BatchStage<Tap<Up, Fn>, Up> {
 public:
  Tap(Up up, Fn fn) : BatchStage<Tap<Up, Fn>, Up>(std::move(up)), fn_(std::move(fn)) {}

  AccessBatch process(const AccessBatch& batch) {
    fn_(batch);
    return batch;
  }

 private:
  Fn fn_;
};

template <class Fn>
FunctionAdaptor<Tap, Fn> tap(Fn fn) {
  return {{}, std::move(fn)};
}

}  // namespace looptrace
