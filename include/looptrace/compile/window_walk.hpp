// The windows of a Storage node that a traced window `clip` sees, in time order: from
// the first that ends after clip.from to the last that starts before clip.to, each
// clipped to `clip`. The one walk over windows, for the tile_windows stage, the
// closed-form window runs and movement boxes, and the plot; the starts are an odometer
// (StorageWindows::starts(), or a folded copy of it), so a walker can read the digits
// of the loops above the node and step along the innermost one.
#pragma once

#include <cstdint>
#include <utility>

#include "looptrace/compile/time_odometer.hpp"
#include "looptrace/interval.hpp"

namespace looptrace {

class WindowWalk {
 public:
  WindowWalk() = default;  // sees no window
  WindowWalk(TimeOdometer starts, std::int64_t duration, const TimeRange& clip)
      : starts_(std::move(starts)), duration_(duration), clip_(clip),
        none_(duration <= 0 || clip.empty()) {  // a node that never holds sees none
    if (!none_) starts_.seek(clip.from - duration + 1);
  }

  bool done() const { return none_ || starts_.done() || starts_.time() >= clip_.to; }
  std::int64_t start() const { return starts_.time(); }  // of the current window, unclipped
  std::int64_t duration() const { return duration_; }
  const TimeRange& clip() const { return clip_; }
  TimeRange window() const { return intersect(TimeRange{start(), start() + duration_}, clip_); }
  // Whether the current window lies inside `clip` (it is not cut).
  bool whole() const { return start() >= clip_.from && start() + duration_ <= clip_.to; }
  // The starts' odometer: the digits of the loops above the node.
  const TimeOdometer& starts() const { return starts_; }

  void advance() { starts_.advance(); }
  // n windows on, where the innermost digit has room (TimeOdometer::advance_innermost).
  void advance_innermost(std::int64_t n) { starts_.advance_innermost(n); }
  // To the first window that ends at or after t (one ending at clip.from included).
  void seek_ending_from(std::int64_t t) {
    if (!none_) starts_.seek(t - duration_);
  }

 private:
  TimeOdometer starts_;
  std::int64_t duration_ = 0;
  TimeRange clip_;
  bool none_ = true;
};

}  // namespace looptrace
