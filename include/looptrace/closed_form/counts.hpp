// Closed-form counts over whole loop nests: accesses per (leaf, tensor), points
// (operations), computing timesteps and the first and last of them, for any timestep
// range, without visiting the timesteps.
//
// At one timestep a leaf's (leaf, tensor) count is the size of its tile's image in the
// tensor, deduplicated. The leaf's rank variables fall into connected components
// through the tensor's ranks (a rank that reads p + r joins p and r); the image is the
// product of the components' images, and the tile of a variable depends only on the
// digits of the loops over it. So the sum over an odometer box (some digits fixed, one
// in a sub-range, the rest free) is a product over components of sums over only that
// component's loop digits. Those sums run over tile *shapes*, not digits: the size of
// an image does not change when a tile is translated, a loop cuts a tile into a few
// classes of sub-tiles (the first, the full ones, one partial, the empty ones), so each
// variable takes few distinct shapes, each weighted by how many digit combinations give
// it. A range of timesteps is O(depth) such boxes. Points are projected and
// deduplicated only for images that are not a product of intervals (a variable read by
// two ranks, or a strided sum such as 2*p + r), once per distinct combination of shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

// What one leaf does over some timesteps.
struct LeafTotals {
  std::vector<std::int64_t> accesses;  // per LeafSchedule::tensors entry (0 where disabled)
  std::int64_t points = 0;             // operations
  std::int64_t computing = 0;          // timesteps at which the leaf computes
  std::int64_t first = -1, last = -1;  // the first and last of those; -1: none
};

class LeafCounter {
 public:
  // `enabled[k]` says whether the leaf's k-th tensor is counted (a tensor filter).
  // Enumerating one image is refused past `max_tile_points` points (SpecError).
  LeafCounter(const Schedule& schedule, const LeafSchedule& leaf, std::vector<bool> enabled,
              std::int64_t max_tile_points = kDefaultMaxTilePoints);
  LeafCounter(LeafCounter&&) noexcept;
  LeafCounter& operator=(LeafCounter&&) noexcept;
  ~LeafCounter();

  const LeafSchedule& leaf() const;
  // Adds the timesteps of `range` to `totals` (ranges added in time order keep `first`
  // and `last` right). Throws SpecError past 2^63 - 1 of anything.
  void add(const TimeRange& range, LeafTotals& totals);
  // Whether counting tensor k so far projected and deduplicated points.
  bool enumerated(std::size_t k) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The accesses of every traced (leaf, tensor) of a schedule, summed, over a range: what
// a threaded trace uses to cut its window into pieces of about equal output.
class AccessCounter {
 public:
  // `trace_enabled` per Schedule::traces, `leaf_enabled` per Schedule::leaves.
  AccessCounter(const Schedule& schedule, const std::vector<bool>& trace_enabled,
                const std::vector<bool>& leaf_enabled, std::int64_t max_tile_points = kDefaultMaxTilePoints);
  std::int64_t accesses(const TimeRange& range);

 private:
  std::vector<LeafCounter> leaves_;
};

}  // namespace looptrace
