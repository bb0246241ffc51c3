// What compiling gives per Einsum, tensor and LoopTree node, kept in one table for
// describe (which only formats it) instead of being worked out again. Internal (not
// installed).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"

namespace looptrace {

// A tensor as the workload alone gives it (SEMANTICS "Accesses"): the nominal shape is
// the image of the writers' boxes, intersected (the readers' if none writes it).
struct NominalTensor {
  std::string name;
  std::vector<std::string> ranks;
  std::vector<std::int64_t> shape;
};

struct WorkloadTable {
  std::vector<EinsumBox> boxes;        // per Einsum, workload order
  std::vector<NominalTensor> tensors;  // order of first access
  NameIndex tensor_index;              // name -> index into tensors
};

// One LoopTree node compiled (SEMANTICS "Time").
struct NodeFigures {
  // Timesteps: a Compute 1; a Nested or split its own; a temporal loop all its
  // iterations, a spatial one a single iteration; a Storage one window; ignored nodes 0.
  std::int64_t duration = 0;
  // Loops only.
  std::int64_t iterations = 0;          // how many tiles it cuts its given tile into
  std::int64_t iteration_duration = 0;  // timesteps one iteration lasts
  std::int64_t tile_shape = 0;          // as written (the cut caps it, tiling.hpp)
  std::int64_t initial_tile_shape = 0;  // as written, tile_shape when not given
};

struct LoopTreeTable {
  WorkloadTable workload;
  // Every node of the mapping, the branches of a Nested node after its continuation
  // too (no path reaches them; describe shows them).
  std::unordered_map<const MappingNode*, NodeFigures> nodes;
};

// The workload's part: each Einsum's box and each tensor's nominal shape. Throws
// SpecError for an unbounded rank variable or a projection that overflows.
WorkloadTable compile_workload(const Workload& workload);

// compile_schedule, keeping its table.
Schedule compile_schedule(const Spec& spec, LoopTreeTable& table);

}  // namespace looptrace
