// The lazy trace of SEMANTICS.md: the standard composition of the stages, and
// AccessStream, which pulls it in batches of records or one Access at a time. Memory is
// bounded by the tree and the largest single-timestep tile, whatever the trace length.
#pragma once

#include <cstddef>
#include <iterator>
#include <span>

#include "looptrace/access.hpp"
#include "looptrace/options.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/stages/dedup.hpp"
#include "looptrace/stages/filter.hpp"
#include "looptrace/stages/leaf_iterations.hpp"
#include "looptrace/stages/merge_by_time.hpp"
#include "looptrace/stages/project.hpp"
#include "looptrace/stages/select_time.hpp"

namespace looptrace {

// Every access of the trace `options` describe, in time order: each leaf's tiles
// projected and deduplicated, merged into time order, filtered, and cut to the
// selected timesteps. Throws SpecError for options that contradict the schedule.
inline auto trace_pipeline(const Schedule& schedule, const TraceOptions& options,
                           std::size_t batch_records = kDefaultBatchRecords) {
  check_spatial_instances(schedule, options.max_tile_points, options.einsums);
  return leaves(schedule) | project(options.max_tile_points, batch_records) | dedup() |
         merge_by_time(batch_records) | filter_traces(options.tensors, options.einsums) |
         select_time(options);
}
using TracePipeline =
    decltype(trace_pipeline(std::declval<const Schedule&>(), std::declval<const TraceOptions&>()));

// Each computing leaf's tiles per timestep, one Iteration per spatial iteration, for
// the Einsum filter and the time selection of `options` (tensor filters do not apply).
inline auto iteration_pipeline(const Schedule& schedule, const TraceOptions& options) {
  check_spatial_instances(schedule, options.max_tile_points, options.einsums);
  return leaves(schedule) | filter_traces({}, options.einsums) | merge_by_time() | select_time(options);
}
using IterationPipeline =
    decltype(iteration_pipeline(std::declval<const Schedule&>(), std::declval<const TraceOptions&>()));

class AccessStream {
 public:
  // The schedule must outlive the stream. Batches gather about `batch_records`.
  explicit AccessStream(const Schedule& schedule, const TraceOptions& options = {},
                        std::size_t batch_records = kDefaultBatchRecords)
      : pipeline_(trace_pipeline(schedule, options, batch_records)) {}

  // The next batch of records (a timestep of one leaf is never split); empty at the end.
  std::span<const AccessRecord> next_batch() { return pipeline_.next_batch(kEndOfTime).records; }

  const Schedule& schedule() const { return pipeline_.schedule(); }
  const TimeSelection& selection() const { return pipeline_.selection(); }
  TracePipeline& pipeline() { return pipeline_; }

  // One Access at a time: an input range for range-for, std::ranges and range-v3.
  class iterator {
   public:
    using value_type = Access;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    explicit iterator(AccessStream* s) : stream_(s) { fetch(); }
    Access operator*() const { return make_access(stream_->schedule(), batch_[pos_]); }
    iterator& operator++() {
      if (++pos_ == batch_.size()) fetch();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.stream_ == nullptr; }

   private:
    void fetch() {
      batch_ = stream_->next_batch();
      pos_ = 0;
      if (batch_.empty()) stream_ = nullptr;
    }
    AccessStream* stream_ = nullptr;
    std::span<const AccessRecord> batch_;
    std::size_t pos_ = 0;
  };

  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() { return {}; }

 private:
  TracePipeline pipeline_;
};

}  // namespace looptrace
