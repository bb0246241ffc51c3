// How the compiler and describe walk a LoopTree: which children are branches, and
// where a Nested node goes on. Internal (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// Counts the loops of a Nested node, `count(loop, compute, enclosing)` each with the
// loops above it on `enclosing`, and pushes them there; returns how many it pushed.
template <class Counts, class Count>
std::size_t enter_loops(const MappingNode& node, const MappingNode* compute,
                        std::vector<const MappingNode*>& enclosing, Counts& counts, Count count) {
  std::size_t pushed = 0;
  for (const auto& c : node.children) {
    if (!c.is_loop()) continue;
    counts[&c] = count(c, compute, enclosing);
    enclosing.push_back(&c);
    ++pushed;
  }
  return pushed;
}

// after[k]: the timesteps from the start of child k of a Nested node to its end, for
// one iteration of the loops before k: what follows each point (`inner`) times the
// counts of the temporal loops from k on. (Their product was checked when measured.)
template <class Counts>
std::vector<std::int64_t> durations_after(const MappingNode& node, std::int64_t inner, const Counts& counts) {
  std::vector<std::int64_t> after(node.children.size() + 1, inner);
  for (std::size_t k = node.children.size(); k-- > 0;) {
    after[k] = after[k + 1];
    if (node.children[k].kind == NodeKind::Temporal) after[k] *= counts.at(&node.children[k]);
  }
  return after;
}

}  // namespace looptrace::looptree
