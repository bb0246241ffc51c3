// `looptrace summary`: one JSON object with everything but the accesses.
#include <unistd.h>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/summary.hpp"
#include "progress.hpp"

namespace looptrace::cli {

void add_summary_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("summary", "Print the trace's counts, spans and tile windows as JSON");
  auto args = std::make_shared<CommonArgs>();
  args->add_to(*cmd);
  cmd->callback([args] {
    Schedule schedule = args->load();
    const TraceOptions options = args->resolved();
    TraceSummary summary;
    {
      // summarize() reports no count as it goes: the elapsed time says it is alive.
      ProgressBar progress(0, "summary: counting");
      progress.tick_in_background();
      summary = summarize(schedule, options);
    }
    OutputBuffer out(STDOUT_FILENO);
    // Names come from user files: invalid UTF-8 becomes U+FFFD (as json_quote does).
    out.write(summary_json(summary, schedule).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    out.put('\n');
    out.flush();
    std::int64_t accesses = 0;
    for (const auto& t : summary.traces) accesses += t.n_accesses;
    if (accesses == 0) note_nothing_selected(schedule, options, "every count is 0");
  });
}

}  // namespace looptrace::cli
