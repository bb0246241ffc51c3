// `looptrace trace`: every access, in time order, as JSON Lines, CSV or binary records.
#include <unistd.h>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/parallel_trace.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"
#include "progress.hpp"

namespace looptrace::cli {

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Stream every access in time order");
  auto args = std::make_shared<CommonArgs>();
  auto format = std::make_shared<std::string>("jsonl");
  args->add_to(*cmd);
  add_progress_flag(*cmd);
  cmd->add_option("--format", *format, "jsonl, csv or binary")
      ->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "csv", "binary"}));
  auto threads = std::make_shared<int>(1);
  cmd->add_option("--threads", *threads,
                  "Workers that format contiguous timestep ranges (the output is the same bytes)")
      ->capture_default_str()
      ->check(whole_number(1, 1024));
  cmd->callback([args, format, threads] {
    Schedule schedule = args->load();
    const TraceOptions options = args->resolved();
    if (*threads > 1) {  // looptrace/parallel_trace.hpp
      const TimeRange window = TimeSelection::from_options(options, schedule.n_timesteps).window;
      ProgressBar progress(window.to - window.from, "timesteps", /*streams_to_stdout=*/true);
      ParallelTraceOptions parallel;
      parallel.threads = *threads;
      parallel.progress = [&](std::int64_t t) { progress.update(t + 1 - window.from); };
      write_trace_parallel(schedule, options, *format, STDOUT_FILENO, parallel);
      progress.finish();
      return;
    }
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
