// `looptrace trace`: every access, in time order, as JSON Lines, CSV or binary records.
#include <unistd.h>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"
#include "progress.hpp"

namespace looptrace::cli {

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Stream every access in time order");
  auto args = std::make_shared<CommonArgs>();
  auto format = std::make_shared<std::string>("jsonl");
  args->add_to(*cmd);
  cmd->add_option("--format", *format, "jsonl, csv or binary")
      ->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "csv", "binary"}));
  cmd->callback([args, format] {
    Schedule schedule = args->load();
    const TraceOptions options = args->resolved();
    AccessStream stream(schedule, options);
    OutputBuffer out(STDOUT_FILENO);
    auto sink = make_sink(*format, schedule, out);
    const TimeRange window = stream.selection().window;
    ProgressBar progress(window.to - window.from, "timesteps", /*streams_to_stdout=*/true);
    std::uint64_t written = 0;
    sink->begin();
    for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch()) {
      sink->write(batch);
      written += batch.size();
      progress.update(batch.back().timestep + 1 - window.from);
    }
    sink->end();
    out.flush();
    progress.finish();
    if (written == 0) note_nothing_selected(schedule, options, "the trace is empty");
  });
}

}  // namespace looptrace::cli
