// `looptrace summary`: one JSON object with everything but the accesses.
#include <unistd.h>

#include "common.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/summary.hpp"

namespace looptrace::cli {

void add_summary_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("summary", "Print the trace's counts, spans and tile windows as JSON");
  auto args = std::make_shared<CommonArgs>();
  args->add_to(*cmd);
  cmd->callback([args] {
    Schedule schedule = args->load();
    TraceSummary summary = summarize(schedule, args->resolved());
    OutputBuffer out(STDOUT_FILENO);
    out.write(summary_json(summary, schedule).dump());
    out.put('\n');
    out.flush();
  });
}

}  // namespace looptrace::cli
