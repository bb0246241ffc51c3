// The lazy trace: accesses in time order, pulled in batches (spans of AccessRecord) or
// one by one (a range of Access for range-for and range-v3). Memory is bounded by the
// tree and the largest single-timestep tile, whatever the length of the trace.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

#include "looptrace/access.hpp"
#include "looptrace/options.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/stages/merge.hpp"

namespace looptrace {

// Which traces and leaves the filters keep. Throws SpecError for unknown names.
struct TraceFilter {
  std::vector<bool> trace_enabled;  // per Schedule::traces
  std::vector<bool> leaf_enabled;   // per Schedule::leaves

  static TraceFilter from_options(const Schedule& schedule, const TraceOptions& options);
};

// Leaf sources for the enabled leaves, each with its tensor filter applied.
std::vector<LeafSource> make_leaf_sources(const Schedule& schedule, const TraceFilter& filter,
                                          std::int64_t max_tile_points);

class AccessStream {
 public:
  // The schedule must outlive the stream.
  AccessStream(const Schedule& schedule, const TraceOptions& options = {});

  // The next batch: at least `target` records unless the trace ends first (a timestep
  // of one leaf is never split). An empty span means the end.
  std::span<const AccessRecord> next_batch(std::size_t target = 4096);

  const Schedule& schedule() const { return *schedule_; }
  const TimeSelection& selection() const { return merge_.selection(); }

  class iterator {
   public:
    using value_type = Access;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    explicit iterator(AccessStream* s) : stream_(s) { fetch(); }
    Access operator*() const { return make_access(*stream_->schedule_, batch_[pos_]); }
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
  const Schedule* schedule_;
  MergeByTime merge_;
  std::vector<AccessRecord> buffer_;
};

}  // namespace looptrace
