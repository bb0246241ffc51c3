// A layout file (SEMANTICS "Layouts"): where each tensor's elements live in a memory
// level, as written. Read on its own (`--layout FILE`), so AccelForge's files stay as
// they are. Two forms:
//
//     layout:                      # looptrace's
//       align: 4096
//       tensors:
//         W: {order: [N, K], block: {K: 8}, block_order: [K, N], pad: {N: 64}, base: 0x100000, align: 256}
//       levels:
//         GlobalBuffer: {banks: 8, bank_bytes: 16, tensors: {W: {block: {K: 4}}}}
//
//     layout:                      # Timeloop LayoutLoop's: a list of entries
//       - {target: GlobalBuffer, type: interline, factors: "K=4 N=8", permutation: "KN"}
//       - {target: GlobalBuffer, type: intraline, factors: "K=8 N=1", permutation: "KN"}
//
// What the file says is checked against the workload later (resolve_layouts in
// stages/layout.hpp): every entry keeps the file and line it came from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"

namespace looptrace {

// One tensor's layout at one level ("" = every level without its own).
struct TensorLayoutSpec {
  std::string tensor;
  std::string level;
  std::vector<std::string> order;        // outermost first; empty: the tensor's rank order
  std::vector<std::string> block_order;  // inside a block; empty: `order`
  std::vector<std::pair<std::string, std::int64_t>> block, pad;
  std::optional<std::uint64_t> base, align;
  SourceLocation where;                  // of the tensor's entry
  SourceLocation order_where, block_order_where, base_where;
};

// A level's banks: `banks` of `bank_bytes` each, interleaved (address a is in bank
// (a / bank_bytes) mod banks).
struct LevelBanks {
  std::string level;
  std::int64_t banks = 1;
  std::int64_t bank_bytes = 0;  // 0: not given (then the line size)
  SourceLocation where;
};

// One LayoutLoop entry pair of a target (type interline and intraline): permutation
// (written innermost first, one character per rank) and factors ("K=4 N=8").
struct TimeloopNest {
  std::string permutation;
  std::vector<std::pair<std::string, std::int64_t>> factors;
  bool given = false;
  SourceLocation where;
};
struct TimeloopLayout {
  std::string target;
  TimeloopNest interline, intraline;
};

struct LayoutSpec {
  std::string file;
  std::optional<std::uint64_t> align;
  std::vector<TensorLayoutSpec> tensors;  // in file order
  std::vector<LevelBanks> banks;
  std::vector<std::pair<std::string, SourceLocation>> levels;  // every level the file names
  std::vector<TimeloopLayout> timeloop;   // LayoutLoop's form (then `tensors` is empty)

  // The layout of (tensor with `ranks`, level): the level's own entry, else the
  // every-level one, else LayoutLoop's entries for the level translated; nullopt: the
  // default layout. Throws SpecError where LayoutLoop's form cannot name a rank.
  std::optional<TensorLayoutSpec> find(const std::string& tensor, const std::vector<std::string>& ranks,
                                       const std::string& level) const;
  const LevelBanks* banks_of(const std::string& level) const;
};

// Reads a layout file; throws SpecError naming the file and line (bad YAML, unknown
// keys, a rank named twice in `order`, a block or pad below 1, a bad address).
LayoutSpec load_layout(const std::string& path);
LayoutSpec parse_layout(const std::string& text, const std::string& file);

}  // namespace looptrace
