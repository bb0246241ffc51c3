// `looptrace iterations`: per timestep, each computing leaf's rank-variable tile origins
// (one JSON line per spatial iteration), in time order.
#include <unistd.h>

#include "common.hpp"
#include "looptrace/iterations.hpp"
#include "looptrace/sinks/formats.hpp"
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
  args->add_to(*cmd);
  cmd->callback([args] {
    Schedule schedule = args->load();
    IterationStream stream(schedule, args->resolved());
    OutputBuffer out(STDOUT_FILENO);
    for (const Iteration& it : stream) write_iteration(it, out);
    out.flush();
  });
}

}  // namespace looptrace::cli
