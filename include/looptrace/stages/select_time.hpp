// The timestep selection: a prefix, a window [from, to), a shard of it, or a
// sample of single timesteps (TimeSelection). It seeks its source to each selected
// range and pulls with the range's end as horizon: it never replays what comes before.
// Over a source that does not pass seeks (a user stage, a tap), it pulls what comes
// before each range and drops it, so that stage still sees every access.
#pragma once

#include <cstdint>
#include <utility>

#include "looptrace/options.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

template <Source Up>
class SelectTime : public ForwardingStage<SelectTime<Up>, Up> {
  using Batch = BatchOf<Up>;
  using Base = ForwardingStage<SelectTime<Up>, Up>;
  using Base::up_;

 public:
  static constexpr bool passes_trace_masks = true;  // which timesteps does not depend on traces

  SelectTime() = default;
  SelectTime(Up up, TimeSelection selection)
      : Base(std::move(up)), selection_(std::move(selection)), context_(up_.context()) {
    context_.window = selection_.window;
    context_.trace_end = earlier(context_.trace_end, selection_.trace_end);
    context_.sampled = context_.sampled || selection_.sampled;
  }

  Batch next_batch(std::int64_t until = kEndOfTime) {
    while (range_ < selection_.ranges.size()) {
      const TimeRange& r = selection_.ranges[range_];
      if (r.from >= until) break;
      if (!entered_) skip_to(r.from), entered_ = true;
      const std::int64_t limit = earlier(r.to, until);
      Batch b = up_.next_batch(limit);
      if (!detail::values_of(b).empty() || limit < r.to) return b;
      ++range_, entered_ = false;  // this range is done
    }
    return Batch{};
  }
  std::int64_t next_timestep() const {
    for (std::size_t i = range_; i < selection_.ranges.size(); ++i) {
      const TimeRange& r = selection_.ranges[i];
      const std::int64_t t = i == range_ && entered_ ? later(up_.next_timestep(), r.from) : r.from;
      if (t < r.to) return t;
    }
    return kEndOfTime;
  }
  // To the first selected timestep >= t.
  void seek(std::int64_t t)
    requires SeekableSource<Up>
  {
    range_ = selection_.first_range_after(t);
    entered_ = range_ < selection_.ranges.size();
    if (entered_) up_.seek(later(t, selection_.ranges[range_].from));
  }
  const TimeSelection& selection() const { return selection_; }
  const StreamContext& context() const { return context_; }

 private:
  // To the first item of the source at or after t: a seek where the source passes one,
  // else a pull of everything before t, dropped.
  void skip_to(std::int64_t t) {
    if constexpr (SeekableSource<Up>) {
      up_.seek(t);
    } else {
      while (!up_.next_batch(t).empty()) {
      }
    }
  }

  TimeSelection selection_;
  StreamContext context_;
  std::size_t range_ = 0;
  bool entered_ = false;
};

struct SelectTimeAdaptor : StageAdaptor {
  TraceOptions options;  // only the selection fields matter
  template <Source Up>
  SelectTime<Up> operator()(Up up) const {
    TimeSelection selection = TimeSelection::from_options(options, up.schedule().n_timesteps);
    return SelectTime<Up>(std::move(up), std::move(selection));
  }
};

// `... | select_time(options)`: the prefix, window, shard and sample of `options`.
inline SelectTimeAdaptor select_time(const TraceOptions& options) {
  SelectTimeAdaptor a;
  a.options = options;
  return a;
}
// The exact prefix: timesteps < n.
inline SelectTimeAdaptor prefix(std::int64_t n) {
  TraceOptions o;
  o.max_timesteps = n;
  return select_time(o);
}
// The window [from, to).
inline SelectTimeAdaptor from_to(std::int64_t from, std::int64_t to) {
  TraceOptions o;
  o.from = from, o.to = to;
  return select_time(o);
}
// The index-th of count contiguous, nearly equal timestep ranges.
inline SelectTimeAdaptor shard(std::int64_t index, std::int64_t count) {
  TraceOptions o;
  o.shard = {index, count};
  return select_time(o);
}
// k distinct timesteps, uniformly chosen, deterministic for a seed, in time order.
inline SelectTimeAdaptor sample(std::int64_t k, std::uint64_t seed) {
  TraceOptions o;
  o.sample_timesteps = k;
  o.seed = seed;
  return select_time(o);
}

}  // namespace looptrace
