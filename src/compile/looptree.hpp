// How the compiler and describe walk a LoopTree: which children are branches, and
// where a Nested node goes on. Internal (not installed).
#pragma once

#include "looptrace/frontend/mapping.hpp"

namespace looptrace::looptree {

// A child that a Nested node continues into (the first one), or that a split runs.
inline bool is_branch(const MappingNode& c) {
  return c.kind == NodeKind::Nested || c.is_split() || c.kind == NodeKind::Compute;
}

inline const MappingNode* continuation_of(const MappingNode& nested) {
  for (const auto& c : nested.children)
    if (is_branch(c)) return &c;
  return nullptr;
}

// The first Compute node below `node` (tree order), or null.
inline const MappingNode* first_compute(const MappingNode* node) {
  if (!node) return nullptr;
  if (node->kind == NodeKind::Compute) return node;
  if (node->kind == NodeKind::Nested) return first_compute(continuation_of(*node));
  if (node->is_split())
    for (const auto& c : node->children)
      if (const MappingNode* f = first_compute(&c)) return f;
  return nullptr;
}

}  // namespace looptrace::looptree
