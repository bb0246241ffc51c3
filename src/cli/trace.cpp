// `looptrace trace`: every access, in time order, as JSON Lines, CSV or binary records.
#include <unistd.h>

#include "common.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"

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
    AccessStream stream(schedule, args->resolved());
    OutputBuffer out(STDOUT_FILENO);
    auto sink = make_sink(*format, schedule, out);
    sink->begin();
    for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch())
      sink->write(batch);
    sink->end();
    out.flush();
  });
}

}  // namespace looptrace::cli
