// The workload: a cascade of Einsums, each a set of tensor accesses through affine
// projections of its rank variables.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/expression.hpp"

namespace looptrace {

struct TensorAccess {
  std::string tensor;
  std::vector<std::string> ranks;      // the tensor's rank names, one per projection entry
  std::vector<AffineExpr> projection;  // coordinate along each rank
  bool is_output = false;
  SourceLocation where;
  std::optional<std::int64_t> bits_per_value;  // this access's own, which wins
};

// `0 <= expr` for every entry of `bounds`, with where the text came from.
struct Constraint {
  std::string text;
  std::vector<AffineExpr> bounds;
  SourceLocation where;
};

// One of AccelForge's renames of an Einsum's tensors: in that Einsum, `name` is the
// tensor set `source` evaluates to (`weight: ~(input | output)`). The arch's attributes
// (`size: weight.bits_per_value if weight else 0`) are evaluated with them.
struct TensorRename {
  std::string name;
  std::string source;  // a set expression: Inputs, Outputs, `~(input | output)`, a tensor
  std::optional<std::string> expected_count;  // an expression: `1 if len(All) == 3 else 0`
  SourceLocation where;
};

struct Einsum {
  std::string name;
  std::vector<TensorAccess> accesses;      // in the order written (concise: output last)
  std::vector<std::string> rank_variables;  // those the projections use, first use first
  std::vector<Constraint> constraints;      // the Einsum's own iteration_space_shape
  std::map<std::string, std::int64_t> rank_sizes;  // the Einsum's own rank_sizes
  std::vector<TensorRename> renames;  // its own (`renames: {input: Q}`), which win over the defaults
  SourceLocation where;

  bool has_rank_variable(const std::string& v) const;
};

// As the front end reads it (AccelForge's Workload._validate): Einsum names are unique
// and every access of a tensor names the same ranks, in the same order.
struct Workload {
  std::vector<Einsum> einsums;
  std::vector<Constraint> constraints;  // workload-level iteration_space_shape
  std::map<std::string, std::int64_t> rank_sizes;
  // As written: (key, bits) with the key "All", a tensor name, "A | B" or "Other" (every
  // tensor no other key names, as AccelForge reads it; "" for a plain number: All).
  std::vector<std::pair<std::string, std::int64_t>> bits_per_value;
  // The spec's `renames: {einsums: [{name: default, tensor_accesses: ...}]}`: what every
  // Einsum's renames are, unless its own name the same.
  std::vector<TensorRename> default_renames;
  SourceLocation where;

  const Einsum* find_einsum(const std::string& name) const;
  // A tensor's bits per value: an access's own, then its name, a group naming it,
  // All, Other.
  std::optional<std::int64_t> bits_per_value_of(const std::string& tensor) const;
};

// The names a bits_per_value key lists: "A | B" gives A and B, "A" gives A (trimmed).
std::vector<std::string> bits_key_names(const std::string& key);

// The rank-variable box of one Einsum: variable v runs over [0, extent[v]).
struct EinsumBox {
  std::vector<std::string> variables;  // = Einsum::rank_variables
  std::vector<std::int64_t> extent;
};

// The extent of each rank variable: max - min + 1 over the box hull of all the
// constraints that apply to the Einsum (its own, the workload's on its variables, and
// rank_sizes on its access ranks; every variable is also >= 0). Throws SpecError for
// an unbounded or empty variable.
EinsumBox einsum_box(const Workload& workload, const Einsum& einsum);

}  // namespace looptrace
