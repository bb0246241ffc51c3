// The mapping: a LoopTree of storage levels, loops, splits and compute leaves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/support/error.hpp"

namespace looptrace {

enum class NodeKind {
  Storage,     // a memory level holding a tile of each of `tensors`
  Temporal,    // a loop whose iterations follow each other in time
  Spatial,     // a loop whose iterations happen at the same time
  Compute,     // a leaf: one operation of `einsum` per point of its tile
  Nested,      // children one inside the next
  Sequential,  // branches one after the other
  Pipeline,    // branches that start together
  Parallel,    // branches that start together
  Ignored,     // Reservation, Toll, TextBox: no iteration
};

const char* node_kind_name(NodeKind kind);

struct MappingNode {
  NodeKind kind = NodeKind::Nested;
  std::string tag;  // as written, e.g. "Storage"
  // Storage
  std::vector<std::string> tensors;
  std::string component;
  // Temporal, Spatial
  std::string rank_variable;
  std::int64_t tile_shape = 0;
  std::optional<std::int64_t> initial_tile_shape;
  std::string name;
  // Compute
  std::string einsum;
  // Nested, Sequential, Pipeline, Parallel
  std::vector<MappingNode> children;
  SourceLocation where;

  bool is_loop() const { return kind == NodeKind::Temporal || kind == NodeKind::Spatial; }
  bool is_split() const {
    return kind == NodeKind::Sequential || kind == NodeKind::Pipeline || kind == NodeKind::Parallel;
  }
};

struct Mapping {
  MappingNode root;  // a Nested
};

}  // namespace looptrace
