// The lazy trace of SEMANTICS.md: AccessStream pulls the standard composition of the
// stages (trace_pipeline) in batches of records or one Access at a time. Memory is
// bounded by the tree and the largest single-timestep tile, whatever the trace length.
#pragma once

#include <cstddef>
#include <iterator>
#include <span>

#include "looptrace/access.hpp"
#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"  // load_spec and compile_schedule: the stream from a spec
#include "looptrace/stages/trace_pipeline.hpp"

namespace looptrace {

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
