// `looptrace iterations`: per timestep, each computing leaf's rank-variable tile origins
// (one JSON line per spatial iteration), in time order.
#include <unistd.h>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/iterations.hpp"
#include "../sinks/formats.hpp"
#include "looptrace/sinks/output.hpp"

namespace looptrace::cli {

namespace {

// {"t": 5, "einsum": "Matmul0", "origin": {"m": 4, "n0": 0}}
void write_iteration(const Iteration& it, OutputBuffer& out) {
  out.write("{\"t\": ");
  out.write_int(it.timestep);
  out.write(", \"einsum\": ");
  out.write(json_quote(it.leaf->einsum));
  out.write(", \"origin\": {");
  for (std::size_t v = 0; v < it.tile.size(); ++v) {
    if (v > 0) out.write(", ");
    out.write(json_quote(it.leaf->variables[v]));
    out.write(": ");
    out.write_int(it.origin(v));
  }
  out.write("}}\n");
}

}  // namespace

void add_iterations_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "iterations", "Stream each computing leaf's tile origins per timestep as JSON Lines");
  auto args = std::make_shared<CommonArgs>();
  // No tensor is projected (no --tensors), but a timestep's spatial instances are
  // held: --max-tile-points bounds them.
  args->add_to(*cmd, offer_max_tile_points);
  cmd->callback([args] {
    Schedule schedule = args->load();
    const TraceOptions options = args->resolved();
    IterationStream stream(schedule, options);
    OutputBuffer out(STDOUT_FILENO);
    std::uint64_t written = 0;
    for (const Iteration& it : stream) write_iteration(it, out), ++written;
    out.flush();
    if (written == 0) note_nothing_selected(schedule, options, "no iteration is listed");
  });
}

}  // namespace looptrace::cli
