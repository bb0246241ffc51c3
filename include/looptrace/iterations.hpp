// Iteration traces (the reference's trace_iterations): at each timestep, where each
// computing leaf's tile starts along every rank variable, one record per spatial
// iteration. A lazy range in time order, like AccessStream, with no access emitted.
#pragma once

#include <cstdint>
#include <iterator>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/stages/merge.hpp"

namespace looptrace {

// One spatial iteration of one leaf at one timestep.
struct Iteration {
  std::int64_t timestep = 0;
  const LeafSchedule* leaf = nullptr;  // einsum and variable names
  std::vector<Interval> tile;          // per leaf variable: the sub-tile [lo, hi)

  std::int64_t origin(std::size_t variable) const { return tile[variable].lo; }
};

class IterationStream {
 public:
  // The schedule must outlive the stream. Uses the Einsum filter and the time
  // selection of `options`; tensor filters do not change iterations.
  IterationStream(const Schedule& schedule, const TraceOptions& options = {});

  // The next iteration, or nullptr at the end; valid until the next call.
  const Iteration* next();

  class iterator {
   public:
    using value_type = Iteration;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    explicit iterator(IterationStream* s) : stream_(s), current_(s->next()) {}
    const Iteration& operator*() const { return *current_; }
    const Iteration* operator->() const { return current_; }
    iterator& operator++() {
      current_ = stream_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.current_ == nullptr; }

   private:
    IterationStream* stream_ = nullptr;
    const Iteration* current_ = nullptr;
  };

  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() { return {}; }

 private:
  void fill(const LeafSource& leaf);

  MergeByTime merge_;
  std::vector<Iteration> buffer_;  // one (leaf, timestep); entries reused, not freed
  std::size_t size_ = 0, pos_ = 0;
};

}  // namespace looptrace
