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
struct TapAdaptor : StageAdaptor {
  Fn fn;
  template <AccessSource Up>
  Tap<Up, Fn> operator()(Up up) const {
    return Tap<Up, Fn>(std::move(up), fn);
  }
};

template <class Fn>
TapAdaptor<Fn> tap(Fn fn) {
  return {{}, std::move(fn)};
}

}  // namespace looptrace
