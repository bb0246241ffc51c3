// `looptrace transfers`: the time-ordered requests between one memory level and its
// children, with byte addresses, for DRAM simulators.
#include <unistd.h>

#include <iostream>
#include <optional>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/transfer_formats.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace::cli {

namespace {
struct TransferArgs {
  std::string format = "jsonl";
  TransferOptions options;
  std::int64_t cycles_per_timestep = 1;
  std::optional<std::string> issue_rate;  // none: no limit
  std::string method = "closed-form";
  std::string layout;  // a layout file (SEMANTICS "Layouts"); empty: row-major
  std::string convention = "looptree";
};
}  // namespace

void add_transfers_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("transfers", "Stream the requests between a memory level and its children");
  auto args = std::make_shared<CommonArgs>();
  auto t = std::make_shared<TransferArgs>();
  args->add_to(*cmd);
  // Not required by CLI11: without it, the error lists the levels the files have.
  cmd->add_option("--level", t->options.level, "The memory level whose traffic with its children to trace (required)");
  cmd->add_option("--format", t->format, "jsonl, dramsim3 or ramulator2")
      ->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "dramsim3", "ramulator2"}));
  cmd->add_option("--line-bytes", t->options.line_bytes, "Coalesce requests to lines of this many bytes")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 30));
  cmd->add_option("--align", t->options.align, "Each tensor starts at a multiple of this many bytes")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 40));
  cmd->add_option("--cycles-per-timestep", t->cycles_per_timestep,
                  "dramsim3 (and jsonl with --issue-rate): a request at timestep t issues from cycle t * C on")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 20));
  cmd->add_option("--issue-rate", t->issue_rate,
                  "Requests per cycle, as a DMA engine issues them (N, N/K or a decimal): a timestep's requests "
                  "queue over cycles instead of all at its first; jsonl then gives each its \"cycle\"");
  cmd->add_option("--method", t->method,
                  "closed-form (write each child tile's lines as boxes) or enumerate (follow every access: the check)")
      ->capture_default_str()
      ->check(CLI::IsMember({"closed-form", "enumerate"}));
  cmd->add_flag("--partial-sums", t->options.partial_sums,
                "Also read back what a child window writes first after an earlier window of the child drained it "
                "(partial sums of a reduction above the child), at the window's start, as `movement --partial-sums` "
                "counts it");
  cmd->add_option("--layout", t->layout,
                  "A layout file: each tensor's order, blocks, padding and base in each level (README 'Layouts')");
  cmd->add_option("--convention", t->convention,
                  "looptree (SEMANTICS' fills and drains) or timeloop (the requests Timeloop's nest analysis counts: "
                  "per window and multicast group, the part of a tile it counts as new, an output's updates and "
                  "their read-backs; the counts of `movement --convention timeloop`)")
      ->capture_default_str()
      ->check(CLI::IsMember({"looptree", "timeloop"}));
  cmd->callback([args, t] {
    if (t->convention == "timeloop") t->options.convention = Convention::timeloop;
    t->options.enumerate = t->method == "enumerate";
    Schedule schedule = args->load();
    std::optional<LayoutSpec> layout;
    if (!t->layout.empty()) {
      layout = load_layout(t->layout);
      check_layout_names(schedule, *layout);
      t->options.layout = &*layout;
    }
    if (t->options.level.empty()) {
      std::string levels;
      for (const auto& l : schedule.memory_levels) levels += (levels.empty() ? "" : ", ") + l;
      throw SpecError("transfers needs --level L, the memory level whose traffic to trace: " +
                      (levels.empty() ? std::string("the mapping has no Storage node") : "one of " + levels));
    }
    IssueTiming timing{t->cycles_per_timestep};
    if (t->issue_rate) {
      if (t->format == "ramulator2")
        throw SpecError("--issue-rate gives cycles, which Ramulator 2's trace does not have (its frontend paces the "
                        "requests): use --format dramsim3 or jsonl");
      timing = parse_issue_rate(*t->issue_rate, t->cycles_per_timestep);
    }
    auto requests = transfer_pipeline(schedule, args->resolved(), t->options);
    if (t->options.align % t->options.line_bytes != 0)
      std::cerr << "looptrace: warning: --align " << t->options.align << " is not a multiple of --line-bytes "
                << t->options.line_bytes << ": the end of one tensor and the start of the next may share a line\n";
    if (!requests.closed_form() && !t->options.enumerate)
      std::cerr << "looptrace: note: the transfers of " << printable(t->options.level)
                << " follow every access (slow on large layers): " << printable(requests.enumerated_because()) << "\n";
    OutputBuffer out(STDOUT_FILENO);
    auto sink = make_transfer_sink(t->format, schedule, t->options.level, out, timing.limited());
    auto issued = std::move(requests) | issue_cycles(timing);
    std::int64_t written = 0;
    for (auto batch = issued.next_batch(); !batch.empty(); batch = issued.next_batch()) {
      sink->write(batch);
      written += std::int64_t(batch.size());
    }
    out.flush();
    if (written > 0) return;
    const TraceOptions options = args->resolved();
    if (children_of(schedule, t->options.level, options.tensors).empty())
      std::cerr << "looptrace: note: no Storage node below " << printable(t->options.level)
                << " is filled from it: its transfer trace is empty\n";
    else
      note_nothing_selected(schedule, options, "the transfer trace is empty");
  });
}

}  // namespace looptrace::cli
