// The summary's counting source (to be replaced by closed-form counts): one leaf's accesses, timestep by timestep, in the leaf's own time order.
// The odometer advances incrementally; only the rank variables whose loops moved are
// re-tiled, and only the tensor ranks that read them are re-projected. The tile image
// of each tensor is produced in ascending element order with duplicates removed
// (dedup within a timestep): by construction when the projection is separable, by a
// sort otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "looptrace/access.hpp"
#include "looptrace/stages/leaf_iterations.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/time_odometer.hpp"

namespace looptrace {


class LeafSource {
 public:
  // `enabled[k]` says whether the leaf's k-th tensor is traced (a tensor filter).
  LeafSource(const Schedule& schedule, const LeafSchedule& leaf, std::vector<bool> enabled,
             std::int64_t max_tile_points);

  void seek(std::int64_t t);  // to the first timestep >= t
  void advance();
  bool done() const { return odometer_.done(); }
  std::int64_t timestep() const { return odometer_.time(); }
  const LeafSchedule& leaf() const { return *leaf_; }

  // Whether the leaf computes at this timestep (its tile is not empty).
  bool computes() const { return !empty_; }
  // Appends this timestep's accesses, tensor by tensor in access order.
  void emit(std::vector<AccessRecord>& out);
  // Adds the number of accesses of this timestep to counts[trace].
  void count(std::vector<std::int64_t>& counts);
  // Counts the timesteps from this one to the end of the innermost loop's run (or to
  // `limit`) and moves past them: in closed form when only the innermost loop's
  // variable moves and every traced rank reads it alone, else one timestep at a time.
  struct RunTally {
    std::int64_t computing = 0;  // timesteps at which the leaf computes
    std::int64_t first = -1, last = -1;  // the first and last of those
    std::int64_t points = 0;
  };
  RunTally count_run(std::vector<std::int64_t>& counts, std::int64_t limit);

  // The number of points (operations) of this timestep's tile.
  std::int64_t points() const;
  // The tile's coordinate set along each rank variable (for iteration traces).
  const std::vector<IntervalSet>& tile() const { return var_sets_; }
  // The current tile of variable v, one interval per spatial iteration over v (outer
  // spatial loops first), empty sub-tiles left out: tile()[v] before it is merged.
  std::vector<Interval> spatial_tiles(std::size_t v) const;

 private:
  struct TensorState {
    const LeafTensor* spec;
    const TensorInfo* info;
    bool enabled;
    std::vector<std::vector<std::pair<int, std::int64_t>>> rank_terms;  // [rank]: (variable, coefficient)
    std::vector<IntervalSet> rank_sets;   // separable: the image along each rank
    std::vector<std::int64_t> rank_cardinality;  // the size of each of rank_sets
    std::vector<std::int64_t> element_coefficient;  // non-separable: element is affine
    std::int64_t element_constant = 0;
    std::vector<int> used_variables;      // variables with a nonzero coefficient
    std::vector<std::int64_t> sorted;     // non-separable: this timestep's elements
    bool sorted_valid = false;
    std::int64_t size = 0;                // accesses at this timestep
  };

  void plan_refreshes();
  // The tiles of variable v after the first `loops` loops over it: one per spatial
  // iteration, unmerged, in order; empty ones left out.
  std::vector<Interval> tiles_of(std::size_t v, std::size_t loops) const;
  bool plan_closed_form_runs() const;
  RunTally count_step(std::vector<std::int64_t>& counts);
  void refresh(std::size_t changed_level);
  void tile_variable(std::size_t v);
  void project(TensorState& ts, std::size_t rank);
  void gather_sorted(TensorState& ts);
  void emit_separable(const TensorState& ts, AccessRecord* out) const;

  const Schedule* schedule_;
  const LeafSchedule* leaf_;
  TimeOdometer odometer_;
  std::int64_t max_tile_points_;
  std::vector<std::vector<const LoopLevel*>> chains_;  // per variable: loops over it
  std::vector<int> deepest_level_;       // per variable: its innermost temporal level
  std::vector<IntervalSet> var_sets_;    // per variable: the current tile
  const LoopLevel* innermost_ = nullptr;  // the innermost temporal loop
  bool closed_form_runs_ = false;
  std::vector<bool> simple_var_;         // per variable: no spatial loop tiles it
  std::vector<std::vector<int>> level_vars_;   // per odometer level: variables to re-tile
  std::vector<std::vector<std::pair<int, int>>> level_ranks_;  // (tensor, rank) to re-project
  std::vector<std::vector<int>> level_tensors_;  // tensors whose size to recompute
  std::vector<TensorState> tensors_;
  bool empty_ = false;
  bool stale_ = true;
  std::vector<std::int64_t> scratch_;
};

}  // namespace looptrace
