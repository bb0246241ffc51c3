// Building the picture's data in one pass over the access stream.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "looptrace/closed_form/counts.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/plot.hpp"
#include "looptrace/sinks/timeline.hpp"
#include "looptrace/stages/layout.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"
#include "closed_form/movement_boxes.hpp"
#include "looptrace/compile/window_walk.hpp"
#include "support/text.hpp"

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
  if (y_unit == "address") return out + ", " + y_label() + " [" + std::to_string(y_first) + ", " +
                                  std::to_string(y_first + y_size) + ")";
  if (y_unit == "bank") full = y_full;
  if (y_first > 0 || y_size < full)
    out += ", " + y_label() + " [" + std::to_string(y_first) + ", " + std::to_string(y_first + y_size) + ")";
  return out;
}

std::string PlotPanel::y_label() const {
  if (!y_unit.empty()) return y_unit;
  return rank < 0 ? "element" : ranks[std::size_t(rank)];
}

double PlotPanel::touched_share(std::size_t cell) const {
  const DensityRaster& r = density;
  if (cell >= r.counts.size() || r.timesteps[cell] == 0) return 0;
  const std::int64_t row = std::int64_t(cell) / r.columns;
  const std::int64_t ys = std::min(r.y_per_row, y_size - row * r.y_per_row);  // the last row may be short
  // With --rank, each coordinate is all the elements that have it.
  double per_y = 1;
  if (rank >= 0)
    for (std::size_t k = 0; k < shape.size(); ++k)
      if (int(k) != rank) per_y *= double(shape[k]);
  return std::min(1.0, double(r.counts[cell]) /
                           (double(r.timesteps[cell]) * double(std::max<std::int64_t>(1, ys)) * per_y));
}

namespace {

// Einsum colours: strong ones first, then lighter ones, no greys (a grey is "several
// Einsums") and no orange of the tiles' shade; past them, hues a golden angle apart.
constexpr const char* kPalette[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#aec7e8", "#98df8a",
    "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#6b6ecf", "#b5cf6b"};
constexpr const char* kSeveralEinsums = "#4d4d4d";

std::string einsum_color(std::size_t einsum) {
  if (einsum < std::size(kPalette)) return kPalette[einsum];
  // HSL(h, 60%, 45%) to RGB, h a golden angle further for each Einsum past the table.
  const double h = std::fmod(double(einsum - std::size(kPalette)) * 137.508 + 20.0, 360.0) / 60.0;
  const double c = 0.6 * (1 - std::fabs(2 * 0.45 - 1)), x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  const double m = 0.45 - c / 2;
  double rgb[3] = {0, 0, 0};
  const int sector = int(h) % 6;
  const int big[] = {0, 1, 1, 2, 2, 0}, small[] = {1, 0, 2, 1, 0, 2};
  rgb[big[sector]] = c, rgb[small[sector]] = x;
  char out[8];
  std::snprintf(out, sizeof out, "#%02x%02x%02x", int(std::lround((rgb[0] + m) * 255)),
                int(std::lround((rgb[1] + m) * 255)), int(std::lround((rgb[2] + m) * 255)));
  return out;
}
// A raster cell that more than one colour touched (Einsums, or reads and writes).
constexpr std::uint16_t kMixedColor = 0xFFFE;

// A rank's coordinate from the flattened element, the element itself, or (a layout)
// the address of its first byte or that address's bank.
struct YMap {
  std::int64_t stride = 1, size = 0;  // size 0: the element
  const TensorLayout* layout = nullptr;
  std::uint64_t banks = 0, bank_bytes = 1;  // banks 0: the address
  std::int64_t operator()(std::int64_t element) const {
    if (layout) {
      const std::uint64_t a = layout->address(element);
      return std::int64_t(banks ? a / bank_bytes % banks : a);
    }
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
  for (std::int64_t k : sorted_keys) append_merged(runs, Interval::point(k));
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
    if (options.sample_timesteps)
      data_.sampled_timesteps = std::min(*options.sample_timesteps, selection.window.to - selection.window.from);
    data_.cut_at_max_timesteps = options.max_timesteps && *options.max_timesteps < s.n_timesteps &&
                                 selection.window.to == *options.max_timesteps;
    data_.n_timesteps = s.n_timesteps;
    data_.memory_level = plot.memory_level;
    if (plot.layout) place(summary);
    make_panels(panel_tensors(summary, options));
    if (!plot.rank.empty()) check_rank(data_.panels, plot.rank);
    if (!plot.memory_level.empty()) check_memory_level(summary, data_.panels, plot.memory_level);
    route_traces(summary);
    if (data_.raster) make_rasters();
  }

  PlotData run(TraceOptions options) {
    // Boxes count elements; under a layout each access is visited for its address.
    if (!plot_.layout && too_many_to_visit(options) && rasters_from_boxes(options)) {
      if (plot_.memory_level.empty() || tiles_from_boxes(options)) {
        name_raster_series();
        return std::move(data_);
      }
      reset_rasters();
    }
    sample_if_too_many(options);
    // Points: their blocks from boxes too, where the windows' tiles are boxes.
    const bool boxed_blocks = !plot_.layout && !data_.raster && !plot_.memory_level.empty() && plot_.max_visited > 0 &&
                              blocks_from_boxes(options);
    if (plot_.memory_level.empty() || boxed_blocks) {
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

  // Under a layout: where each tensor lies (the memory level's entries, else those for
  // every level), and the level's banks if the file gives them.
  void place(const TraceSummary& summary) {
    if (!plot_.rank.empty()) throw SpecError("give --rank or --layout (y as the address), not both");
    check_layout_names(schedule_, *plot_.layout);
    addresses_ = AddressMap::make(schedule_, summary.tensors, plot_.align, plot_.layout, plot_.memory_level);
    if (const LevelBanks* b = plot_.memory_level.empty() ? nullptr : plot_.layout->banks_of(plot_.memory_level)) {
      banks_ = std::uint64_t(b->banks);
      bank_bytes_ = b->bank_bytes > 0 ? std::uint64_t(b->bank_bytes) : kDefaultBankBytes;
    }
  }
  static constexpr std::uint64_t kDefaultBankBytes = 64;  // `bank_bytes` left out: a 64-byte line

  // The y range a panel covers before a zoom: elements, a rank's coordinates, the
  // tensor's addresses (its padded span), or the banks.
  std::pair<std::int64_t, std::int64_t> y_range(PlotPanel& p, const TensorInfo& info, int tensor) const {
    if (!plot_.layout) return {0, p.y_size};
    const TensorLayout& l = addresses_.layouts[std::size_t(tensor)];
    p.y_unit = banks_ ? "bank" : "address";
    if (banks_) return {0, p.y_full = std::int64_t(banks_)};
    (void)info;
    return {std::int64_t(l.base), std::int64_t(l.end())};
  }

  void make_panels(const std::vector<std::string>& tensors) {
    std::vector<std::string> sizes;  // for the error of a zoom that misses every panel
    for (const auto& name : tensors) {
      const int tensor = schedule_.find_tensor(name);
      const TensorInfo& info = schedule_.tensors[std::size_t(tensor)];
      PlotPanel p;
      p.tensor = name, p.ranks = info.ranks, p.shape = info.shape, p.y_size = info.size;
      auto r = std::find(info.ranks.begin(), info.ranks.end(), plot_.rank);
      if (!plot_.rank.empty() && r != info.ranks.end()) {
        p.rank = int(r - info.ranks.begin());
        p.y_size = info.shape[std::size_t(p.rank)];
      }
      // The y zoom: what of [y_from, y_to) the panel has.
      const auto [first, end] = y_range(p, info, tensor);
      const std::int64_t lo = std::min(std::max(plot_.y_from, first), end);
      const std::int64_t hi = plot_.y_to < 0 ? end : std::min(plot_.y_to, end);
      sizes.push_back(name + " " + (plot_.layout ? "[" + std::to_string(first) + ", " + std::to_string(end) + ")"
                                                  : std::to_string(p.y_size)));
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
        route.y = {info.strides[std::size_t(panel.rank)], info.shape[std::size_t(panel.rank)]};  // the whole rank: a zoom cuts y after
      }
      if (plot_.layout) route.y = {1, 0, &addresses_.layouts[std::size_t(t.tensor_index)], banks_, bank_bytes_};
    }
    // Markers that would overlap in x read as hatching: past what fits, the raster.
    const double fit = double(plot_.width - kPlotMargins) / kMinMarkerPixels;
    data_.raster = plotted > plot_.max_points || double(data_.window.to - data_.window.from) > fit;
    plotted_ = plotted;
  }

  bool too_many_to_visit(const TraceOptions& options) const {
    return data_.raster && plot_.max_visited > 0 && plotted_ > plot_.max_visited && !options.sample_timesteps;
  }

  // Rasters too large to visit, counted from tile boxes instead: at each timestep of
  // the window (a sample past kBoxTimesteps of them, or past kBoxLeafSteps over the
  // leaves), each leaf's points are a box of its variables and their image in a tensor
  // a box, whose elements in a cell's y are counted from the box's bounds. False (the
  // raster left empty) where an image is not a box: the caller visits accesses instead.
  static constexpr std::int64_t kBoxTimesteps = 200'000;
  static constexpr std::int64_t kBoxLeafSteps = 20'000'000;  // (timestep, leaf) pairs looked at
  bool rasters_from_boxes(const TraceOptions& options) {
    namespace mb = movement_boxes;
    const std::int64_t length = data_.window.to - data_.window.from;
    TraceOptions sampled = options;
    // Many leaves (a whole model's Einsums) sample fewer timesteps, never under 8 a column.
    const std::int64_t columns = data_.panels.front().density.columns;
    const std::int64_t most = std::max<std::int64_t>(
        8 * columns, std::min<std::int64_t>(kBoxTimesteps, kBoxLeafSteps / std::int64_t(std::max<std::size_t>(1, schedule_.leaves.size()))));
    if (length > most) sampled.sample_timesteps = most;
    const TimeSelection selection = TimeSelection::from_options(sampled, schedule_.n_timesteps);
    mb::LeafRanges ranges;
    mb::Box box;
    std::vector<TimeOdometer> odometers;
    for (const LeafSchedule& leaf : schedule_.leaves) odometers.push_back(leaf.odometer());
    try {
      for (const TimeRange& range : selection.ranges)
        for (std::int64_t t = range.from; t < range.to; ++t) {
          for (std::size_t l = 0; l < schedule_.leaves.size(); ++l) {
            const LeafSchedule& leaf = schedule_.leaves[l];
            if (!mb::leaf_points_at(leaf, odometers[l], t, ranges)) continue;
            for (const LeafTensor& lt : leaf.tensors) {
              if (routes_[std::size_t(lt.trace)].panel < 0) continue;  // not plotted, or filtered out
              if (!mb::image_box(lt, ranges, box)) return reset_rasters();
              add_box(std::size_t(lt.trace), t, box);
            }
          }
          if (plot_.progress && (t & 1023) == 0) plot_.progress(t + 1 - data_.window.from);
        }
    } catch (const mb::NotClosed&) {
      return reset_rasters();
    }
    if (length > most) data_.sampled_timesteps = most, data_.sampled_for_speed = true;
    data_.from_boxes = true;
    return true;
  }

  // The memory level's tiles from boxes (raster mode: the cells of the rows each
  // window's boxes reach, over the columns of its live span, as close_window() marks
  // them for visited accesses; point mode: blocks_from_boxes). False where the windows
  // are not boxes (the caller visits accesses).
  static constexpr std::int64_t kMaxBoxWindows = 4'000'000;  // window x leaf pairs
  bool tiles_from_boxes(const TraceOptions& options) {
    if (!data_.raster) return blocks_from_boxes(options);
    std::vector<std::vector<std::uint8_t>> touched(data_.panels.size());
    for (std::size_t p = 0; p < data_.panels.size(); ++p) touched[p].assign(std::size_t(data_.panels[p].density.rows), 0);
    return data_.blocks_from_boxes = level_windows_from_boxes(
        options,
        [&](std::size_t p, std::size_t trace, const movement_boxes::Box& box) {
          return mark_rows(p, trace, box, touched[p]);
        },
        [&](std::size_t p, std::int64_t first, std::int64_t last) {
          DensityRaster& d = data_.panels[p].density;
          const std::int64_t c0 = column(d, first), c1 = column(d, last);
          for (std::int64_t row = 0; row < d.rows; ++row) {
            if (!touched[p][std::size_t(row)]) continue;
            touched[p][std::size_t(row)] = 0;
            std::fill(d.tiles.begin() + row * d.columns + c0, d.tiles.begin() + row * d.columns + c1 + 1, 1);
          }
        });
  }

  // Point mode: each window's block as the runs of y its boxes touch.
  static constexpr std::int64_t kMaxBlockRuns = 4'000'000;
  bool blocks_from_boxes(const TraceOptions& options) {
    std::vector<std::vector<Interval>> runs(data_.panels.size());
    std::int64_t budget = kMaxBlockRuns;
    const bool closed = level_windows_from_boxes(
        options,
        [&](std::size_t p, std::size_t trace, const movement_boxes::Box& box) {
          const std::size_t before = runs[p].size();
          if (!box_runs(p, trace, box, runs[p], budget)) throw TooManyRuns{};
          return runs[p].size() > before;
        },
        [&](std::size_t p, std::int64_t first, std::int64_t last) {
          std::vector<Interval>& r = runs[p];
          std::sort(r.begin(), r.end(), [](const Interval& x, const Interval& y) { return x.from < y.from; });
          std::vector<Interval> merged;
          for (const Interval& i : r) append_merged(merged, i);
          data_.panels[p].blocks.push_back({first, last + 1, std::move(merged)});
          r.clear();
        });
    if (!closed)
      for (auto& panel : data_.panels) panel.blocks.clear(), panel.n_blocks = 0;
    data_.blocks_from_boxes = closed;
    return closed;
  }
  struct TooManyRuns {};

  // The runs of y (the panel's own y, whole) that a box of elements touches: per
  // combination of its outer coordinates one run of the innermost rank's, merged where
  // they meet; with a rank on y, its one range. False past `budget` runs.
  bool box_runs(std::size_t p, std::size_t trace, const movement_boxes::Box& box, std::vector<Interval>& out,
                std::int64_t& budget) const {
    for (const auto& r : box)
      if (r.empty()) return true;
    const PlotPanel& panel = data_.panels[p];
    if (panel.rank >= 0) {
      out.push_back({box[std::size_t(panel.rank)].from, box[std::size_t(panel.rank)].to});
      return --budget >= 0;
    }
    const TensorInfo& info = schedule_.tensors[std::size_t(schedule_.traces[trace].tensor_index)];
    const std::size_t n = box.size();
    boost::container::small_vector<std::int64_t, 8> at(n);
    for (std::size_t k = 0; k < n; ++k) at[k] = box[k].from;
    for (;;) {
      std::int64_t base = 0;
      for (std::size_t k = 0; k + 1 < n; ++k) base += at[k] * info.strides[k];
      const Interval run{base + box[n - 1].from, base + box[n - 1].to};
      if (!out.empty() && out.back().to == run.from) out.back().to = run.to;
      else if (--budget < 0) return false;
      else out.push_back(run);
      std::size_t k = n - 1;  // the odometer over the outer ranks
      while (k > 0 && ++at[k - 1] == box[k - 1].to) at[k - 1] = box[k - 1].from, --k;
      if (k == 0) return true;
    }
  }

  // Walks the windows of the memory level's Storage nodes from boxes: in each, the
  // leaves whose accesses of a plotted tensor that node holds touch boxes from their
  // first to their last timestep there. `on_box(panel, trace, box)` takes each box and
  // says whether it touched the panel; `on_block(panel, first, last)` ends a window's
  // block (n_blocks counts them). False where a tile is not a box, a trace's holder is
  // ambiguous, the windows are too many, or y is zoomed (a block's live span is then
  // that of its accesses inside the zoom, which a leaf's timesteps do not give).
  template <class OnBox, class OnBlock>
  bool level_windows_from_boxes(const TraceOptions& options, OnBox&& on_box, OnBlock&& on_block) {
    namespace mb = movement_boxes;
    if (plot_.y_from > 0 || plot_.y_to >= 0 || options.sample_timesteps) return false;
    std::vector<int> holder(schedule_.traces.size(), -1);
    try {
      for (std::size_t t = 0; t < holder.size(); ++t)
        if (routes_[t].panel >= 0) holder[t] = schedule_.holder(t, plot_.memory_level);
    } catch (const SpecError&) {
      return false;
    }
    std::int64_t budget = kMaxBoxWindows;
    mb::LeafStretch stretch;
    mb::Box box;
    try {
      for (std::size_t s = 0; s < schedule_.storages.size(); ++s) {
        const StorageWindows& node = schedule_.storages[s];
        std::vector<std::pair<const LeafSchedule*, const LeafTensor*>> parts;
        for (const LeafSchedule& leaf : schedule_.leaves)
          for (const LeafTensor& lt : leaf.tensors)
            if (holder[std::size_t(lt.trace)] == int(s)) parts.push_back({&leaf, &lt});
        if (parts.empty()) continue;
        for (WindowWalk walk(node.starts(), node.duration, data_.window); !walk.done(); walk.advance()) {
          const TimeRange clip = walk.window();
          std::vector<std::int64_t> first(data_.panels.size(), -1), last(data_.panels.size(), -1);
          for (const auto& [leaf, lt] : parts) {
            if (--budget < 0) return false;
            if (!mb::leaf_points_in(*leaf, clip, stretch)) continue;
            const auto p = std::size_t(routes_[std::size_t(lt->trace)].panel);
            bool any = false;
            for (const mb::LeafRanges& ranges : stretch.boxes) {
              if (!mb::image_box(*lt, ranges, box)) return false;
              any |= on_box(p, std::size_t(lt->trace), box);
            }
            if (!any) continue;
            first[p] = first[p] < 0 ? stretch.first : std::min(first[p], stretch.first);
            last[p] = std::max(last[p], stretch.last);
          }
          for (std::size_t p = 0; p < data_.panels.size(); ++p)
            if (first[p] >= 0) ++data_.panels[p].n_blocks, on_block(p, first[p], last[p]);
        }
      }
    } catch (const mb::NotClosed&) {
      return false;
    } catch (const TooManyRuns&) {
      return false;
    }
    return true;
  }

  // Marks the rows of its panel that a (trace's) box of elements reaches; whether any.
  bool mark_rows(std::size_t p, std::size_t trace, const movement_boxes::Box& box, std::vector<std::uint8_t>& rows) {
    for (const auto& r : box)
      if (r.empty()) return false;
    const PlotPanel& panel = data_.panels[p];
    const DensityRaster& d = panel.density;
    const TensorInfo& info = schedule_.tensors[std::size_t(schedule_.traces[trace].tensor_index)];
    std::int64_t lo = 0, hi = 0;
    y_reach(info, panel, box, lo, hi);
    bool any = false;
    for (std::int64_t row = lo / d.y_per_row; hi >= lo && row <= hi / d.y_per_row; ++row) {
      const std::int64_t a = panel.y_first + row * d.y_per_row;
      if (rows[std::size_t(row)] ||
          elements_in(info, panel, box, a, std::min(a + d.y_per_row, panel.y_first + panel.y_size)) > 0)
        rows[std::size_t(row)] = 1, any = true;
    }
    return any;
  }

  // The y a box can reach, from its first to its last element (or coordinate), in the
  // panel's y from 0; hi < lo when none is in the panel.
  static void y_reach(const TensorInfo& info, const PlotPanel& panel, const movement_boxes::Box& box,
                      std::int64_t& lo, std::int64_t& hi) {
    lo = 0, hi = 0;
    if (panel.rank >= 0) {
      lo = box[std::size_t(panel.rank)].from, hi = box[std::size_t(panel.rank)].to - 1;
    } else {
      for (std::size_t k = 0; k < box.size(); ++k) lo += box[k].from * info.strides[k], hi += (box[k].to - 1) * info.strides[k];
    }
    lo = std::max(lo, panel.y_first) - panel.y_first;
    hi = std::min(hi, panel.y_first + panel.y_size - 1) - panel.y_first;
  }

  bool reset_rasters() {
    last_touch_.clear();
    make_rasters();
    for (auto& p : data_.panels) p.n_blocks = 0;
    data_.from_boxes = data_.blocks_from_boxes = false, data_.sampled_timesteps = 0, data_.sampled_for_speed = false;
    return false;
  }

  // The elements of `box` (a box of the tensor's coordinates) with y in [a, b).
  static std::int64_t elements_in(const TensorInfo& info, const PlotPanel& panel, const movement_boxes::Box& box,
                                  std::int64_t a, std::int64_t b) {
    using Wide = __int128;
    if (panel.rank >= 0) {  // y is one rank's coordinate: the other ranks multiply
      Wide n = intersect(box[std::size_t(panel.rank)].span(), Interval{a, b}).size();
      for (std::size_t k = 0; k < box.size(); ++k)
        if (int(k) != panel.rank) n *= box[k].size();
      return std::int64_t(std::min<Wide>(n, std::numeric_limits<std::int64_t>::max()));
    }
    // The points of the box whose row-major element is below x, rank by rank: those
    // with x's leading coordinates and a smaller one next.
    auto below = [&](std::int64_t x) {
      if (x <= 0) return Wide(0);
      boost::container::small_vector<std::int64_t, 8> digit(box.size());
      Wide rest = x, inner = 1;
      bool past_end = rest >= info.size;
      for (std::size_t k = box.size(); k-- > 0;) digit[k] = std::int64_t(rest % info.shape[k]), rest /= info.shape[k];
      for (const auto& r : box) inner *= r.size();
      if (past_end) return inner;
      Wide n = 0;
      for (std::size_t k = 0; k < box.size(); ++k) {
        const auto& r = box[k];
        inner /= r.size();
        n += Wide(std::clamp(digit[k], r.from, r.to) - r.from) * inner;
        if (digit[k] < r.from || digit[k] >= r.to) break;
      }
      return n;
    };
    return std::int64_t(std::min<Wide>(below(b) - below(a), std::numeric_limits<std::int64_t>::max()));
  }

  // One (timestep, trace)'s box of elements into its panel's cells, as add() counts
  // its accesses one by one.
  void add_box(std::size_t trace, std::int64_t t, const movement_boxes::Box& box) {
    for (const auto& r : box)
      if (r.empty()) return;
    const Route& route = routes_[trace];
    const auto p = std::size_t(route.panel);
    PlotPanel& panel = data_.panels[p];
    DensityRaster& d = panel.density;
    const TensorInfo& info = schedule_.tensors[std::size_t(schedule_.traces[trace].tensor_index)];
    std::int64_t lo = 0, hi = 0;
    y_reach(info, panel, box, lo, hi);
    if (hi < lo) return;
    const std::int64_t c = column(d, t);
    for (std::int64_t row = lo / d.y_per_row; row <= hi / d.y_per_row; ++row) {
      const std::int64_t a = panel.y_first + row * d.y_per_row;
      const std::int64_t n = elements_in(info, panel, box, a, std::min(a + d.y_per_row, panel.y_first + panel.y_size));
      if (n > 0) touch_cell(p, std::size_t(row * d.columns + c), t, n, route.color);
    }
  }

  // `n` accesses of timestep t in raster cell `at` of panel p, in colour `raw_color`:
  // saturating counts, the timesteps that touch the cell (the stream is in time order,
  // so a cell sees its timesteps one after another), and the only colour seen in it or
  // kMixedColor.
  void touch_cell(std::size_t p, std::size_t at, std::int64_t t, std::int64_t n, std::uint32_t raw_color) {
    DensityRaster& d = data_.panels[p].density;
    constexpr std::uint32_t kMaxCount = std::numeric_limits<std::uint32_t>::max();
    d.counts[at] = std::uint32_t(std::min<std::int64_t>(std::int64_t(d.counts[at]) + n, kMaxCount));
    std::int64_t& last = last_touch_[p][at];
    if (last != t && d.timesteps[at] != kMaxCount) ++d.timesteps[at];
    last = t;
    std::uint16_t& color = d.series[at];
    const auto raw = std::uint16_t(std::min<std::uint32_t>(raw_color, kMixedColor - 1));
    if (color == DensityRaster::kNoSeries) color = raw;
    else if (color != raw) color = kMixedColor;
  }

  // A raster of more accesses than max_visited is drawn from about max_visited of them:
  // timesteps sampled across the window (at least 8 a column), each visited whole. The
  // shares of cells are means over the timesteps that touch them, which a sample
  // estimates as it is; counts are of what was visited.
  void sample_if_too_many(TraceOptions& options) {
    if (!too_many_to_visit(options)) return;
    const std::int64_t length = data_.window.to - data_.window.from;
    const std::int64_t columns = data_.panels.front().density.columns;
    const std::int64_t wanted =
        std::max<std::int64_t>(8 * columns, std::int64_t(double(length) * double(plot_.max_visited) / double(plotted_)));
    if (wanted >= length) return;
    options.sample_timesteps = wanted;
    data_.sampled_timesteps = wanted;
    data_.sampled_for_speed = true;
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
      d.timesteps.assign(d.counts.size(), 0);
      last_touch_.emplace_back(d.counts.size(), -1);
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
      touch_cell(p, std::size_t(key * d.columns + column(d, r.timestep)), r.timestep, 1, route.color);
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

  // Keeps the series that have points, in Einsum order, reads before writes; blocks in
  // time order (however they were found).
  void name_series() {
    for (auto& panel : data_.panels)
      std::sort(panel.blocks.begin(), panel.blocks.end(), [](const PlotBlock& a, const PlotBlock& b) {
        return std::tie(a.from, a.to) < std::tie(b.from, b.to) ||
               (std::tie(a.from, a.to) == std::tie(b.from, b.to) && !a.runs.empty() && !b.runs.empty() &&
                a.runs.front().from < b.runs.front().from);
      });
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
        s.color = einsum_color(raw / 2);
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
        s.color = by_einsum ? kSeveralEinsums : "#8e44ad";
      } else if (by_einsum) {
        s.label = schedule_.einsums[raw];
        s.color = einsum_color(raw);
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
  AddressMap addresses_;  // with a layout
  std::uint64_t banks_ = 0, bank_bytes_ = 1;  // > 0: y is the bank
  std::int64_t plotted_ = 0;                          // accesses of the plotted traces
  std::vector<std::vector<std::int64_t>> last_touch_;  // raster mode: per panel, per cell
};

}  // namespace

FootprintPeak FootprintPanel::peak() const {
  FootprintPeak p{0, -1};
  for (const FootprintStep& s : steps) {
    const std::int64_t v = bytes ? s.bytes : s.elements;
    if (p.timestep < 0 || v > p.value) p = {v, s.at};
  }
  return p;
}

namespace {

// The levels' footprints at the timeline's default resolution, so both draw the same.
std::vector<FootprintPanel> footprint_panels(const Schedule& schedule, const TraceOptions& options) {
  const TileTimeline tl = tile_timeline(schedule, options);
  const Resolution g = timeline_resolution(tl, TimelineOptions{}.max_events);
  std::vector<FootprintPanel> out;
  for (const LevelTiles& level : tl.levels) {
    FootprintPanel& p = out.emplace_back();
    p.level = level.level;
    p.not_closed = level.not_closed;
    p.steps = footprint_steps(level, g);
    p.bytes = level.has_bytes();
    p.capacity_bits = level.capacity_bits;
    for (const TileTrack& t : level.tracks)
      for (const TileSpan& s : tile_spans(t, g)) p.exact = p.exact && s.exact;
  }
  return out;
}

}  // namespace

PlotData build_plot(const Schedule& schedule, const TraceOptions& options, const PlotOptions& plot) {
  PlotData data = PlotBuilder(schedule, options, plot).run(options);
  if (plot.footprint) data.footprints = footprint_panels(schedule, options);
  return data;
}

}  // namespace looptrace
