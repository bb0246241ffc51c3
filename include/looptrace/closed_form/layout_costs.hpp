// What a layout costs a memory level L (SEMANTICS "Layouts"), from its transfer trace
// (the requests between L and its children, stages/transfers.hpp) under that layout:
// per tensor, the lines its children's fills and drains take against the fewest a tile
// of that size could need (ceil(bytes / line) per fill or drain, as if it lay in
// contiguous aligned lines); for a level with banks (the layout file's `banks:` and
// `bank_bytes:`; line `a` is in bank (a / bank_bytes) mod banks), the cycles each tile
// needs at L's ports (the most requests any one bank gets for it; one request per bank
// a cycle) against the fewest (ceil(lines / banks)), and the most requests one bank gets
// in one timestep.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace looptrace {

struct TensorLayoutCost {
  std::string tensor;
  std::int64_t fill_lines = 0, drain_lines = 0;  // requests under the layout
  // The fewest: sum over fills (drains) of ceil(bytes / line); none where a child's
  // tiles are not boxes (the trace is then enumerated; the counts above stay exact).
  std::optional<std::int64_t> min_fill_lines, min_drain_lines;
  // With banks: sum over the fills and drains of the most requests one bank gets, the
  // fewest that many lines could take, and the most one tile takes.
  std::int64_t bank_cycles = 0, min_bank_cycles = 0, max_tile_cycles = 0;
};

struct LevelLayoutCost {
  std::int64_t line_bytes = 64;
  std::int64_t banks = 0, bank_bytes = 0;  // banks 0: the level has none given
  std::vector<TensorLayoutCost> tensors;   // the tensors its children move, in first-request order
  std::int64_t peak_bank_requests = 0;     // the most requests one bank gets in one timestep
  std::int64_t peak_bank_timestep = -1;
  std::string enumerated;                  // why the trace followed the accesses (empty: closed form)
};

}  // namespace looptrace
