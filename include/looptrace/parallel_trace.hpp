// A trace formatted by several threads: workers take contiguous timestep ranges of the
// selection (as --shard does) and format them into private buffers; the buffers are
// written in order, so the bytes equal those of one thread. The window is cut into
// pieces of about `chunk_bytes` of output (accesses counted in closed form), more
// pieces than threads, and at most `threads + 2` of them are held at once, so memory
// stays bounded whatever the trace length.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"  // what a caller compiles the schedule from
#include "looptrace/sinks/output.hpp"

namespace looptrace {

struct ParallelTraceOptions {
  int threads = 2;
  std::size_t chunk_bytes = std::size_t(4) << 20;
  // Called from the calling thread after each piece is written, with the last
  // timestep the piece covered.
  std::function<void(std::int64_t timestep)> progress;
};

// Writes the trace of `options` in `format` ("jsonl", "csv", "binary"), header
// included, to the file descriptor `fd`. Throws SpecError for bad options (before
// writing anything) and for a tile past max_tile_points (after writing what comes
// before it), BrokenPipe when the reader goes away.
void write_trace_parallel(const Schedule& schedule, const TraceOptions& options,
                          const std::string& format, int fd,
                          const ParallelTraceOptions& parallel = {});

}  // namespace looptrace
