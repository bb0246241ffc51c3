// The iteration-space vs data-space picture (the reference's plot_access_trace): x the
// timestep, y the tensor element (or one rank's coordinate), one panel per tensor on a
// shared time axis, the tiles of a memory level shaded behind. Built in one streaming
// pass: a point per access while the trace is small, a fixed density raster per panel
// past that, so memory and file size stay bounded whatever the trace length.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/closed_form/tile_timeline.hpp"
#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/layout.hpp"
#include "looptrace/interval.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

enum class PlotColor { einsum, access };

// Markers are at least this wide (pixels), so squares and triangles stay apart; a
// window with more timesteps than fit side by side at that size is drawn as rasters.
inline constexpr double kMinMarkerPixels = 3.0;
inline constexpr int kPlotMargins = 114;  // pixels left and right of the panels

struct PlotOptions {
  PlotColor color_by = PlotColor::einsum;
  std::string rank;          // y is the coordinate along this rank; empty: the element
  std::string memory_level;  // shade the tiles this level holds; empty: none
  // Zoom on y: only y in [y_from, y_to) (y_to < 0: to the end); a panel with no y in
  // the range is left out. The x zoom is the trace's window (--from / --to).
  std::int64_t y_from = 0, y_to = -1;
  // More accesses than this, or more timesteps than markers fit across: density rasters.
  std::int64_t max_points = 150'000;
  // Rasters of more accesses than this are counted from tile boxes or drawn from a
  // sample of the window's timesteps, so a whole layer draws in seconds; 0: visit
  // every access (and take a memory level's blocks from the visit, not from boxes).
  std::int64_t max_visited = 30'000'000;
  // At most, per panel: cells of about 3 x 3 pixels at the default size.
  std::int64_t raster_columns = 280, raster_rows = 60;
  // Under the element panels, each memory level's footprint over time (what
  // `timeline` draws as counters, the same numbers).
  bool footprint = false;
  // y as address (SEMANTICS "Layouts"): each access at its first byte's address under
  // this layout file (its entries for memory_level, else for every level), or at its
  // bank where the file gives memory_level banks; `align` places tensors without a
  // base. Null: y is the element. Kept alive by the caller.
  const LayoutSpec* layout = nullptr;
  std::uint64_t align = 4096;
  int width = 960, panel_height = 180;  // pixels
  // Called now and then while the trace streams, with the timesteps of the window done.
  std::function<void(std::int64_t timesteps_done)> progress;
};

// What one marker shape and colour stands for; reads are squares, writes triangles.
// In a raster a series is a colour only: an Einsum, "read", "write", or a mix.
struct PlotSeries {
  std::string label;  // "Matmul0 read" (colour by Einsum), "write" (by access)
  std::string color;
  bool is_output = false;
};

struct PlotPoint {
  std::int64_t timestep = 0, y = 0;
  std::uint32_t series = 0;  // into PlotData::series
  auto operator<=>(const PlotPoint&) const = default;
};

// One tile of the memory level, where the tensor is live in one window.
struct PlotBlock {
  std::int64_t from = 0, to = 0;  // the window's first touch to its last touch + 1
  std::vector<Interval> runs;     // the contiguous runs of y touched in the window
};

// Accesses per cell of timestep x y; row-major, row 0 holds the panel's first y.
struct DensityRaster {
  static constexpr std::uint16_t kNoSeries = 0xFFFF;
  std::int64_t columns = 0, rows = 0;
  std::int64_t timesteps_per_column = 1, y_per_row = 1;  // what one cell covers
  std::vector<std::uint32_t> counts;     // saturating
  std::vector<std::uint32_t> timesteps;  // per cell: the timesteps that touch it (saturating)
  std::vector<std::uint16_t> series;  // per cell: into PlotData::series; kNoSeries if empty
  std::vector<std::uint8_t> tiles;    // 1 where a memory-level tile covers the cell
};

struct PlotPanel {
  std::string tensor;
  std::vector<std::string> ranks;
  std::vector<std::int64_t> shape;
  int rank = -1;              // the rank that y follows; -1: the flattened element
  std::string y_unit;         // with a layout: "address" or "bank"; empty: as rank says
  std::int64_t y_full = 0;    // y_unit "bank": the banks
  std::int64_t y_first = 0;   // y runs over [y_first, y_first + y_size): all of it, or the zoom
  std::int64_t y_size = 1;
  std::vector<PlotPoint> points;  // point mode: sorted, distinct
  std::vector<PlotBlock> blocks;  // point mode: one per window in which y is touched
  std::int64_t n_blocks = 0;      // windows in which the tensor is touched (both modes)
  DensityRaster density;          // raster mode

  // Raster mode: the share of a cell's elements (with a rank on y, all the elements of
  // its coordinates) that its timesteps touch, on average over the timesteps that touch
  // it (0 to 1): a strided tile is a faint cell, a whole one dark. Accesses are counted,
  // so an element that two traces touch at one timestep (a !Parallel writer and reader)
  // counts twice, up to all.
  double touched_share(std::size_t cell) const;
  std::string title() const;    // "T0 (M=8, N0=4)", "T0 (M=8, N0=4), element [4, 12)" zoomed
  std::string y_label() const;  // "element" or "N0"
};

// One memory level's footprint over the window: elements, or bytes when every tensor it
// holds has a size. `exact`: no span of windows was drawn as held across its gaps.
struct FootprintPanel {
  std::string level;
  std::vector<FootprintStep> steps;
  bool bytes = false, exact = true;
  std::optional<double> capacity_bits;
  std::string not_closed;  // not drawn: why
  FootprintPeak peak() const;  // the largest value (in the panel's unit) and where it is first reached
};

struct PlotData {
  TimeRange window;               // the x-axis
  bool truncated = false;         // the window leaves timesteps of the schedule out
  bool cut_at_max_timesteps = false;  // ... because --max-timesteps ends it (not a zoom)
  std::int64_t sampled_timesteps = 0;  // > 0: drawn from this many sampled timesteps
  bool sampled_for_speed = false;      // ... chosen by max_visited, not --sample-timesteps
  bool from_boxes = false;  // rasters counted from each timestep's tile boxes, no access visited
  bool blocks_from_boxes = false;  // the memory level's blocks from its windows' tile boxes
  std::int64_t n_timesteps = 0;   // of the full schedule
  bool raster = false;            // density rasters instead of points
  std::string memory_level;
  std::vector<PlotSeries> series;  // exactly those drawn (points, or raster colours)
  std::vector<PlotPanel> panels;
  std::vector<FootprintPanel> footprints;  // with PlotOptions::footprint, levels in tree order
};

// Streams the trace once. Throws SpecError for a --tensors entry with no access, a
// rank no plotted tensor has, a memory level that holds none of the plotted tensors,
// a y zoom that holds no y of any plotted tensor, or a selection with nothing to plot.
PlotData build_plot(const Schedule& schedule, const TraceOptions& options,
                    const PlotOptions& plot = {});

// The picture as a standalone SVG document.
std::string render_svg(const PlotData& data, const PlotOptions& plot = {});

}  // namespace looptrace
