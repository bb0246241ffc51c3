// `looptrace plot`: the iteration-space vs data-space picture as SVG.
#include <fstream>
#include <iostream>

#include "common.hpp"
#include "looptrace/error.hpp"
#include "looptrace/sinks/plot.hpp"

namespace looptrace::cli {

namespace {

struct PlotArgs {
  std::string output = "-";
  std::string format = "svg";
  std::string color_by = "einsum";
  PlotOptions plot;
};

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw SpecError("cannot write '" + path + "'");
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plot", "Draw timestep x tensor element, one panel per tensor (SVG)");
  auto args = std::make_shared<CommonArgs>();
  auto plot = std::make_shared<PlotArgs>();
  args->add_to(*cmd);
  cmd->add_option("-o,--output", plot->output, "The picture file ('-': stdout)")->capture_default_str();
  cmd->add_option("--format", plot->format, "svg")->capture_default_str()->check(CLI::IsMember({"svg"}));
  cmd->add_option("--color-by", plot->color_by, "Colour per Einsum, or read vs write")
      ->capture_default_str()
      ->check(CLI::IsMember({"einsum", "access"}));
  cmd->add_option("--rank", plot->plot.rank, "y is the coordinate along this rank (for tensors that have it)");
  cmd->add_option("--memory-level", plot->plot.memory_level,
                  "Shade the tiles this memory level holds, over their live spans");
  cmd->add_option("--max-points", plot->plot.max_points,
                  "Past this many accesses, draw a density raster per panel")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--width", plot->plot.width, "Picture width in pixels")
      ->capture_default_str()
      ->check(CLI::Range(300, 20000));
  cmd->callback([args, plot] {
    Schedule schedule = args->load();
    plot->plot.color_by = plot->color_by == "access" ? PlotColor::access : PlotColor::einsum;
    PlotData data = build_plot(schedule, args->resolved(), plot->plot);
    write_output(plot->output, render_svg(data, plot->plot));
  });
}

}  // namespace looptrace::cli
