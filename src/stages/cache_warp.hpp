// Warping (Morelli and Reineke, PLDI 2022) for `looptrace cache` over the trace: where
// a temporal loop's iterations are its first one translated (each tensor by its own
// stride), a cache that ends a block of iterations in the state it began it, every line
// shifted by that translation, repeats the block's outcomes for as long as the loop
// goes on; the blocks left are counted and the state shifted, not simulated. Each shift
// is taken only after comparing two states, never assumed. Internal (cache_run.cpp).
#pragma once

#include <cstdint>

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

}  // namespace looptrace
