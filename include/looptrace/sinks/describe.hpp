// What a spec describes, as AccelForge reports it: each Einsum's rank variables (with
// extents) and tensors, each tensor's ranks and nominal shape (SEMANTICS "Accesses"),
// and with a mapping the compiled LoopTree: every node's kind, loop tiles, iteration
// counts and durations, storage levels, and n_timesteps. `looptrace describe` prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/frontend/load.hpp"

namespace looptrace {

struct DescribedEinsum {
  std::string name;
  std::vector<std::pair<std::string, std::int64_t>> rank_variables;  // (variable, extent), first use first
  std::vector<std::pair<std::string, bool>> tensors;                // (tensor, is output), access order
};

struct DescribedTensor {
  std::string name;
  std::vector<std::string> ranks;
  std::vector<std::int64_t> shape;  // nominal: the writers' image (the readers' if none writes it)
};

// One node of the LoopTree with what compiling it gives.
struct DescribedNode {
  NodeKind kind = NodeKind::Nested;
  std::string tag;  // as written: "Temporal", "Reservation", ...
  // Temporal, Spatial
  std::string rank_variable;
  std::int64_t tile_shape = 0;
  std::int64_t initial_tile_shape = 0;
  std::int64_t iterations = 0;          // how many tiles it cuts its given tile into
  std::int64_t iteration_duration = 0;  // timesteps one iteration lasts
  std::string name;                     // Spatial: its name
  // Storage
  std::string level;  // the component
  std::vector<std::string> tensors;
  // Compute
  std::string einsum;
  std::string component;
  // Every node: timesteps it lasts (a loop: all its iterations; a Storage: one window).
  std::int64_t duration = 0;
  std::vector<DescribedNode> children;
  SourceLocation where;
};

struct SpecDescription {
  std::vector<DescribedEinsum> einsums;  // workload order
  std::vector<DescribedTensor> tensors;  // order of first access
  std::optional<DescribedNode> mapping;  // the root Nested, when the spec has a mapping
  std::int64_t n_timesteps = 0;          // with a mapping
};

// Compiles the spec as every subcommand does (the workload alone without a mapping) and
// formats what the compiler worked out; throws SpecError as the compiler does.
SpecDescription describe_spec(const Spec& spec);

// {"einsums": [...], "tensors": {...}[, "mapping": {...}]}; `indent` < 0: one line.
std::string describe_json(const SpecDescription& d, int indent = 2);

// An indented tree a person reads.
std::string describe_text(const SpecDescription& d);

}  // namespace looptrace
