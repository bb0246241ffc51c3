// Warping (Morelli and Reineke, PLDI 2022) for `looptrace cache` over the trace: where
// a temporal loop's iterations are its first one translated (each tensor by its own
// stride), a cache that ends a block of iterations in the state it began it, every line
// shifted by that translation, repeats the block's outcomes for as long as the loop
// goes on; the blocks left are counted and the state shifted, not simulated. Each shift
// is taken only after comparing two states, never assumed. Internal (cache_run.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/cache.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/stages/layout.hpp"

namespace looptrace {

// Runs `model` (fresh) over the line accesses of the trace `o` selects (as
// trace_runs_pipeline | cache_lines(line_bytes, map, true) gives them), warping where it
// can. Returns false, having run nothing, when it cannot warp anywhere (a shard or a
// sample, an engine whose state it cannot shift, a layout that is not row-major, no
// loop whose iterations translate); the caller then simulates plainly.
bool warp_trace(const Schedule& schedule, const TraceOptions& o, const AddressMap& map, std::uint64_t line_bytes,
                CacheModel& model, WarpStats& stats);

// The same for a stream of line accesses that cannot be cut at a timestep (the requests
// of `--source transfers:L`, where a window cut by --from is fetched again): it is read
// once, in order (`next` gives its batches, empty at its end), and a block is counted
// instead of simulated only once every access of it was seen to be the recorded
// block's, shifted by the loop's step (each block is checked, not assumed, as its
// states are compared); a block that differs is simulated from where it did. Returns
// false, having read nothing, when it cannot warp anywhere.
bool warp_stream(const Schedule& schedule, const TraceOptions& o, const AddressMap& map, std::uint64_t line_bytes,
                 const std::function<std::span<const LineAccess>()>& next, CacheModel& model, WarpStats& stats);

}  // namespace looptrace
