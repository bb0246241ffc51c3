// A timeline of the memory levels as Chrome trace-event JSON (what Perfetto and
// chrome://tracing open): one process per memory level, holding its Einsums' spans,
// its tile windows per tensor as slices ("X" events) and its footprint, fills and
// drains as counters ("C" events); "M" events name the tracks. The time axis is in
// timesteps (1 us each), or cycles with cycles_per_timestep. Past max_events the
// windows are drawn a run (or several) per slice, which says so in its args.
#pragma once

#include <cstdint>
#include <string>

#include "looptrace/closed_form/tile_timeline.hpp"

namespace looptrace {

struct TimelineOptions {
  std::int64_t max_events = 200'000;
  std::int64_t cycles_per_timestep = 0;  // 0: the axis and the rates are per timestep
};

struct TimelineInfo {
  std::int64_t events = 0;
  Resolution resolution;  // what a slice is: every window, or runs of them
};

// The finest resolution (every window; runs of at most 2^k windows window by window and
// longer ones as one slice, k decreasing; then 2, 4, ... runs a slice) at which all the
// events the timeline writes, counted exactly, number at most `max_events`; throws
// SpecError when even one slice per tile track does not fit.
Resolution timeline_resolution(const TileTimeline& timeline, std::int64_t max_events,
                               std::int64_t cycles_per_timestep = 0);

// What a slice is at `r`, in words (otherData's "slices").
std::string resolution_text(const Resolution& r);

std::string timeline_json(const TileTimeline& timeline, const TimelineOptions& options = {},
                          TimelineInfo* info = nullptr);

}  // namespace looptrace
