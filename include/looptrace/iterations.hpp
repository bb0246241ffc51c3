// Iteration traces (the reference's trace_iterations): at each timestep, where each
// computing leaf's tile starts along every rank variable, one record per spatial
// iteration. A lazy range in time order: the leaves' iterations merged by time.
#pragma once

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/stream.hpp"

namespace looptrace {

class IterationStream : public IterationPipeline {
 public:
  // The schedule must outlive the stream.
  explicit IterationStream(const Schedule& schedule, const TraceOptions& options = {})
      : IterationPipeline(iteration_pipeline(schedule, options)) {}
};

}  // namespace looptrace
