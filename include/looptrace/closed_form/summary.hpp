// Everything about a trace but the accesses themselves: counts per trace, the span of
// each Einsum, the tile windows of each memory level. Counts come in closed form
// (looptrace/closed_form/counts.hpp) and windows as runs (looptrace/closed_form/window_runs.hpp), so neither
// the time nor the memory grows with the trace; only `--windows full` lists every
// window.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"  // what a caller compiles the schedule from
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/closed_form/window_runs.hpp"

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

// How tile windows are given: every window, runs of them, or not at all.
enum class WindowsForm { full, compact, none };

struct TensorWindows {
  std::string tensor;
  std::vector<TimeRange> windows;  // full: sorted, distinct
  std::vector<WindowRun> runs;     // compact: the same windows as canonical runs
  // The unclipped windows behind the entries that the selection clipped (and any
  // window equal to such an entry): what merging shards needs to rejoin them.
  std::vector<TimeRange> cut;
};

struct LevelWindows {
  std::string level;
  std::vector<TensorWindows> tensors;
};

// What a summary covered, so that summaries of adjacent shards can be merged.
struct SummarySelection {
  std::int64_t from = 0, to = 0;    // the window
  std::int64_t full_timesteps = 0;  // of the whole schedule
  std::int64_t sample_timesteps = -1;  // -1: every timestep of the window
};

struct TraceSummary {
  std::int64_t n_timesteps = 0;
  bool truncated = false;
  std::vector<std::string> tensors;  // traced, in order of first trace
  std::vector<std::vector<std::int64_t>> tensor_shapes;  // per `tensors` entry
  std::vector<std::vector<std::string>> tensor_ranks;    // per `tensors` entry
  std::vector<std::string> einsums;  // ordered by span
  std::vector<std::string> memory_levels;
  std::vector<EinsumSpan> einsum_timespans;  // ordered by span
  WindowsForm windows_form = WindowsForm::full;
  std::vector<LevelWindows> tile_windows;    // in memory_levels order
  std::vector<TraceCount> traces;            // tree order
  std::int64_t n_points = 0;                 // operations (points) in the traced time
  std::vector<std::int64_t> leaf_points;     // the same per Schedule::leaves entry
  // Indices into `traces` of those whose counts projected and deduplicated points
  // (an image that is not a product of intervals); the rest are closed form.
  std::vector<std::int64_t> enumerated;
  SummarySelection selection;
  std::vector<std::string> einsum_order;  // the workload's order: it breaks span ties

  // The windows of `tensor` in `level`; empty if that level never holds it.
  std::vector<TimeRange> tile_lifetime(const std::string& level, const std::string& tensor) const;
};

// The windows of `tensor` in `level`; empty if that level never holds it. Runs are
// expanded.
std::vector<TimeRange> find_windows(const std::vector<LevelWindows>& levels,
                                    const std::string& level, const std::string& tensor);

// The tile windows of every memory level, clipped to the selection's window, in closed
// form (the summary's; the tile_windows() stage follows them along a stream).
std::vector<LevelWindows> level_windows(const Schedule& schedule, const TimeRange& window,
                                        const std::vector<std::string>& tensors,
                                        WindowsForm form = WindowsForm::full);

struct SummaryOptions {
  WindowsForm windows = WindowsForm::full;
  // Workers that take contiguous parts of the selection; the result is the same.
  int threads = 1;
  // Called now and then, from the calling thread, with the work done so far and the
  // work in all (units: one time range of one leaf).
  std::function<void(std::int64_t done, std::int64_t total)> progress;
};

TraceSummary summarize(const Schedule& schedule, const TraceOptions& options = {},
                       const SummaryOptions& summary = {});

// The summary of the union of adjacent shards (summaries of contiguous windows of one
// run, in any order): equal to the summary of the whole. Throws SpecError naming
// `names[i]` when the summaries do not fit together.
TraceSummary merge_summaries(std::vector<TraceSummary> shards,
                             const std::vector<std::string>& names = {});

}  // namespace looptrace
