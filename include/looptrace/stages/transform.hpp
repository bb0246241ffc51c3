// Changes each access: `... | transform(fn)`, fn(const AccessRecord&) -> AccessRecord.
// The result must stay in time order (fn may change the timestep only within it); its
// batches count as not deduplicated, since fn may map two elements to one.
#pragma once

#include <utility>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <AccessSource Up, class Fn>
class Transform : public BatchStage<Transform<Up, Fn>, Up> {
 public:
  Transform(Up up, Fn fn) : BatchStage<Transform<Up, Fn>, Up>(std::move(up)), fn_(std::move(fn)) {}

  AccessBatch process(const AccessBatch& batch) {
    buffer_.clear();
    for (const AccessRecord& r : batch) buffer_.push_back(fn_(r));
    return {buffer_, false};
  }

 private:
  Fn fn_;
  std::vector<AccessRecord> buffer_;
};

template <class Fn>
FunctionAdaptor<Transform, Fn> transform(Fn fn) {
  return {{}, std::move(fn)};
}

}  // namespace looptrace
