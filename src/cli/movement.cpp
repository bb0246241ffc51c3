// `looptrace movement`: what each memory level fills and drains, its largest tiles and
// its peak footprint, as JSON or as a table.
#include <unistd.h>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/sinks/movement_report.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/stages/layout.hpp"
#include "looptrace/stages/transfer_request.hpp"

namespace looptrace::cli {

void add_movement_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("movement", "Print what each memory level fills, drains and holds at its peak");
  auto args = std::make_shared<CommonArgs>();
  auto format = std::make_shared<std::string>("json");
  args->add_to(*cmd);
  cmd->add_option("--format", *format, "json or text")->capture_default_str()->check(CLI::IsMember({"json", "text"}));
  auto threads = std::make_shared<int>(1);
  cmd->add_option("--threads", *threads, "With --method enumerate: workers, each keeping the tiles of some memory levels (the output is the same)")
      ->capture_default_str()
      ->check(whole_number(1, 1024));
  auto method = std::make_shared<std::string>("closed-form");
  cmd->add_option("--method", *method,
                  "closed-form (tiles as boxes, windows that move alike counted once) or enumerate (visit every "
                  "access: the check)")
      ->capture_default_str()
      ->check(CLI::IsMember({"closed-form", "enumerate"}));
  auto partial_sums = std::make_shared<bool>(false);
  cmd->add_flag("--partial-sums", *partial_sums,
                "Count an output tile filled again after an earlier window drained it (a reduction above the node) "
                "as read back from the parent, as analytical models do");
  auto convention = std::make_shared<std::string>("looptree");
  cmd->add_option("--convention", *convention,
                  "looptree (SEMANTICS: every window refetches its tile, a level's tile is the union of its "
                  "instances) or timeloop (Timeloop's counts: sliding-window reuse reset when the step changes, "
                  "per instance, multicast and spatial reduction, partial sums; README 'Timeloop's convention')")
      ->capture_default_str()
      ->check(CLI::IsMember({"looptree", "timeloop"}));
  auto layout = std::make_shared<std::string>();
  cmd->add_option("--layout", *layout,
                  "A layout file: add, per level with children, the lines its fills and drains take against the "
                  "fewest, and its bank cycles (README 'Layouts')");
  auto line_bytes = std::make_shared<std::int64_t>(64);
  cmd->add_option("--line-bytes", *line_bytes, "With --layout: the line size the costs count in")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 30));
  auto align = std::make_shared<std::int64_t>(4096);
  cmd->add_option("--align", *align, "With --layout: where tensors the file does not place start (as transfers)")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 40));
  cmd->callback([args, format, threads, method, partial_sums, convention, layout, line_bytes, align] {
    if (*convention == "timeloop" && (*method == "enumerate" || !layout->empty()))
      throw SpecError("--convention timeloop is counted in closed form only, without --layout: drop "
                      "--method enumerate and --layout");
    Schedule schedule = args->load();
    MovementOptions how;
    how.method = *method == "enumerate" ? MovementMethod::enumerate : MovementMethod::closed_form;
    how.threads = *threads;
    how.partial_sums = *partial_sums;
    if (*convention == "timeloop") how.convention = Convention::timeloop;
    MovementReport report = summarize_movement(schedule, args->resolved(), how);
    if (!layout->empty()) {
      const LayoutSpec spec = load_layout(*layout);
      check_layout_names(schedule, spec);
      TransferOptions checked;
      checked.line_bytes = std::uint64_t(*line_bytes), checked.align = std::uint64_t(*align);
      check_transfer_options(checked);
      add_layout_costs(report, schedule, args->resolved(), &spec, checked.line_bytes, checked.align);
    }
    OutputBuffer out(STDOUT_FILENO);
    if (*format == "text") {
      out.write(movement_text(report));
    } else {
      // Names come from user files: invalid UTF-8 becomes U+FFFD (as in `summary`).
      out.write(movement_json(report).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
      out.put('\n');
    }
    out.flush();
    std::int64_t windows = 0;
    for (const auto& level : report.levels)
      for (const auto& t : level.tensors) windows += t.windows;
    if (windows == 0) note_nothing_selected(schedule, args->resolved(), "no window moves anything");
  });
}

}  // namespace looptrace::cli
