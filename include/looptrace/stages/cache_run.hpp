// `looptrace cache` as a function: the source (the trace at the compute, or the
// transfer trace of a level) composed with cache_lines, reuse_distances (for the
// curve) and a cache hierarchy, pulled to the end. The CLI and Python both call it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/layout.hpp"
#include "looptrace/stages/cache.hpp"
#include "looptrace/stages/reuse_distances.hpp"

namespace looptrace {

struct CacheRunOptions {
  std::vector<CacheConfig> caches;  // innermost first
  std::string source = "trace";     // or "transfers:LEVEL"
  std::uint64_t align = 4096;       // of the default layout
  bool curve = false;
  // Fast-forward where a loop's blocks repeat in a shifted cache (one cache over the
  // trace, counts alone, no curve); false: simulate every line access.
  bool warp = true;
  // --layout FILE (null: row-major): for transfers:L its entries for L, exactly as
  // `transfers --level L --layout FILE`; for the trace its entries for every level.
  const LayoutSpec* layout = nullptr;
};

// What warping did: line accesses simulated, and those counted by a warp instead.
struct WarpStats {
  std::uint64_t simulated = 0;
  std::uint64_t skipped = 0;
  std::uint64_t warps = 0;  // warps taken
  std::uint64_t phase_warps = 0;  // ... of them at a phase into a block (the trace only)
  std::uint64_t probe_warps = 0;  // ... of those at a probe: inside a span of the block, left there
  // ... of them whose three-Cs shadow matched in its newest places only (the lines
  // below them no block touches)
  std::uint64_t partial_shadow_warps = 0;
  // ... of them whose states differ in places holding idle lines (WarpBlock::matches)
  std::uint64_t idle_place_warps = 0;
  std::uint64_t abandoned = 0;  // blocks of a stream that did not repeat the recorded one (transfers)
};

struct CacheRun {
  std::string source;
  std::vector<std::string> tensors;  // traced, in layout order
  std::vector<CacheReport> caches;
  std::optional<ReuseDistances> curve;
  std::optional<WarpStats> warp;  // when the run warped
  bool transfers_empty_level = false;  // --source transfers:L of a level with no child
  std::optional<AddressMap> addresses;  // source "trace": the layout the lines came from
};

// "1048576", "64KiB", "1MiB", "2GiB" (also "B", "KB" = KiB, "MB", "GB"); SpecError
// naming `what` otherwise.
std::uint64_t parse_bytes(const std::string& text, const std::string& what);
// "NAME=SIZE/W" (W a number or "full"), the rest of `base` kept.
CacheConfig parse_cache_spec(const std::string& text, const CacheConfig& base);

// Runs the caches over the selection of `o`; `each` (if given) sees every batch of the
// last cache's outcomes. Throws SpecError for a bad cache, source or selection.
CacheRun simulate_caches(const Schedule& schedule, const TraceOptions& o, const CacheRunOptions& options,
                         const std::function<void(std::span<const CacheAccess>)>& each = {});

}  // namespace looptrace
