// `looptrace trace`: every access, in time order, as JSON Lines, CSV or binary records.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "common.hpp"
#include "looptrace/parallel_trace.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"

namespace looptrace::cli {

namespace {

// Percent of the timestep window done, on stderr, only when stderr is a terminal and
// the run lasts more than a second (never in pipes, logs or CI).
class ProgressBar {
 public:
  explicit ProgressBar(TimeRange window)
      : window_(window), enabled_(isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_(start_) {}

  void update(std::int64_t timestep) {
    if (!enabled_ || ++calls_ % 256 != 0) return;
    auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    double done = window_.to > window_.from
                      ? double(timestep - window_.from) / double(window_.to - window_.from) : 1.0;
    int filled = int(done * 30);
    std::fprintf(stderr, "\r[%-30s] %5.1f%%  t=%lld", std::string(std::size_t(filled), '#').c_str(),
                 100.0 * done, static_cast<long long>(timestep));
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  using Clock = std::chrono::steady_clock;
  TimeRange window_;
  bool enabled_;
  Clock::time_point start_, last_;
  std::uint64_t calls_ = 0;
  bool shown_ = false;
};

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Stream every access in time order");
  auto args = std::make_shared<CommonArgs>();
  auto format = std::make_shared<std::string>("jsonl");
  args->add_to(*cmd);
  cmd->add_option("--format", *format, "jsonl, csv or binary")
      ->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "csv", "binary"}));
  auto threads = std::make_shared<int>(1);
  cmd->add_option("--threads", *threads,
                  "Workers that format contiguous timestep ranges (the output is the same bytes)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->callback([args, format, threads] {
    Schedule schedule = args->load();
    if (*threads > 1) {  // looptrace/parallel_trace.hpp
      const TraceOptions options = args->resolved();
      ProgressBar progress(TimeSelection::from_options(options, schedule.n_timesteps).window);
      ParallelTraceOptions parallel;
      parallel.threads = *threads;
      parallel.progress = [&](std::int64_t t) { progress.update(t); };
      write_trace_parallel(schedule, options, *format, STDOUT_FILENO, parallel);
      progress.finish();
      return;
    }
    AccessStream stream(schedule, args->resolved());
    OutputBuffer out(STDOUT_FILENO);
    auto sink = make_sink(*format, schedule, out);
    ProgressBar progress(stream.selection().window);
    sink->begin();
    for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch()) {
      sink->write(batch);
      progress.update(batch.back().timestep);
    }
    sink->end();
    out.flush();
    progress.finish();
  });
}

}  // namespace looptrace::cli
