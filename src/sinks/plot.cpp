// Building the picture's data in one pass over the access stream.
#include <algorithm>
#include <limits>
#include <map>

#include "looptrace/error.hpp"
#include "looptrace/sinks/plot.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/summary.hpp"

namespace looptrace {

std::string PlotPanel::title() const {
  std::string out = tensor + " (";
  std::int64_t full = 1;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += (r ? ", " : "") + ranks[r] + "=" + std::to_string(shape[r]);
    full *= shape[r];
  }
  out += ")";
  if (rank >= 0) full = shape[std::size_t(rank)];
  if (y_first > 0 || y_size < full)
    out += ", " + y_label() + " [" + std::to_string(y_first) + ", " + std::to_string(y_first + y_size) + ")";
  return out;
}

std::string PlotPanel::y_label() const { return rank < 0 ? "element" : ranks[std::size_t(rank)]; }

namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f",
                                    "#76b7b2", "#edc948", "#ff9da7", "#e15759", "#bab0ac"};
// A raster cell that more than one colour touched (Einsums, or reads and writes).
constexpr std::uint16_t kMixedColor = 0xFFFE;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A rank's coordinate from the flattened element, or the element itself.
struct YMap {
  std::int64_t stride = 1, size = 0;  // size 0: the element
  std::int64_t operator()(std::int64_t element) const {
    return size == 0 ? element : (element / stride) % size;
  }
};

// The tile of one (Storage node, tensor) in its open window, for the blocks: its live
// span (first to last touch) and the y keys touched. Keys stay bounded by the distinct
// keys of a window (exact y, or raster rows).
struct OpenTile {
  std::int64_t first = -1, last = -1;
  std::vector<std::int64_t> keys;
  std::size_t compacted = 0;

  void touch(std::int64_t t, std::int64_t key) {
    if (first < 0) first = t;
    last = t;
    if (keys.empty() || keys.back() != key) keys.push_back(key);
    if (keys.size() >= 2 * compacted + 4096) compact();
  }
  void compact() {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    compacted = keys.size();
  }
};

std::vector<Interval> runs_of(const std::vector<std::int64_t>& sorted_keys) {
  std::vector<Interval> runs;
  for (std::int64_t k : sorted_keys) {
    if (!runs.empty() && runs.back().hi == k) ++runs.back().hi;
    else runs.push_back({k, k + 1});
  }
  return runs;
}

// The panels, in --tensors order or the order of first trace, each with accesses.
std::vector<std::string> panel_tensors(const TraceSummary& summary, const TraceOptions& options) {
  std::map<std::string, std::int64_t> accesses;
  for (const auto& t : summary.traces) accesses[t.tensor] += t.n_accesses;
  std::vector<std::string> with_accesses;
  for (const auto& t : summary.tensors)
    if (accesses[t] > 0) with_accesses.push_back(t);
  for (const auto& t : options.tensors)
    if (accesses[t] == 0)
      throw SpecError("--tensors names '" + t + "', which has no accesses in the selection (" +
                      (with_accesses.empty() ? "nothing has" : "tensors with accesses: " + join(with_accesses)) +
                      ")");
  if (with_accesses.empty()) throw SpecError("nothing to plot: the selection has no accesses");
  return options.tensors.empty() ? with_accesses : options.tensors;
}

void check_rank(const std::vector<PlotPanel>& panels, const std::string& rank) {
  std::vector<std::string> ranks;
  for (const auto& p : panels) {
    if (p.rank >= 0) return;
    for (const auto& r : p.ranks)
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
  }
  throw SpecError("--rank '" + rank + "': none of the plotted tensors has that rank (their ranks: " +
                  join(ranks) + ")");
}

void check_memory_level(const TraceSummary& summary, const std::vector<PlotPanel>& panels,
                        const std::string& level) {
  std::vector<std::string> plotted, levels;
  for (const auto& p : panels) plotted.push_back(p.tensor);
  for (const auto& l : summary.tile_windows) {
    std::vector<std::string> held;
    for (const auto& t : l.tensors) {
      held.push_back(t.tensor);
      if (l.level == level && std::find(plotted.begin(), plotted.end(), t.tensor) != plotted.end())
        return;
    }
    levels.push_back(l.level + " (" + join(held) + ")");
  }
  throw SpecError("--memory-level '" + level + "' holds none of the plotted tensors (" +
                  join(plotted) + "); memory levels: " + join(levels));
}

class PlotBuilder {
 public:
  PlotBuilder(const Schedule& s, const TraceOptions& options, const PlotOptions& plot)
      : schedule_(s), plot_(plot) {
    const TraceSummary summary = summarize(s, options);
    const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
    data_.window = selection.window;
    data_.truncated = selection.truncated;
    data_.n_timesteps = s.n_timesteps;
    data_.memory_level = plot.memory_level;
    make_panels(panel_tensors(summary, options));
    if (!plot.rank.empty()) check_rank(data_.panels, plot.rank);
    if (!plot.memory_level.empty()) check_memory_level(summary, data_.panels, plot.memory_level);
    route_traces(summary);
    if (data_.raster) make_rasters();
  }

  PlotData run(const TraceOptions& options) {
    if (plot_.memory_level.empty()) {
      AccessStream stream(schedule_, options);
      for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch()) {
        for (const AccessRecord& r : batch) add(r);
        if (plot_.progress) plot_.progress(batch.back().timestep + 1 - data_.window.from);
      }
    } else {
      run_with_windows(options);
    }
    if (data_.raster) name_raster_series();
    else name_series();
    return std::move(data_);
  }

 private:
  struct Route {
    int panel = -1;
    std::uint32_t series = 0;  // raw: einsum * 2 + is_output, or is_output
    std::uint32_t color = 0;   // raw raster colour: the Einsum, or is_output
    YMap y;
  };

  void make_panels(const std::vector<std::string>& tensors) {
    std::vector<std::string> sizes;  // for the error of a zoom that misses every panel
    for (const auto& name : tensors) {
      const TensorInfo& info = schedule_.tensors[std::size_t(schedule_.find_tensor(name))];
      PlotPanel p;
      p.tensor = name, p.ranks = info.ranks, p.shape = info.shape, p.y_size = info.size;
      auto r = std::find(info.ranks.begin(), info.ranks.end(), plot_.rank);
      if (!plot_.rank.empty() && r != info.ranks.end()) {
        p.rank = int(r - info.ranks.begin());
        p.y_size = info.shape[std::size_t(p.rank)];
      }
      // The y zoom: what of [y_from, y_to) the panel has.
      const std::int64_t lo = std::min(plot_.y_from, p.y_size);
      const std::int64_t hi = plot_.y_to < 0 ? p.y_size : std::min(plot_.y_to, p.y_size);
      sizes.push_back(name + " " + std::to_string(p.y_size));
      if (hi <= lo) continue;
      p.y_first = lo, p.y_size = hi - lo;
      data_.panels.push_back(std::move(p));
    }
    if (data_.panels.empty())
      throw SpecError("the y range [" + std::to_string(plot_.y_from) + ", " +
                      (plot_.y_to < 0 ? std::string("end") : std::to_string(plot_.y_to)) +
                      ") holds no y of the plotted tensors (their sizes: " + join(sizes) + ")");
  }

  // Which panel and series each trace feeds; decides points or rasters from the counts.
  void route_traces(const TraceSummary& summary) {
    routes_.resize(schedule_.traces.size());
    std::int64_t plotted = 0;
    for (const auto& count : summary.traces) {
      const TraceInfo& t = schedule_.traces[std::size_t(count.trace)];
      Route& route = routes_[std::size_t(count.trace)];
      for (std::size_t p = 0; p < data_.panels.size(); ++p)
        if (data_.panels[p].tensor == t.tensor) route.panel = int(p);
      if (route.panel < 0) continue;
      plotted += count.n_accesses;
      route.series = plot_.color_by == PlotColor::einsum ? std::uint32_t(t.einsum_index * 2 + t.is_output)
                                                        : std::uint32_t(t.is_output);
      // A raster cell has a colour, not a shape: the Einsum, or read vs write.
      route.color = plot_.color_by == PlotColor::einsum ? std::uint32_t(t.einsum_index) : route.series;
      const PlotPanel& panel = data_.panels[std::size_t(route.panel)];
      if (panel.rank >= 0) {
        const TensorInfo& info = schedule_.tensors[std::size_t(t.tensor_index)];
        route.y = {info.strides[std::size_t(panel.rank)], panel.y_size};
      }
    }
    // Markers that would overlap in x read as hatching: past what fits, the raster.
    const double fit = double(plot_.width - kPlotMargins) / kMinMarkerPixels;
    data_.raster = plotted > plot_.max_points || double(data_.window.to - data_.window.from) > fit;
  }

  // Cells hold a whole number of timesteps and of y, so the legend can say what a cell
  // is; the last column and row may reach past the window and the panel.
  void make_rasters() {
    const std::int64_t length = data_.window.to - data_.window.from;
    auto ceil_div = [](std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); };
    for (auto& p : data_.panels) {
      DensityRaster& d = p.density;
      d.timesteps_per_column = std::max<std::int64_t>(1, ceil_div(length, std::max<std::int64_t>(1, plot_.raster_columns)));
      d.y_per_row = std::max<std::int64_t>(1, ceil_div(p.y_size, std::max<std::int64_t>(1, plot_.raster_rows)));
      d.columns = std::max<std::int64_t>(1, ceil_div(length, d.timesteps_per_column));
      d.rows = std::max<std::int64_t>(1, ceil_div(p.y_size, d.y_per_row));
      d.counts.assign(std::size_t(d.columns * d.rows), 0);
      d.series.assign(d.counts.size(), DensityRaster::kNoSeries);
      if (!plot_.memory_level.empty()) d.tiles.assign(d.counts.size(), 0);
    }
  }

  std::int64_t column(const DensityRaster& d, std::int64_t t) const {
    return (t - data_.window.from) / d.timesteps_per_column;
  }
  static std::int64_t row(const DensityRaster& d, std::int64_t y_in_panel) { return y_in_panel / d.y_per_row; }

  // The memory level's tiles from the tile_windows stage: each access lands in the
  // window of the Storage node holding it; a window that closes becomes a block.
  void run_with_windows(const TraceOptions& options) {
    std::vector<std::string> tensors;
    for (const auto& p : data_.panels) tensors.push_back(p.tensor);
    auto windows = trace_pipeline(schedule_, options) | tile_windows(plot_.memory_level, tensors);
    std::vector<std::vector<OpenTile>> tiles(schedule_.storages.size());  // [node][panel]
    for (TileStep step = windows.next_batch(); !step.empty(); step = windows.next_batch()) {
      for (const WindowEvent& e : step.events) {
        auto& open = tiles[e.storage];
        if (e.kind == WindowEvent::Kind::open) {
          open.assign(data_.panels.size(), OpenTile{});
          continue;
        }
        for (std::size_t p = 0; p < open.size(); ++p)
          if (open[p].first >= 0) {
            open[p].compact();
            close_window(p, open[p]);
          }
        open.clear();
      }
      for (const AccessRecord& r : step.accesses) {
        const std::int64_t key = add(r);
        const int h = windows.holder(r.trace);
        if (key < 0 || h < 0 || tiles[std::size_t(h)].empty()) continue;
        tiles[std::size_t(h)][std::size_t(routes_[r.trace].panel)].touch(r.timestep, key);
      }
      if (plot_.progress && !step.accesses.empty())
        plot_.progress(step.accesses.back().timestep + 1 - data_.window.from);
    }
  }

  // Plots one access; returns its y key (the y, or the raster row), or -1 if not plotted.
  std::int64_t add(const AccessRecord& r) {
    const Route& route = routes_[r.trace];
    if (route.panel < 0) return -1;
    const auto p = std::size_t(route.panel);
    PlotPanel& panel = data_.panels[p];
    const std::int64_t y = route.y(r.element);
    if (y < panel.y_first || y - panel.y_first >= panel.y_size) return -1;  // outside the zoom
    std::int64_t key = y;
    if (data_.raster) {
      DensityRaster& d = panel.density;
      key = row(d, y - panel.y_first);
      const auto at = std::size_t(key * d.columns + column(d, r.timestep));
      std::uint32_t& cell = d.counts[at];
      if (cell != std::numeric_limits<std::uint32_t>::max()) ++cell;
      // Raw colour until the end: the only one seen in the cell, or kMixedColor.
      std::uint16_t& color = d.series[at];
      const auto raw = std::uint16_t(std::min<std::uint32_t>(route.color, kMixedColor - 1));
      if (color == DensityRaster::kNoSeries) color = raw;
      else if (color != raw) color = kMixedColor;
    } else {
      panel.points.push_back({r.timestep, y, route.series});
    }
    return key;
  }

  // A window ended: its block in point mode, its cells in raster mode (keys are rows).
  void close_window(std::size_t p, const OpenTile& w) {
    PlotPanel& panel = data_.panels[p];
    ++panel.n_blocks;
    if (!data_.raster) {
      panel.blocks.push_back({w.first, w.last + 1, runs_of(w.keys)});
      return;
    }
    DensityRaster& d = panel.density;
    const std::int64_t c0 = column(d, w.first), c1 = column(d, w.last);
    for (std::int64_t rw : w.keys)
      std::fill(d.tiles.begin() + rw * d.columns + c0, d.tiles.begin() + rw * d.columns + c1 + 1, 1);
  }

  // Keeps the series that have points, in Einsum order, reads before writes.
  void name_series() {
    std::map<std::uint32_t, std::uint32_t> used;
    for (auto& panel : data_.panels) {
      std::sort(panel.points.begin(), panel.points.end(), [](const PlotPoint& a, const PlotPoint& b) {
        return std::tie(a.series, a.timestep, a.y) < std::tie(b.series, b.timestep, b.y);
      });
      panel.points.erase(std::unique(panel.points.begin(), panel.points.end()), panel.points.end());
      for (const auto& pt : panel.points) used[pt.series] = 0;
    }
    for (auto& [raw, index] : used) {
      index = std::uint32_t(data_.series.size());
      const bool write = raw % 2 == 1;
      PlotSeries s;
      s.is_output = write;
      if (plot_.color_by == PlotColor::einsum) {
        s.label = schedule_.einsums[raw / 2] + (write ? " write" : " read");
        s.color = kPalette[(raw / 2) % std::size(kPalette)];
      } else {
        s.label = write ? "write" : "read";
        s.color = write ? "#e15759" : "#4e79a7";
      }
      data_.series.push_back(std::move(s));
    }
    for (auto& panel : data_.panels)
      for (auto& pt : panel.points) pt.series = used[pt.series];
  }

  // Raster colours: the Einsums (or read, write) present, then the mix if any.
  void name_raster_series() {
    std::map<std::uint16_t, std::uint16_t> used;
    for (const auto& panel : data_.panels)
      for (std::uint16_t raw : panel.density.series)
        if (raw != DensityRaster::kNoSeries) used[raw] = 0;
    const bool by_einsum = plot_.color_by == PlotColor::einsum;
    for (auto& [raw, index] : used) {
      index = std::uint16_t(data_.series.size());
      PlotSeries s;
      if (raw == kMixedColor) {
        s.label = by_einsum ? "several Einsums" : "read and write";
        s.color = by_einsum ? "#555555" : "#8e44ad";
      } else if (by_einsum) {
        s.label = schedule_.einsums[raw];
        s.color = kPalette[raw % std::size(kPalette)];
      } else {
        s.is_output = raw == 1;
        s.label = s.is_output ? "write" : "read";
        s.color = s.is_output ? "#e15759" : "#4e79a7";
      }
      data_.series.push_back(std::move(s));
    }
    for (auto& panel : data_.panels)
      for (std::uint16_t& raw : panel.density.series)
        if (raw != DensityRaster::kNoSeries) raw = used[raw];
  }

  const Schedule& schedule_;
  const PlotOptions& plot_;
  PlotData data_;
  std::vector<Route> routes_;
};

}  // namespace

PlotData build_plot(const Schedule& schedule, const TraceOptions& options, const PlotOptions& plot) {
  return PlotBuilder(schedule, options, plot).run(options);
}

}  // namespace looptrace
