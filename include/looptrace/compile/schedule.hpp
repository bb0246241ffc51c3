// A LoopTree compiled once for tracing: durations, per-leaf loop levels, per-(leaf,
// tensor) affine projections and row-major strides, tensor shapes from the full
// schedule, and the tile-window structure of every storage level.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/arch.hpp"
#include "looptrace/compile/time_odometer.hpp"

namespace looptrace {

struct Spec;  // looptrace/frontend/load.hpp

// Names to indices: a sorted vector (the sinks, filters and loaders ask often; no nodes).
class NameIndex {
 public:
  int find(const std::string& name) const;  // -1 when absent
  void emplace(const std::string& name, int index);  // keeps the first index of a name

 private:
  std::vector<std::pair<std::string, int>> entries_;  // by name
};

struct TensorInfo {
  std::string name;
  std::vector<std::string> ranks;
  std::vector<std::int64_t> shape;    // per rank, covers every access of the full schedule
  std::vector<std::int64_t> strides;  // row-major: element = sum coords[r] * strides[r]
  std::int64_t size = 1;              // number of elements
  std::optional<std::int64_t> bits_per_value;  // from the workload, when it says
};

// One (Einsum, tensor) pair: the unit that accesses are attributed to.
struct TraceInfo {
  std::string einsum;
  std::string tensor;
  bool is_output = false;
  int einsum_index = 0;  // into Schedule::einsums
  int tensor_index = 0;  // into Schedule::tensors
};

// One loop on the path from the root to a leaf, outermost first.
struct LoopLevel {
  int variable = -1;  // index into the leaf's rank variables; -1: the leaf lacks it
  bool spatial = false;
  int time_level = -1;  // index into the leaf's TimeOdometer levels (temporal loops)
  std::int64_t count = 1;
  std::int64_t tile_shape = 1;
  std::int64_t initial_tile_shape = 1;
};

// How one leaf projects its points into one tensor.
struct LeafTensor {
  int trace = 0;                           // into Schedule::traces
  int tensor = 0;                          // into Schedule::tensors
  std::vector<std::vector<std::int64_t>> coefficients;  // [rank][leaf variable]
  std::vector<std::int64_t> constants;     // [rank]
  // Each leaf variable feeds at most one rank: the image of a tile is a product of
  // per-rank sets, emitted in row-major order with no duplicates and no sort. When
  // false, the points are projected, sorted and deduplicated (decided here, once).
  bool separable = true;
};

struct LeafSchedule {
  int einsum_index = 0;
  std::string einsum;
  SourceLocation where;
  std::vector<std::string> variables;   // the Einsum's rank variables
  std::vector<std::int64_t> extent;     // per variable
  std::vector<LoopLevel> loops;         // temporal and spatial, outermost first
  std::int64_t time_base = 0;
  std::vector<TimeLevel> time_levels;   // the temporal loops
  std::vector<LeafTensor> tensors;      // in the Einsum's access order
  std::vector<int> storages;  // the Storage nodes above it, outermost first (Schedule::storages)
  std::vector<std::uint32_t> loop_ids;  // its temporal loops, as StorageWindows::loop_ids names them

  TimeOdometer odometer() const { return {time_base, time_levels}; }
};

// A Storage node with a component: windows start at every combination of the temporal
// iterations outside it and last `duration`.
struct StorageWindows {
  std::string level;
  std::vector<std::string> tensors;  // as listed (a tensor may be held but never traced)
  std::int64_t time_base = 0;
  std::vector<TimeLevel> time_levels;
  std::int64_t duration = 0;
  SourceLocation where;
  // The temporal loops above it (one per time level), as ids that nodes under the
  // same loop share: how far two nodes' window odometers are one.
  std::vector<std::uint32_t> loop_ids;
  // The instances of the arch's level that hold its tile together: the product of the
  // !Spatial loops above it (the tile is their union; the arch's size is per instance).
  std::int64_t instances = 1;
  // How many loops (temporal and spatial) are above it: the first ones of every leaf's
  // `loops` below it.
  std::size_t loops_above = 0;

  TimeOdometer starts() const { return {time_base, time_levels}; }
  bool holds(const std::string& tensor) const;
};

struct Schedule {
  std::int64_t n_timesteps = 0;
  std::vector<std::string> einsums;   // workload order
  std::vector<TensorInfo> tensors;    // order of first trace
  std::vector<TraceInfo> traces;      // tree order, then access order
  std::vector<LeafSchedule> leaves;   // tree order
  std::vector<std::string> memory_levels;  // tree order
  std::vector<StorageWindows> storages;    // tree order
  std::vector<std::pair<std::string, ArchMemory>> memories;  // the arch's !Memory sizes, by level name

  NameIndex tensor_index, einsum_index;
  int find_tensor(const std::string& name) const;  // -1 when absent
  int find_einsum(const std::string& name) const;
  const ArchMemory* memory(const std::string& level) const;  // nullptr: not an !Memory of the arch

  // The Storage node nearest above `leaf` that holds `tensor` at `level` (any level if
  // empty), or -1. Throws SpecError when two leaves of the trace's Einsum disagree.
  int holder(std::size_t trace, const std::string& level = {}) const;
  // The Storage node nearest above `storage` that holds `tensor`: where its fills come
  // from and its drains go; -1 when `storage` is the tensor's home.
  int parent(std::size_t storage, const std::string& tensor) const;
};

// Checks what tracing needs (defined Einsums and tensors, loops over rank variables
// the Einsum has, no 64-bit overflow), over every Einsum's box and every node (the
// branches no path reaches too: every subcommand checks alike), and throws SpecError
// naming the node otherwise.
Schedule compile_schedule(const Spec& spec);

// Refuses (SpecError at the Compute node, naming the !Spatial loop) a leaf of one of
// `einsums` (empty: all) whose spatial loops give more than `max_tile_points`
// instances: each instance holds at least one point of one timestep's tile, and the
// stages keep a timestep's instances in memory. Call it before tracing a file.
void check_spatial_instances(const Schedule& schedule, std::int64_t max_tile_points,
                             const std::vector<std::string>& einsums = {});

}  // namespace looptrace
