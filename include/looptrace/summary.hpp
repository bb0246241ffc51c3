// Everything about a trace but the accesses themselves: counts per trace, the span of
// each Einsum, the tile windows of each memory level. Computed by streaming each leaf
// (counting, not emitting), so it needs no memory that grows with the trace.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

struct TraceCount {
  std::string einsum;
  std::string tensor;
  bool is_output = false;
  std::int64_t n_accesses = 0;
  std::int64_t trace = 0;  // into Schedule::traces
};

struct EinsumSpan {
  std::string einsum;
  std::int64_t first = 0, end = 0;  // [first, end): the timesteps at which it computes
};

struct TensorWindows {
  std::string tensor;
  std::vector<TimeRange> windows;  // sorted, distinct
};

struct LevelWindows {
  std::string level;
  std::vector<TensorWindows> tensors;
};

struct TraceSummary {
  std::int64_t n_timesteps = 0;
  bool truncated = false;
  std::vector<std::string> tensors;  // traced, in order of first trace
  std::vector<std::string> einsums;  // ordered by span
  std::vector<std::string> memory_levels;
  std::vector<EinsumSpan> einsum_timespans;  // ordered by span
  std::vector<LevelWindows> tile_windows;    // in memory_levels order
  std::vector<TraceCount> traces;            // tree order
  std::int64_t n_points = 0;                 // operations (points) in the traced time
  std::vector<std::int64_t> leaf_points;     // the same per Schedule::leaves entry

  // The windows of `tensor` in `level`; empty if that level never holds it.
  std::vector<TimeRange> tile_lifetime(const std::string& level, const std::string& tensor) const;
};

// The windows of `tensor` in `level`; empty if that level never holds it.
std::vector<TimeRange> find_windows(const std::vector<LevelWindows>& levels,
                                    const std::string& level, const std::string& tensor);

// The tile windows of every memory level, clipped to the selection's window.
std::vector<LevelWindows> tile_windows(const Schedule& schedule, const TimeRange& window,
                                       const std::vector<std::string>& tensors);

TraceSummary summarize(const Schedule& schedule, const TraceOptions& options = {});

}  // namespace looptrace
