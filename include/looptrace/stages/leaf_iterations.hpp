// One leaf's iteration space, timestep by timestep, in the leaf's own time
// order: at each timestep the tile of every rank variable (the union over spatial
// iterations). The time odometer advances incrementally and only the variables whose
// loops moved are re-tiled; seeking decodes the digits in O(depth).
//
// `leaves(schedule)` gives one LeafIterations per leaf; `| project()` turns tiles into
// accesses. As a source of its own, a leaf yields Iterations (the reference's
// trace_iterations), which merge_by_time() puts in time order like accesses.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "looptrace/access.hpp"
#include "looptrace/interval.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/compile/time_odometer.hpp"

namespace looptrace {

class Project;

// Sorted, disjoint, non-adjacent; one interval unless spatial loops split a tile. The
// stages keep theirs and refill them, so the hot path allocates only as they first grow.
using IntervalSet = std::vector<Interval>;
using SubTile = std::vector<Interval>;  // one interval per variable

// One spatial iteration of one leaf at one timestep.
struct Iteration {
  std::int64_t timestep = 0;
  const LeafSchedule* leaf = nullptr;  // einsum and variable names
  SubTile tile;                        // per leaf variable: the sub-tile [from, to)

  std::int64_t origin(std::size_t variable) const { return tile[variable].from; }
};

class LeafIterations : public BatchRange<LeafIterations, Iteration> {
 public:
  LeafIterations() = default;  // an empty source
  LeafIterations(const Schedule& schedule, std::size_t leaf);

  const Schedule& schedule() const { return *schedule_; }
  const StreamContext& context() const { return context_; }
  const LeafSchedule& leaf() const { return schedule_->leaves[leaf_]; }
  std::size_t leaf_index() const { return leaf_; }

  void seek(std::int64_t t);  // to the first timestep >= t
  void advance();
  bool done() const { return odometer_.done(); }
  std::int64_t timestep() const { return odometer_.time(); }
  std::int64_t next_timestep() const { return done() ? kEndOfTime : timestep(); }

  // Whether the leaf computes at this timestep (no variable's tile is empty).
  bool computes() const { return !empty_; }
  // The tile's coordinate set along each rank variable.
  const std::vector<IntervalSet>& tile() const { return tile_; }
  std::int64_t points() const;  // operations at this timestep
  // The current tile of variable v, one interval per spatial iteration over v (outer
  // spatial loops first), empty sub-tiles left out: tile()[v] before it is merged.
  std::vector<Interval> spatial_tiles(std::size_t v) const;

  // As a source of its own: the Iterations (one per spatial iteration) of the computing
  // timesteps before `until`.
  std::span<const Iteration> next_batch(std::int64_t until = kEndOfTime);
  std::span<const Iteration> next_values() { return next_batch(kEndOfTime); }

 private:
  // The handshake with Project, which caches what it derives from the tiles.
  friend class Project;
  // n steps of the innermost temporal loop, where its digit has room for n - 1 of them
  // without a carry (the last may carry).
  void advance_innermost(std::int64_t n);
  // The outermost odometer level that moved since the last acknowledge_changes() (0
  // after a seek): a consumer caching what it derives from tiles redoes what depends on
  // the variables of that level and inside it.
  std::size_t changed_level() const { return changed_; }
  void acknowledge_changes() { changed_ = odometer_.levels(); }
  std::size_t levels() const { return odometer_.levels(); }
  // The innermost temporal level whose loop tiles v (-1: no temporal loop does).
  int deepest_level(std::size_t v) const { return deepest_level_[v]; }

  // The next steps of the innermost temporal loop over which the tile only translates:
  // variable `variable` (-1: the leaf lacks the loop's variable) moves by `shift`
  // each step, every other variable stays, and timesteps advance by `period`. Whatever
  // is derived from the tile translates with it, so a consumer can copy it forward.
  struct Translation {
    std::int64_t steps = 0;
    int variable = -1;
    std::int64_t shift = 0;
    std::int64_t period = 0;
  };
  Translation translation() const;

  void plan();
  void retile(std::size_t changed_level);
  void tile_variable(std::size_t v);
  // The tiles of variable v after the first `loops` loops over it: one per spatial
  // iteration, unmerged, in order; empty ones left out.
  std::vector<Interval> tiles_of(std::size_t v, std::size_t loops) const;
  void append_iterations();

  const Schedule* schedule_ = nullptr;
  StreamContext context_;
  std::size_t leaf_ = 0;
  TimeOdometer odometer_;
  std::vector<std::vector<const LoopLevel*>> chains_;  // per variable: loops over it
  std::vector<int> deepest_level_;         // per variable
  std::vector<bool> simple_;               // per variable: no spatial loop tiles it
  std::vector<std::vector<int>> level_vars_;  // per odometer level: variables to re-tile
  std::vector<IntervalSet> tile_;          // per variable
  std::vector<Interval> parent_;           // simple variables: the tile before the innermost loop
  const LoopLevel* innermost_ = nullptr;   // the innermost temporal loop
  bool translatable_ = false;              // its variable is lacking or simple
  bool empty_ = true;
  std::size_t changed_ = 0;
  std::vector<Iteration> iterations_;      // next_batch's buffer; entries reused
  std::size_t n_iterations_ = 0;
};

// One LeafIterations per leaf of the schedule, in tree order.
LeafSet<LeafIterations> leaves(const Schedule& schedule);

}  // namespace looptrace
