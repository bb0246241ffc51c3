// What the schedule keeps of the arch: its memory levels' sizes and spatial fanouts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/support/error.hpp"

namespace looptrace {

// A size evaluated as AccelForge evaluates the arch for one Einsum (its tensor sets and
// renames: `weight.bits_per_value if weight else 0`).
struct EinsumSize {
  std::string einsum;
  double size_bits = 0;
  std::vector<std::string> bits_of;  // the tensors whose bits_per_value gave it ("weight" = WQ)
};

// A memory level of the arch (an `!Memory` node) and its size in bits: a number, `inf`
// or an expression of numbers; or, when the size names the workload's tensor sets, one
// size per Einsum; or neither, with the reason.
struct ArchMemory {
  std::string size_text;
  std::optional<double> size_bits;
  std::vector<EinsumSize> per_einsum;  // in the workload's order, when size_bits is not given
  std::string unevaluated;             // why neither was evaluated
  SourceLocation where;
  // `extra_attributes_for_component_model: {n_banks: N}`, when a whole number: the banks a
  // layout's costs count (a layout file's `banks:` wins).
  std::optional<std::int64_t> banks;
};

// A spatial dimension of a component (`spatial: [{name: X, fanout: 4}]`): the !Spatial
// loops over it under one another may give at most `fanout` instances together.
struct ArchFanout {
  std::string component;
  std::string name;
  std::int64_t fanout = 1;
  SourceLocation where;  // of the fanout value
};

}  // namespace looptrace
