// `looptrace plot`: the iteration-space vs data-space picture as SVG.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

#include "common.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/plot.hpp"
#include "progress.hpp"

namespace looptrace::cli {

namespace {

struct PlotArgs {
  std::string output = "-";
  std::string format = "svg";
  std::string color_by = "einsum";
  std::string elements, timesteps;  // A:B zooms
  std::string layout;                // a layout file: y as address
  PlotOptions plot;
};

// "A:B", "A:" or ":B" with whole numbers 0 <= A < B: the range [A, B), an end left out
// being open.
std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> parse_range(const std::string& option,
                                                                                const std::string& text) {
  auto bad = [&](const std::string& why) {
    return SpecError(option + " takes A:B (the range [A, B), either end may be left out), not '" + text + "': " + why);
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) throw bad("no ':'");
  auto number = [&](const std::string& part) -> std::optional<std::int64_t> {
    if (part.empty()) return std::nullopt;
    if (part.find_first_not_of("0123456789") != std::string::npos) throw bad("'" + part + "' is not a whole number");
    try {
      return std::stoll(part);
    } catch (const std::out_of_range&) {
      throw bad("'" + part + "' is larger than 9223372036854775807");
    }
  };
  auto from = number(text.substr(0, colon)), to = number(text.substr(colon + 1));
  if (from && to && *to <= *from) throw bad("B must be larger than A");
  return {from, to};
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plot", "Draw timestep x tensor element, one panel per tensor (SVG)");
  auto args = std::make_shared<CommonArgs>();
  auto plot = std::make_shared<PlotArgs>();
  args->add_to(*cmd);
  add_progress_flag(*cmd);
  cmd->add_option("-o,--output", plot->output, "The picture file ('-': stdout)")->capture_default_str();
  cmd->add_option("--format", plot->format, "svg")->capture_default_str()->check(CLI::IsMember({"svg"}));
  cmd->add_option("--color-by", plot->color_by, "Colour per Einsum, or read vs write")
      ->capture_default_str()
      ->check(CLI::IsMember({"einsum", "access"}));
  cmd->add_option("--rank", plot->plot.rank, "y is the coordinate along this rank (for tensors that have it)");
  cmd->add_option("--elements", plot->elements,
                  "Zoom on y: only elements (or --rank coordinates) in [A, B), written A:B, A: or :B");
  cmd->add_option("--timesteps", plot->timesteps,
                  "Zoom on x: only timesteps in [A, B), written A:B, A: or :B (as --from A --to B)");
  cmd->add_option("--memory-level", plot->plot.memory_level,
                  "Shade the tiles this memory level holds, over their live spans");
  cmd->add_flag("--footprint", plot->plot.footprint,
                "Under the element panels, each memory level's footprint over time (as `timeline` counts it)");
  cmd->add_option("--layout", plot->layout,
                  "y as address under a layout file (README 'Layouts'): --memory-level's entries, else those for "
                  "every level; per bank where the file gives that level banks");
  cmd->add_option("--align", plot->plot.align, "With --layout: each tensor without a base starts at a multiple of this")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 40));
  cmd->add_option("--max-points", plot->plot.max_points,
                  "Past this many accesses, draw a density raster per panel")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--max-visited", plot->plot.max_visited,
                  "A raster of more accesses than this is drawn from a sample of timesteps (0: visit all)")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--width", plot->plot.width, "Picture width in pixels")
      ->capture_default_str()
      ->check(whole_number(300, 20000));
  cmd->callback([args, plot] {
    Schedule schedule = args->load();
    TraceOptions options = args->resolved();
    if (!plot->timesteps.empty()) {
      if (options.from || options.to) throw SpecError("give --timesteps A:B or --from/--to, not both");
      std::tie(options.from, options.to) = parse_range("--timesteps", plot->timesteps);
    }
    if (!plot->elements.empty()) {
      auto [from, to] = parse_range("--elements", plot->elements);
      plot->plot.y_from = from.value_or(0);
      plot->plot.y_to = to.value_or(-1);
    }
    plot->plot.color_by = plot->color_by == "access" ? PlotColor::access : PlotColor::einsum;
    std::optional<LayoutSpec> layout;  // outlives build_plot
    if (!plot->layout.empty()) {
      layout = load_layout(plot->layout);
      plot->plot.layout = &*layout;
    }
    const TimeRange window = TimeSelection::from_options(options, schedule.n_timesteps).window;
    PlotData data;
    {
      ProgressBar progress(window.to - window.from, "timesteps", plot->output == "-");
      plot->plot.progress = [&progress](std::int64_t done) { progress.update(done); };
      data = build_plot(schedule, options, plot->plot);
    }
    write_output(plot->output, render_svg(data, plot->plot));
  });
}

}  // namespace looptrace::cli
