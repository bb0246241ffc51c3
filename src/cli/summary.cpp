// `looptrace summary`: one JSON object with everything but the accesses.
#include <unistd.h>

#include <optional>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/closed_form/summary.hpp"
#include "progress.hpp"

namespace looptrace::cli {

void add_summary_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("summary", "Print the trace's counts, spans and tile windows as JSON");
  auto args = std::make_shared<CommonArgs>();
  auto windows = std::make_shared<std::string>("full");
  auto summary = std::make_shared<SummaryOptions>();
  args->add_to(*cmd);
  add_progress_flag(*cmd);
  cmd->add_option("--windows", *windows,
                  "Tile windows: full (every [start, end]), compact ({start, length, period, count} "
                  "runs) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "compact", "none"}));
  cmd->add_option("--threads", summary->threads,
                  "Workers, each on a contiguous part of the selection (the output is the same)")
      ->capture_default_str()
      ->check(whole_number(1, 1024));
  cmd->callback([args, windows, summary] {
    Schedule schedule = args->load();
    summary->windows = *windows == "compact" ? WindowsForm::compact
                       : *windows == "none"  ? WindowsForm::none
                                             : WindowsForm::full;
    const TraceOptions options = args->resolved();
    TraceSummary result;
    {
      // Until summarize() reports how far it is, the elapsed time says it is alive;
      // then a bar with the rate and the time left (units: a time range of one leaf).
      std::optional<ProgressBar> waiting(std::in_place, 0, "summary: counting");
      waiting->tick_in_background();
      std::optional<ProgressBar> counted;
      summary->progress = [&](std::int64_t done, std::int64_t total) {
        if (waiting) waiting.reset();
        if (!counted) counted.emplace(total, "leaf ranges");
        counted->update(done);
      };
      result = summarize(schedule, options, *summary);
    }
    OutputBuffer out(STDOUT_FILENO);
    // Names come from user files: invalid UTF-8 becomes U+FFFD (as json_quote does).
    out.write(summary_json(result).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    out.put('\n');
    out.flush();
    std::int64_t accesses = 0;
    for (const auto& t : result.traces) accesses += t.n_accesses;
    if (accesses == 0) note_nothing_selected(schedule, options, "every count is 0");
  });
}

}  // namespace looptrace::cli
