// Tile windows as runs: the windows of one storage node are an odometer over the loops
// outside it, so they come as arithmetic progressions of equal windows, and a schedule
// with 10^9 windows is a handful of runs. A run list is canonical: the sorted, distinct
// windows taken greedily, each window joining the run before it when it has the same
// length and (from the run's third window on) the same distance from its predecessor.
// So two computations of the same window set (sharded and merged, or not) give equal
// lists.
#pragma once

#include <cstdint>
#include <vector>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

// The windows [start + i * period, start + i * period + length) for 0 <= i < count;
// period is 0 when count is 1.
struct WindowRun {
  std::int64_t start = 0, length = 0, period = 0, count = 0;

  TimeRange first() const { return {start, start + length}; }
  TimeRange last() const { return at(count - 1); }
  TimeRange at(std::int64_t i) const { return {start + i * period, start + i * period + length}; }
  friend bool operator==(const WindowRun&, const WindowRun&) = default;
};

// Builds the canonical list from windows (or runs of them) given in sorted order
// (by start, then end); a window equal to the one before it is dropped.
class RunBuilder {
 public:
  void add(const TimeRange& window);
  void add(const WindowRun& run);
  std::vector<WindowRun> finish();

 private:
  std::vector<WindowRun> done_;
  WindowRun open_;  // count 0: none
};

// The windows of a run list, in order.
std::vector<TimeRange> expand(const std::vector<WindowRun>& runs);
std::int64_t window_count(const std::vector<WindowRun>& runs);

// The canonical list of the union of several sorted run lists (duplicates dropped).
// Interleaved lists cost one step per window where they interleave.
std::vector<WindowRun> merge_runs(const std::vector<std::vector<WindowRun>>& lists);

// `runs` without the window `w` (if it holds it).
void remove_window(std::vector<WindowRun>& runs, const TimeRange& w);

// Whether `runs` holds the window `w`.
bool holds_window(const std::vector<WindowRun>& runs, const TimeRange& w);

// The windows of one storage node that meet `selection`, clipped to it, as a sorted run
// list (not canonical yet); `cut` gets the unclipped windows that the clip changed.
// Costs one step per run of the result, never per window.
void storage_window_runs(const StorageWindows& storage, const TimeRange& selection,
                         std::vector<WindowRun>& runs, std::vector<TimeRange>& cut);

}  // namespace looptrace
