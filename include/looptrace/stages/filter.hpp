// Tensor and Einsum filters. Timesteps keep their numbers: a filter drops
// accesses, never time. Placed anywhere, it pushes its mask upstream through the
// stages that pass trace masks (the library's own, not a user stage, a tap, keep_if
// or transform: they see every access), down to the projections, so filtered traces
// are never computed; over a source that cannot be told, it drops records as they pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptrace/stages/leaf_iterations.hpp"
#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

// Which traces and leaves the filters keep. Throws SpecError for unknown names.
struct TraceFilter {
  std::vector<bool> trace_enabled;  // per Schedule::traces
  std::vector<bool> leaf_enabled;   // per Schedule::leaves

  // Empty lists keep everything.
  static TraceFilter from_names(const Schedule& schedule, const std::vector<std::string>& tensors,
                                const std::vector<std::string>& einsums);
};

template <AccessSource Up>
class FilterTraces : public ForwardingStage<FilterTraces<Up>, Up> {
  using Base = ForwardingStage<FilterTraces<Up>, Up>;

 public:
  static constexpr bool passes_seeks = true;  // dropping traces does not depend on time
  FilterTraces() = default;
  FilterTraces(Up up, std::vector<bool> trace_enabled) : Base(std::move(up)), context_(this->up_.context()) {
    std::vector<bool>& enabled = context_.traces;
    if (enabled.empty()) {
      enabled = std::move(trace_enabled);  // the usual case: no copy
    } else {
      for (std::size_t i = 0; i < enabled.size(); ++i) enabled[i] = enabled[i] && trace_enabled[i];
    }
    if constexpr (RestrictableSource<Up>) this->up_.restrict_traces(context_.traces);
  }

  AccessBatch next_batch(std::int64_t until = kEndOfTime) {
    if constexpr (RestrictableSource<Up>) {
      return this->up_.next_batch(until);  // upstream computes only what passes
    } else {
      for (;;) {
        const AccessBatch b = this->up_.next_batch(until);
        if (b.empty()) return b;
        buffer_.clear();
        for (const AccessRecord& r : b)
          if (context_.traces[r.trace]) buffer_.push_back(r);
        if (!buffer_.empty()) return {buffer_, b.deduplicated};
      }
    }
  }
  const StreamContext& context() const { return context_; }
  // Narrows the mask (it never widens); whether any trace is left.
  bool restrict_traces(const std::vector<bool>& mask) {
    std::vector<bool>& enabled = context_.traces;
    if (enabled.empty()) enabled = mask;
    for (std::size_t i = 0; i < enabled.size(); ++i) enabled[i] = enabled[i] && mask[i];
    bool any = false;
    for (bool e : enabled) any = any || e;
    if constexpr (RestrictableSource<Up>) any = this->up_.restrict_traces(enabled) && any;
    return any;
  }

 private:
  StreamContext context_;
  std::vector<AccessRecord> buffer_;
};

struct FilterAdaptor : StageAdaptor {
  std::vector<std::string> tensors, einsums;  // empty: all

  template <AccessSource Up>
  FilterTraces<Up> operator()(Up up) const {
    TraceFilter f = TraceFilter::from_names(up.schedule(), tensors, einsums);
    return FilterTraces<Up>(std::move(up), std::move(f.trace_enabled));
  }
  // Before projection: keep the leaves of the chosen Einsums (iterations have no tensor).
  LeafSet<LeafIterations> operator()(LeafSet<LeafIterations> set) const {
    TraceFilter f = TraceFilter::from_names(*set.context.schedule, tensors, einsums);
    std::erase_if(set.leaves, [&](const LeafIterations& l) { return !f.leaf_enabled[l.leaf_index()]; });
    set.context.traces = std::move(f.trace_enabled);
    return set;
  }
};

// `... | filter_traces({"A", "B"}, {"Matmul1"})`: only these tensors of these Einsums.
inline FilterAdaptor filter_traces(std::vector<std::string> tensors, std::vector<std::string> einsums = {}) {
  FilterAdaptor a;
  a.tensors = std::move(tensors);
  a.einsums = std::move(einsums);
  return a;
}

}  // namespace looptrace
