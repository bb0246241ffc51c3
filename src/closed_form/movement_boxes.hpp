// Data movement in closed form (SEMANTICS "Data movement"), without visiting accesses.
// A window of Storage node S fixes the digits of the temporal loops above S; each leaf
// below S then runs every iteration of the loops inside S, so the points it touches in
// the window are a box (per rank variable, the tile the outer digits give, widened to
// the union of its inner sub-tiles) or a few box lattices (a !Spatial split tiled again
// in time: the same sub-tile of every instance's chunk, rows at the chunk's stride),
// and their image in a tensor is a box of ranges or rows too (a strided index gives
// rows). A window's tile is the union of its leaves' boxes, counted slab by slab with
// each lattice rank split in (row, place in the row); its fills are the elements of
// reading leaves not touched by an earlier leaf; its drains the union of the writers'.
// Windows are an odometer over the outer loops: along the innermost one, full-stride
// tiles translate every box alike, so a run of them moves the same amounts and is
// counted once. A window cut by the traced window (at most two per node) is the union
// of a few boxes of iterations (some digits fixed, one in a range, the rest free).
// Internal (not installed).
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "looptrace/closed_form/movement.hpp"
#include "looptrace/closed_form/window_runs.hpp"
#include "looptrace/interval.hpp"
#include "looptrace/options.hpp"
#include "looptrace/record.hpp"
#include "looptrace/compile/schedule.hpp"

namespace looptrace::movement_boxes {

// A node whose tiles are not unions of boxes and box lattices in time order (a rank
// whose lattices have strides of no small common multiple, a variable feeding two
// ranks, too many steps to order the reads and writes of one tensor): the caller
// enumerates it.
struct NotClosed {
  std::string reason;
};

// Coordinates along one rank: the rows [from + stride*i, to + stride*i) for i in
// [0, count). A range when count is 1; else 0 < to - from < stride (rows apart).
struct Rows {
  std::int64_t from = 0, to = 0, stride = 0, count = 1;

  Rows() = default;
  Rows(std::int64_t f, std::int64_t t, std::int64_t s = 0, std::int64_t n = 1) : from(f), to(t), stride(s), count(n) {}
  Rows(const Interval& i) : from(i.from), to(i.to) {}  // NOLINT: a range is one row

  bool empty() const { return from >= to || count <= 0; }
  bool range() const { return count == 1; }
  std::int64_t width() const { return from < to ? to - from : 0; }
  std::int64_t size() const { return width() * count; }  // the coordinates
  Interval row(std::int64_t i) const { return {from + stride * i, to + stride * i}; }
  Interval span() const { return {from, to + stride * (count - 1)}; }  // from the first to the last
  friend bool operator==(const Rows&, const Rows&) = default;
};

// A box of a tensor's elements: per rank, a range of coordinates or rows of them (a
// box lattice: a box repeated at a stride).
using Box = boost::container::small_vector<Rows, 6>;

// One window: its tile, fills and drains.
struct WindowTally {
  std::int64_t tile = 0, fills = 0, drains = 0;
};

// What one (node, tensor) moved over the seen windows.
struct SlotTotals {
  std::int64_t windows = 0, max_tile = 0, fills = 0, drains = 0;
};

// A stretch of time over which a node holds tiles of one total size (a window, or a
// run of back-to-back windows of equal tiles).
struct HeldSpan {
  TimeRange when;
  std::int64_t elements, bytes;
};

// Told each run of windows that move alike, in time order, with one tally per tensor
// asked for (what a timeline draws).
using TallyObserver = std::function<void(const WindowRun& windows, const std::vector<WindowTally>& tallies)>;

struct NodeTotals {
  std::vector<SlotTotals> slots;  // one per tensor asked for, in that order
  FootprintPeak peak, peak_bytes;  // the largest sum of the node's tiles over one window
};

// The movement of `storage`'s windows seen by `window`, for `tensors` (Schedule::tensors
// indices the node holds and the selection traces), counting only the leaves of
// `einsums` (all if empty). `bytes_per_value` per tensor (0: none; the byte peak is
// then meaningless). With `held`, also what it holds when (for a level whose nodes
// hold tiles at once), at most `max_held` entries. `partial_sums[k]`: tensor k's
// elements written first in a window but drained by an earlier one are read back
// (filled) too. `observe`, if given, is told every run of windows. Throws NotClosed, or
// SpecError past 2^63 - 1.
NodeTotals closed_form_node(const Schedule& schedule, std::uint32_t storage, const std::vector<std::uint32_t>& tensors,
                            const std::vector<std::string>& einsums, const std::vector<std::int64_t>& bytes_per_value,
                            const TimeRange& window, std::vector<HeldSpan>* held = nullptr,
                            std::size_t max_held = 0, const std::vector<bool>& partial_sums = {},
                            const TallyObserver& observe = {});

// A leaf's points at one timestep, per rank variable one range (its temporal digits
// fixed, its spatial loops whole); false when the leaf does not run at `t`. `odometer`
// is the leaf's (leaf.odometer(), made once and sought here). Throws NotClosed when
// they are not ranges (a strided tile).
using LeafRanges = boost::container::small_vector<Interval, 8>;
bool leaf_points_at(const LeafSchedule& leaf, TimeOdometer& odometer, std::int64_t t, LeafRanges& ranges);

// A leaf's points over its iterations in `clip`: one set of ranges per box of
// iterations (the union is the set), and the first and last timestep it runs there;
// false when it does not run there. Throws NotClosed as leaf_points_at.
struct LeafStretch {
  std::vector<LeafRanges> boxes;
  std::int64_t first = 0, last = 0;
};
bool leaf_points_in(const LeafSchedule& leaf, const TimeRange& clip, LeafStretch& out);

// The elements of tensor access `t` that those points touch, as a box of ranges; false
// when they are not one (a strided image).
bool image_box(const LeafTensor& t, const LeafRanges& ranges, Box& box);

// The number of elements in the union of `boxes` (empty ones allowed). Throws NotClosed
// past 64 distinct boxes (a lattice counting as its pieces), or where one rank's
// lattices have strides of no common multiple up to 2^20; SpecError past 2^63 - 1.
std::int64_t union_elements(const std::vector<Box>& boxes);

// The windows of one (Storage node, tensor) in time order, each with the elements it
// fills and drains as boxes of the tensor, ranks of ranges or of rows (boxes of one set
// may overlap: their union is the set), for transfer traces. Windows are clipped to
// `clip`; `from` skips the windows that end before it. With `partial_sums` (and a
// parent for the tensor), the fills also hold what a window writes first that an
// earlier window (from clip.from) drained: the read-backs. Where a writer and a reader
// interleave under loops inside the node or run at the same time, the fills come from
// the halving of time (FirstReads). The constructor throws NotClosed where some
// window's sets might not be such boxes (a variable feeding two ranks, lattices that
// might not nest), so that no window fails half-way through the stream.
class SlotWindows {
 public:
  SlotWindows(const Schedule& schedule, std::uint32_t storage, std::uint32_t tensor,
              const std::vector<std::string>& einsums, const TimeRange& clip, std::int64_t from,
              bool partial_sums = false);
  SlotWindows(SlotWindows&&) noexcept;
  SlotWindows& operator=(SlotWindows&&) noexcept;
  ~SlotWindows();

  bool done() const;
  const TimeRange& window() const;  // the current window, clipped
  const std::vector<Box>& fills() const;
  const std::vector<Box>& drains() const;
  void next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace looptrace::movement_boxes
