// Movement counted per instance, and Timeloop's convention (README "Per instance" and
// "Timeloop's convention"), in closed form: per instance of a Storage node a window's
// tile is a box, the iterations of the loops above the node fixed, its !Spatial ones
// included. Internal (not installed).
#pragma once

#include "looptrace/closed_form/movement.hpp"

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

}  // namespace looptrace
