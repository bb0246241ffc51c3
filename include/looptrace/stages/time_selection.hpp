// Which timesteps a trace covers: one window (prefix, [from, to), a shard of it) or a
// sorted sample of single timesteps. Element ids never depend on it.
#pragma once

#include <cstdint>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/record.hpp"

namespace looptrace {

struct TimeSelection {
  TimeRange window;               // what windows and spans are clipped to
  std::vector<TimeRange> ranges;  // sorted, disjoint, inside window
  bool truncated = false;         // whether anything of [0, n_timesteps) was left out
  // Where the traced run ends: n_timesteps, or a prefix's end (--max-timesteps cuts the
  // trace itself; --from/--to and shards look at part of a run that goes on).
  std::int64_t trace_end = 0;
  bool sampled = false;  // ranges are sampled single timesteps

  // Throws SpecError for options that contradict each other or the schedule.
  static TimeSelection from_options(const TraceOptions& options, std::int64_t n_timesteps);
  // The first of `ranges` that ends after t (ranges.size() when none does).
  std::size_t first_range_after(std::int64_t t) const;
};

}  // namespace looptrace
