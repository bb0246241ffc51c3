// Which windows of a Storage node a traced window `clip` sees, for the tile_windows
// stage (WindowCursor) and the closed-form window runs (storage_window_runs): from
// the first that ends after clip.from to the last that starts before clip.to, each
// clipped to `clip`. Internal (not installed).
#pragma once

#include <algorithm>
#include <cstdint>

#include "looptrace/record.hpp"
#include "looptrace/compile/time_odometer.hpp"

namespace looptrace::window_clip {

// Whether any window of `duration` can be seen (a node that never holds sees none).
inline bool any(std::int64_t duration, const TimeRange& clip) { return duration > 0 && !clip.empty(); }

// Seeks the window starts to the first window that ends after clip.from.
inline void seek_first(TimeOdometer& starts, std::int64_t duration, const TimeRange& clip) {
  starts.seek(clip.from - duration + 1);
}

// Whether the window at the current start is seen (it starts before clip.to).
inline bool seen(const TimeOdometer& starts, const TimeRange& clip) {
  return !starts.done() && starts.time() < clip.to;
}

// The window starting at `start`, clipped.
inline TimeRange clipped(std::int64_t start, std::int64_t duration, const TimeRange& clip) {
  return {std::max(start, clip.from), std::min(start + duration, clip.to)};
}

}  // namespace looptrace::window_clip
