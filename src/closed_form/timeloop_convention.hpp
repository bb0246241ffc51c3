// Movement counted per instance, and Timeloop's convention (README "Per instance" and
// "Timeloop's convention"), in closed form: per instance of a Storage node a window's
// tile is a box, the iterations of the loops above the node fixed, its !Spatial ones
// included. Internal (not installed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "looptrace/closed_form/movement.hpp"
#include "movement_boxes.hpp"

namespace looptrace {

// Adds the PerInstance figures to the (level, tensor) entries of `report` that some node
// below !Spatial loops holds, for the whole run (nothing for a selection of time).
// Leaves them out of an entry where one instance's tile is not a box, or where leaves
// below one node both read and write the tensor.
void add_per_instance(const Schedule& schedule, const TraceOptions& options, MovementReport& report);

// `movement --convention timeloop`: per (level, tensor) the instances, one instance's
// largest tile, fills summed over the instances, and the level's reads and updates as
// Timeloop's nest analysis counts them; several accesses of a tensor below one node
// (Einsums) each as if its Einsum ran alone, summed. Throws SpecError for a selection
// of time, a tile that is not a box, or past 2^24 evaluations of one node.
MovementReport timeloop_movement(const Schedule& schedule, const TraceOptions& options);

// `transfers --convention timeloop`: the windows of one child (Storage node, tensor) of
// a level, in time order, each with the requests its parent serves as Timeloop counts
// them (README "Transfers in Timeloop's convention"). Per window and each access of
// the tensor below the node (an Einsum counted as if it ran alone): per distinct delta
// of a multicast group (the instances under one parent instance that differ only
// along !Spatial loops whose variable the access does not use), the part of the tile
// Timeloop's nest analysis counts as new: the delta that the window's representative
// iteration (the first, the second for the middle ones, the last two past a partial
// tile) gives, placed on the window's own tile. A read access asks for it at the
// window's start (reads); a written one sends it when the sending instance's tile next
// changes (writes, at the end of the window before, or of the last) and, at the
// window's start, reads back the elements of it that an update reached before under
// the same parent instance (every update but the first of an element: partial sums).
// Boxes come with a number: one request per line per number. Throws SpecError what the
// movement convention refuses, past 2^24 instances, and where a window's tile is empty
// or shorter than its representative's.
// What the updates of a child level's tensor reached, per parent node, parent instance
// and element: shared by the level's nodes (movement's parent figures count a level's
// updates against its parent's elements, whichever node sent them).
struct TimeloopUpdates;
std::shared_ptr<TimeloopUpdates> make_timeloop_updates();

class TimeloopSlot {
 public:
  // `updates`: shared with the other nodes of the child's level for the tensor (none:
  // its own).
  TimeloopSlot(const Schedule& schedule, std::uint32_t storage, std::uint32_t tensor,
               const std::vector<std::string>& einsums, std::shared_ptr<TimeloopUpdates> updates = {});
  TimeloopSlot(TimeloopSlot&&) noexcept;
  TimeloopSlot& operator=(TimeloopSlot&&) noexcept;
  ~TimeloopSlot();

  bool done() const;
  const TimeRange& window() const;
  const std::vector<movement_boxes::Box>& reads() const;  // at the window's start
  const std::vector<std::uint64_t>& read_groups() const;  // per box of reads()
  const std::vector<movement_boxes::Box>& writes() const;  // at its end
  const std::vector<std::uint64_t>& write_groups() const;
  void next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace looptrace
