// Tile windows over time, in closed form (SEMANTICS "Tile windows" and "Data movement"):
// per memory level, per Storage node and tensor, the runs of windows that move alike,
// each with its tile, fills and drains per window, from the boxes summarize_movement
// counts (no access is visited, but for a level it cannot count); and what a level
// holds over time. What a timeline or a footprint panel draws. Time and memory follow
// the runs, not the windows.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/closed_form/movement.hpp"  // FootprintPeak
#include "looptrace/closed_form/summary.hpp"
#include "looptrace/closed_form/window_runs.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/options.hpp"

namespace looptrace {

// `windows.count` windows, each with this tile, fills and drains (elements).
struct TileRun {
  WindowRun windows;
  std::int64_t tile = 0, fills = 0, drains = 0;
};

// One (Storage node, tensor): its windows in the traced window, in time order.
struct TileTrack {
  std::uint32_t storage = 0;  // into Schedule::storages
  std::string tensor;
  std::optional<std::int64_t> bytes_per_value;  // from bits_per_value, rounded up
  std::vector<TileRun> runs;
};

struct LevelTiles {
  std::string level;
  std::vector<TileTrack> tracks;     // nodes in tree order, a node's tensors in its order
  std::vector<std::string> einsums;  // those with a leaf below the level's nodes
  std::optional<double> capacity_bits;
  std::optional<std::string> capacity_unevaluated;  // needs AccelForge's context
  // Why the closed form could not count some (node, tensor) track of the level
  // ("TENSOR: its tiles are not boxes", ...); such a track is then `enumerated` (one
  // pass over that tensor's accesses, as `movement` does) while the trace has at most
  // 2^27 accesses, else the level is not drawn (no tracks).
  std::string not_closed;
  bool enumerated = false;
  bool has_bytes() const;  // every track has a size per element
};

struct TileTimeline {
  TimeRange window;              // the traced window
  std::int64_t n_timesteps = 0;  // of the whole schedule
  std::vector<EinsumSpan> einsum_spans;  // as the summary's
  std::vector<LevelTiles> levels;        // tree order; those holding a traced tensor
};

// Throws SpecError for a sampled selection (windows need whole stretches of time).
TileTimeline tile_timeline(const Schedule& schedule, const TraceOptions& options = {});

// How finely a track is drawn: a run of at most `expand_up_to` windows window by window
// and a longer one as one span; with `runs_per_span` > 1, that many runs a span. The
// default draws every window.
struct Resolution {
  std::int64_t expand_up_to = std::numeric_limits<std::int64_t>::max();
  std::int64_t runs_per_span = 1;
  bool every_window() const { return runs_per_span <= 1 && expand_up_to == std::numeric_limits<std::int64_t>::max(); }
  friend bool operator==(const Resolution&, const Resolution&) = default;
};

// Windows (or runs of them) as one stretch: [from, to), the largest tile in it, the
// fills and drains of all its windows; `exact` when it is one window or back to back
// windows of one tile (the footprint over it is `tile` throughout).
struct TileSpan {
  std::int64_t from = 0, to = 0, windows = 0, tile = 0, fills = 0, drains = 0;
  bool exact = true;
};

std::vector<TileSpan> tile_spans(const TileTrack& track, const Resolution& r = {});
std::int64_t span_count(const TileTrack& track, const Resolution& r = {});

// From `at` on (to the next step), the level holds this many elements (and bytes, 0
// without sizes): the sum of the tiles of the spans that contain the timestep. Exact
// where every span is; a span that is not counts its largest tile over its whole
// stretch (an upper bound that keeps every peak). The last step holds nothing.
struct FootprintStep {
  std::int64_t at = 0, elements = 0, bytes = 0;
};
std::vector<FootprintStep> footprint_steps(const LevelTiles& level, const Resolution& r = {});

}  // namespace looptrace
