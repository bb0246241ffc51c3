// What the schedule keeps of the arch: its memory levels' sizes and spatial fanouts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "looptrace/support/error.hpp"

namespace looptrace {

// A memory level of the arch (an `!Memory` node) and its size in bits, when the size
// is a number, `inf` or an expression of numbers; a size that needs AccelForge's
// per-tensor context (`weight.bits_per_value if weight else 0`) stays unevaluated.
struct ArchMemory {
  std::string size_text;
  std::optional<double> size_bits;
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
