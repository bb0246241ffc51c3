// `looptrace timeline`: every memory level over time as Chrome trace-event JSON, for
// Perfetto (ui.perfetto.dev) and chrome://tracing.
#include <iostream>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/closed_form/tile_timeline.hpp"
#include "looptrace/sinks/timeline.hpp"

namespace looptrace::cli {

void add_timeline_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("timeline", "Write each memory level's tiles, footprint, fills and drains over time "
                                             "as trace-event JSON (Perfetto, chrome://tracing)");
  auto args = std::make_shared<CommonArgs>();
  auto output = std::make_shared<std::string>("-");
  auto options = std::make_shared<TimelineOptions>();
  args->add_to(*cmd, offer_tensors);
  cmd->add_option("-o,--output", *output, "The JSON file ('-': stdout)")->capture_default_str();
  cmd->add_option("--max-events", options->max_events,
                  "At most this many trace events: past it, runs of tile windows become one slice each")
      ->capture_default_str()
      ->check(whole_number(1));
  cmd->add_option("--cycles-per-timestep", options->cycles_per_timestep,
                  "The time axis in cycles (1 us = 1 cycle), fills and drains per cycle; without it, timesteps")
      ->check(whole_number(1, std::int64_t(1) << 20));
  cmd->callback([args, output, options] {
    Schedule schedule = args->load();
    const TraceOptions resolved = args->resolved();
    const TileTimeline tl = tile_timeline(schedule, resolved);
    TimelineInfo info;
    write_output(*output, timeline_json(tl, *options, &info));
    for (const LevelTiles& level : tl.levels)
      if (!level.not_closed.empty())
        std::cerr << "looptrace: note: " << level.level
                  << (level.enumerated ? " is counted access by access, not in closed form: " : " is not drawn: ")
                  << level.not_closed << "\n";
    if (!info.resolution.every_window())
      std::cerr << "looptrace: note: more tile windows than --max-events " << options->max_events
                << " allows: slices are " << resolution_text(info.resolution) << "; a merged slice's args say so\n";
    bool any = false;  // (a level not drawn has its note)
    for (const LevelTiles& level : tl.levels) {
      any = any || (!level.not_closed.empty() && !level.enumerated);
      for (const TileTrack& t : level.tracks) any = any || !t.runs.empty();
    }
    if (!any) note_nothing_selected(schedule, resolved, "no tile window in the selection");
  });
}

}  // namespace looptrace::cli
