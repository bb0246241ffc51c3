// What part of a trace to produce: filters and a selection of timesteps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace looptrace {

// The default bound on one timestep's records for one tensor (a batch holds a tile).
inline constexpr std::int64_t kDefaultMaxTilePoints = 4'000'000;

struct TraceOptions {
  std::vector<std::string> tensors;  // empty: every tensor
  std::vector<std::string> einsums;  // empty: every Einsum
  std::optional<std::int64_t> max_timesteps;  // the exact prefix [0, N)
  std::optional<std::int64_t> from, to;       // the window [from, to)
  std::optional<std::int64_t> sample_timesteps;  // K distinct timesteps of the window
  std::uint64_t seed = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> shard;  // (index, count)
  // Bounds one timestep's tile for one tensor (dedup and batches hold one tile).
  std::int64_t max_tile_points = kDefaultMaxTilePoints;
};

}  // namespace looptrace
