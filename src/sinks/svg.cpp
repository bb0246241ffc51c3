// The picture as SVG: a legend, then one panel per tensor on a shared time axis. Points
// of one series share one path and raster cells of one colour and shade share one
// path, so the file grows with the distinct marks drawn, never with the trace.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "looptrace/sinks/plot.hpp"

namespace looptrace {

namespace {

// Raster cells: the series colour at an opacity that grows with the share of the
// cell touched, in eighths (a strided tile is faint, a whole one dark).
constexpr const char* kShadeOpacity[] = {"0.16", "0.28", "0.4", "0.52", "0.64", "0.76", "0.88", "1"};
constexpr int kShadeCount = 8;
constexpr double kMaxMarker = 8.0, kLegendMarker = 12.0;  // pixels; the least is kMinMarkerPixels
constexpr const char* kTileFill = "#fdd49e";
constexpr const char* kTileStroke = "#e6550d";
constexpr const char* kFootprintFill = "#6baed6";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

// A count of tenths as a decimal: 25 -> "2.5", -30 -> "-3".
std::string tenths(std::int64_t v) {
  char buf[32];
  const long long a = v < 0 ? -v : v;
  if (a % 10 == 0) std::snprintf(buf, sizeof buf, "%s%lld", v < 0 ? "-" : "", a / 10);
  else std::snprintf(buf, sizeof buf, "%s%lld.%lld", v < 0 ? "-" : "", a / 10, a % 10);
  return buf;
}

// The length of the well-formed UTF-8 sequence at the start of `s` (0 if none), and
// otherwise how many bytes its longest valid beginning has (the part one U+FFFD
// replaces, at least 1).
std::pair<std::size_t, std::size_t> utf8_sequence(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return {1, 1};
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return {0, 1};
  for (std::size_t i = 1; i < n; ++i) {
    if (i >= s.size()) return {0, i};
    const unsigned char want_lo = i == 1 ? lo : 0x80, want_hi = i == 1 ? hi : 0xBF;
    if (b(i) < want_lo || b(i) > want_hi) return {0, i};
  }
  return {n, n};
}

// Text for XML: markup escaped; what XML cannot hold (control characters, invalid
// UTF-8, U+FFFE and U+FFFF) becomes U+FFFD, so any name gives a well-formed file.
std::string xml(std::string_view text) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto [valid, length] = utf8_sequence(text.substr(i));
    const std::string_view piece = text.substr(i, length);
    i += length;
    if (valid == 0 || piece == "\xEF\xBF\xBE" || piece == "\xEF\xBF\xBF") {
      out += kReplacement;
      continue;
    }
    const char c = piece[0];
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (valid == 1 && static_cast<unsigned char>(c) < 0x20) out += kReplacement;
        else out += piece;
    }
  }
  return out;
}

// A tick label that stays short: 950, 12k, 1.5M, 100M, 2G.
std::string tick_label(std::int64_t v) {
  if (v < 10'000 && v > -10'000) return std::to_string(v);
  static constexpr const char* kSuffix[] = {"k", "M", "G", "T", "P", "E"};
  double x = double(v);
  int power = -1;
  while (std::fabs(x) >= 999.5 && power < 5) x /= 1000, ++power;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%s", x, kSuffix[power]);
  return buf;
}

// About `target` round integer ticks (1, 2, 5 x 10^k apart) in [lo, hi].
std::vector<std::int64_t> ticks(std::int64_t lo, std::int64_t hi, int target) {
  if (hi <= lo) return {lo};
  const double raw = double(hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) { step = m * magnitude; break; }
  const auto s = std::max<std::int64_t>(1, std::int64_t(step));
  std::vector<std::int64_t> out;
  for (std::int64_t v = (lo + s - 1) / s * s; v <= hi; v += s) out.push_back(v);
  return out;
}

// Path data, appended piece by piece: commands and numbers.
void path(std::string& d, std::initializer_list<std::pair<char, double>> steps) {
  for (const auto& [command, value] : steps) {
    if (command != ' ') d += command;
    else d += ' ';
    d += num(value);
  }
}

// A rectangle as compact path data.
void box(std::string& d, double x0, double y0, double x1, double y1) {
  path(d, {{'M', x0}, {' ', y0}, {'h', x1 - x0}, {'v', y1 - y0}, {'h', x0 - x1}});
  d += 'z';
}

// Reads are squares, writes triangles, so identity never rests on colour alone.
void marker(std::string& d, bool write, double x, double y, double size) {
  const double h = size / 2;
  if (!write) return box(d, x - h, y - h, x + h, y + h);
  path(d, {{'M', x}, {' ', y - h}, {'l', h}, {' ', size}, {'h', -size}});
  d += 'z';
}

// Where things go, in pixels: the legend on top, then the panels, then the time axis.
struct Layout {
  double width = 0, left = 90, right = kPlotMargins - 90, plot_width = 0;
  double panel_height = 0, title_height = 22, gap = 16;
  double top_of_panels = 0;

  Layout() = default;
  Layout(const PlotOptions& o, double legend_height)
      : width(o.width), plot_width(o.width - left - right), panel_height(o.panel_height),
        top_of_panels(10 + legend_height) {}
  double panel_top(std::size_t i) const {
    return top_of_panels + title_height + double(i) * (title_height + panel_height + gap);
  }
  double bottom(std::size_t panels) const { return panel_top(panels) - title_height - gap; }
};

struct LegendEntry {
  std::string swatch, label;
  double swatch_width = 14;
};

class SvgPicture {
 public:
  SvgPicture(const PlotData& data, const PlotOptions& options) : d_(data), o_(options) {}

  std::string render() {
    const std::string legend = legend_group();
    layout_ = Layout(o_, legend_height_);
    const double height = layout_.bottom(panel_count()) + 60;
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(layout_.width) +
            "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(layout_.width) + " " +
            num(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    out_ += "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    out_ += legend;
    for (std::size_t i = 0; i < d_.panels.size(); ++i) panel(i);
    for (std::size_t i = 0; i < d_.footprints.size(); ++i) footprint(d_.footprints[i], d_.panels.size() + i);
    x_axis();
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  std::size_t panel_count() const { return d_.panels.size() + d_.footprints.size(); }
  double x_of(double t) const {
    const double length = double(d_.window.to - d_.window.from);
    return layout_.left + (t - double(d_.window.from)) / length * layout_.plot_width;
  }
  double y_of(const PlotPanel& p, double top, double y) const {
    return top + layout_.panel_height - (y - double(p.y_first)) / double(p.y_size) * layout_.panel_height;
  }

  // Exactly what is drawn: the series (markers, or raster colours), the density scale
  // with the size of a cell, the tiles.
  std::vector<LegendEntry> legend_entries() const {
    std::vector<LegendEntry> entries;
    for (const auto& s : d_.series) {
      std::string d;
      if (d_.raster) box(d, 1, -6, 13, 6);
      else marker(d, s.is_output, 7, 0, kLegendMarker);
      entries.push_back({"<path d=\"" + d + "\" fill=\"" + s.color + "\"/>", s.label});
    }
    if (d_.raster) {
      std::string swatch;
      for (int k = 0; k < kShadeCount; ++k)
        swatch += "<rect x=\"" + num(k * 4) + "\" y=\"-5\" width=\"4\" height=\"10\" fill=\"#333\" fill-opacity=\"" +
                  kShadeOpacity[k] + "\"/>";
      entries.push_back({swatch, "share of a cell's elements touched at a timestep (up to 1/8, ..., all)", 32});
    }
    if (!d_.footprints.empty())
      entries.push_back({std::string("<rect x=\"0\" y=\"-5\" width=\"14\" height=\"10\" fill=\"") +
                             kFootprintFill + "\"/>",
                         "footprint (the tiles a level holds)"});
    if (!d_.memory_level.empty())
      entries.push_back({std::string("<rect x=\"0\" y=\"-5\" width=\"14\" height=\"10\" fill=\"") +
                             kTileFill + "\" stroke=\"" + kTileStroke + "\"/>",
                         d_.memory_level + " tile (live span)"});
    return entries;
  }

  // Entries in a row, wrapped at the picture's width; text is ~7 px per character.
  std::string legend_group() {
    std::string out = "<g class=\"legend\">\n";
    double x = 90, y = 20;
    for (const auto& e : legend_entries()) {
      const double w = e.swatch_width + 36 + 7.0 * double(e.label.size());
      if (x + w > o_.width - 10 && x > 90) x = 90, y += 20;
      out += "<g class=\"legend-entry\" transform=\"translate(" + num(x) + " " + num(y) + ")\">" +
             e.swatch + "<text x=\"" + num(e.swatch_width + 6) + "\" y=\"4\">" + xml(e.label) +
             "</text></g>\n";
      x += w;
    }
    legend_height_ = y + 10;
    return out + "</g>\n";
  }

  // "cell: 4 timesteps × 2 elements", on each panel: rows differ with the y ranges.
  static std::string cell_size(const PlotPanel& p) {
    auto amount = [](std::int64_t v, const std::string& unit) {
      return tick_label(v) + " " + unit + (v == 1 ? "" : "s");
    };
    return "cell: " + amount(p.density.timesteps_per_column, "timestep") + " \u00d7 " +
           amount(p.density.y_per_row, p.y_unit == "address" ? "byte"
                                         : !p.y_unit.empty() ? p.y_unit
                                         : p.rank < 0        ? "element"
                                                             : p.y_label() + " coordinate");
  }

  void panel(std::size_t i) {
    const PlotPanel& p = d_.panels[i];
    const double top = layout_.panel_top(i), left = layout_.left;
    out_ += "<g class=\"panel\" data-tensor=\"" + xml(p.tensor) + "\">\n";
    out_ += "<text class=\"title\" x=\"" + num(left) + "\" y=\"" + num(top - 7) +
            "\" font-weight=\"bold\">" + xml(p.title()) + "</text>\n";
    if (d_.raster)
      out_ += "<text class=\"cell-size\" x=\"" + num(left + layout_.plot_width) + "\" y=\"" + num(top - 7) +
              "\" text-anchor=\"end\" fill=\"#555\">" + xml(cell_size(p)) + "</text>\n";
    if (d_.raster) raster(p, top);
    else tiles(p, top), points(p, top);
    out_ += "<rect class=\"frame\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" +
            num(layout_.plot_width) + "\" height=\"" + num(layout_.panel_height) +
            "\" fill=\"none\" stroke=\"#444\"/>\n";
    y_ticks(p, top);
    x_ticks(top, top + layout_.panel_height);
    const double mid = top + layout_.panel_height / 2;
    out_ += "<text class=\"ylabel\" x=\"" + num(left - 58) + "\" y=\"" + num(mid) +
            "\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(left - 58) + " " + num(mid) +
            ")\">" + xml(p.y_label()) + "</text>\n";
    out_ += "</g>\n";
  }

  static std::string footprint_title(const FootprintPanel& f) {
    const FootprintPeak peak = f.peak();
    std::string title = f.level + " footprint (" + (f.bytes ? "bytes" : "elements") + ")";
    if (f.steps.empty() && !f.not_closed.empty()) title += ": not drawn (" + f.not_closed + ")";
    else if (peak.timestep >= 0) title += ", peak " + tick_label(peak.value) + " at t=" + std::to_string(peak.timestep);
    if (f.capacity_bits && !std::isinf(*f.capacity_bits))
      title += ", size " + tick_label(std::int64_t(std::min(*f.capacity_bits, 9e18))) + " bits";
    if (!f.exact) title += " (runs of windows drawn as held over their gaps)";
    return title;
  }

  // A level's footprint as a filled staircase of the largest value in each pixel column
  // (every peak stays visible), the level's size as a dashed line when it is in range.
  void footprint(const FootprintPanel& f, std::size_t i) {
    const double top = layout_.panel_top(i), left = layout_.left, h = layout_.panel_height;
    const FootprintPeak peak = f.peak();
    const std::string unit = f.bytes ? "bytes" : "elements";
    std::optional<double> size;
    const bool bounded = f.capacity_bits && !std::isinf(*f.capacity_bits);
    if (f.bytes && bounded) size = *f.capacity_bits / 8;
    const double top_value = std::max<double>({1.0, double(peak.value), size && *size <= 4.0 * double(peak.value) ? *size : 0.0});
    out_ += "<g class=\"footprint\" data-level=\"" + xml(f.level) + "\" data-unit=\"" + unit + "\" data-peak=\"" +
            std::to_string(peak.value) + "\" data-peak-timestep=\"" + std::to_string(peak.timestep) + "\">\n";
    out_ += "<text class=\"title\" x=\"" + num(left) + "\" y=\"" + num(top - 7) + "\" font-weight=\"bold\">" +
            xml(footprint_title(f)) + "</text>\n";
    auto y_at = [&](double v) { return top + h - v / top_value * h; };
    const std::vector<double> columns = column_maxima(f);
    std::string d;
    const double width = layout_.plot_width / double(std::max<std::size_t>(columns.size(), 1));
    path(d, {{'M', left}, {' ', top + h}});
    for (std::size_t c = 0; c < columns.size();) {  // a run of equal columns is one step
      std::size_t end = c + 1;
      while (end < columns.size() && columns[end] == columns[c]) ++end;
      path(d, {{'V', y_at(columns[c])}, {'H', left + double(end) * width}});
      c = end;
    }
    path(d, {{'V', top + h}});
    d += 'z';
    out_ += "<path class=\"held\" fill=\"" + std::string(kFootprintFill) + "\" d=\"" + d + "\"/>\n";
    if (size && *size <= top_value)
      out_ += "<path class=\"size\" d=\"M" + num(left) + " " + num(y_at(*size)) + "h" + num(layout_.plot_width) +
              "\" stroke=\"#a33\" stroke-dasharray=\"4 3\"/>\n";
    out_ += "<rect class=\"frame\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(layout_.plot_width) +
            "\" height=\"" + num(h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (std::int64_t v : ticks(0, std::int64_t(top_value), 4))
      out_ += "<path d=\"M" + num(left) + " " + num(y_at(double(v))) + "h-4\" stroke=\"#444\"/><text class=\"ytick\" x=\"" +
              num(left - 7) + "\" y=\"" + num(y_at(double(v)) + 4) + "\" text-anchor=\"end\">" + tick_label(v) + "</text>\n";
    x_ticks(top, top + h);
    out_ += "</g>\n";
  }

  // The largest value of the steps over each column of the window (a column per
  // timestep when there are fewer timesteps than pixels).
  std::vector<double> column_maxima(const FootprintPanel& f) const {
    const std::int64_t from = d_.window.from, length = d_.window.to - d_.window.from;
    const auto n = std::max<std::int64_t>(1, std::min<std::int64_t>(length, std::int64_t(layout_.plot_width)));
    std::vector<double> out(std::size_t(n), 0.0);
    auto column = [&](std::int64_t t) {  // the column holding timestep t
      return std::clamp<std::int64_t>(std::int64_t((__int128(t - from) * n) / std::max<std::int64_t>(length, 1)), 0, n - 1);
    };
    for (std::size_t k = 0; k + 1 < f.steps.size(); ++k) {
      const FootprintStep& s = f.steps[k];
      const std::int64_t a = std::max(s.at, from), b = std::min(f.steps[k + 1].at, d_.window.to);
      if (b <= a) continue;
      const double v = double(f.bytes ? s.bytes : s.elements);
      for (std::int64_t c = column(a); c <= column(b - 1); ++c) out[std::size_t(c)] = std::max(out[std::size_t(c)], v);
    }
    return out;
  }

  // Marks and faint gridlines through the panel: the numbers go once, under the last
  // panel, and the lines carry them up to every other.
  void x_ticks(double top, double bottom) {
    std::string d, grid;
    for (std::int64_t t : ticks(d_.window.from, d_.window.to - 1, 8)) {
      path(d, {{'M', x_of(double(t) + 0.5)}, {' ', bottom}, {'v', 4}});
      path(grid, {{'M', x_of(double(t) + 0.5)}, {' ', top}, {'V', bottom}});
    }
    out_ += "<path class=\"xgrid\" d=\"" + grid + "\" stroke=\"#000\" stroke-opacity=\"0.12\"/>\n";
    out_ += "<path class=\"xticks\" d=\"" + d + "\" stroke=\"#444\"/>\n";
  }

  void y_ticks(const PlotPanel& p, double top) {
    const double left = layout_.left;
    for (std::int64_t y : ticks(p.y_first, p.y_first + p.y_size - 1, 4)) {
      const double py = y_of(p, top, double(y) + 0.5);
      out_ += "<path d=\"M" + num(left) + " " + num(py) + "h-4\" stroke=\"#444\"/><text class=\"ytick\" x=\"" +
              num(left - 7) + "\" y=\"" + num(py + 4) + "\" text-anchor=\"end\">" + tick_label(y) + "</text>\n";
    }
  }

  // Point mode: one group per tile, one rectangle per run of touched y.
  void tiles(const PlotPanel& p, double top) {
    if (d_.memory_level.empty()) return;
    out_ += "<g class=\"tiles\" data-level=\"" + xml(d_.memory_level) + "\" fill=\"" + kTileFill +
            "\" fill-opacity=\"0.7\" stroke=\"" + kTileStroke + "\" stroke-width=\"0.6\">\n";
    for (const auto& b : p.blocks) {
      out_ += "<g class=\"tile\" data-from=\"" + std::to_string(b.from) + "\" data-to=\"" +
              std::to_string(b.to) + "\"><path d=\"";
      for (const auto& run : b.runs)
        box(out_, x_of(double(b.from)), y_of(p, top, double(run.to)), x_of(double(b.to)),
            y_of(p, top, double(run.from)));
      out_ += "\"/></g>\n";
    }
    out_ += "</g>\n";
  }

  // Markers snap to tenths of a pixel and repeats are dropped (long traces put many
  // timesteps in one pixel column); each is placed relative to the previous one to keep
  // the path short. Reads are squares (one stroked segment), writes filled triangles.
  void points(const PlotPanel& p, double top) {
    const double length = double(d_.window.to - d_.window.from);
    const double cell = std::min(layout_.plot_width / length, layout_.panel_height / double(p.y_size));
    const std::int64_t size = std::llround(std::clamp(cell * 0.8, kMinMarkerPixels, kMaxMarker) * 10);
    for (std::size_t first = 0; first < p.points.size();) {
      const std::uint32_t s = p.points[first].series;
      const PlotSeries& series = d_.series[s];
      std::vector<std::pair<std::int64_t, std::int64_t>> at;  // tenths of a pixel
      for (; first < p.points.size() && p.points[first].series == s; ++first)
        at.emplace_back(std::llround(x_of(double(p.points[first].timestep) + 0.5) * 10),
                        std::llround(y_of(p, top, double(p.points[first].y) + 0.5) * 10));
      std::sort(at.begin(), at.end());
      at.erase(std::unique(at.begin(), at.end()), at.end());
      out_ += "<path class=\"points\" data-series=\"" + xml(series.label) + "\" " +
              (series.is_output ? "fill=\"" + series.color + "\""
                                : "fill=\"none\" stroke=\"" + series.color + "\" stroke-width=\"" +
                                      tenths(size) + "\"") +
              " d=\"";
      markers(at, series.is_output, size);
      out_ += "\"/>\n";
    }
  }

  void markers(const std::vector<std::pair<std::int64_t, std::int64_t>>& at, bool write,
               std::int64_t size) {
    // The triangle's outline, and the square's segment, once for all markers.
    const std::string shape = write ? "l" + tenths(size / 2) + " " + tenths(size) + "h" + tenths(-size) + "z"
                                    : "h" + tenths(size);
    std::int64_t cx = 0, cy = 0;  // the current point after the previous marker
    bool first = true;
    for (const auto& [x, y] : at) {
      const std::int64_t sx = write ? x : x - size / 2, sy = write ? y - size / 2 : y;
      out_ += first ? 'M' : 'm';
      out_ += tenths(first ? sx : sx - cx);
      out_ += ' ';
      out_ += tenths(first ? sy : sy - cy);
      out_ += shape;
      first = false;
      cx = write ? sx : sx + size, cy = sy;  // 'z' returns to the start; 'h' moves right
    }
  }

  // Raster mode: tiles, then density cells in their series' colour, darker with more
  // accesses; each as runs of equal cells along a row.
  void raster(const PlotPanel& p, double top) {
    const DensityRaster& r = p.density;
    auto level = [&](std::size_t cell) {  // series * kShadeCount + shade, -1 if empty
      if (r.counts[cell] == 0) return -1;
      const double share = p.touched_share(cell);
      const int shade = std::clamp(int(std::ceil(share * kShadeCount - 1e-9)) - 1, 0, kShadeCount - 1);
      return int(r.series[cell]) * kShadeCount + shade;
    };
    if (!r.tiles.empty())
      for (const auto& [_, d] : runs(p, top, [&](std::size_t cell) { return r.tiles[cell] ? 0 : -1; }))
        out_ += "<path class=\"tile-cover\" fill=\"" + std::string(kTileFill) + "\" d=\"" + d + "\"/>\n";
    for (const auto& [key, d] : runs(p, top, level)) {
      const PlotSeries& series = d_.series[std::size_t(key / kShadeCount)];
      out_ += "<path class=\"density\" data-series=\"" + xml(series.label) + "\" data-shade=\"" +
              std::to_string(key % kShadeCount) + "\" fill=\"" + series.color + "\" fill-opacity=\"" +
              kShadeOpacity[key % kShadeCount] + "\" d=\"" + d + "\"/>\n";
    }
  }

  // Path data per level (>= 0) of the cells, in one pass: runs of equal cells along a row.
  template <class Level>
  std::map<int, std::string> runs(const PlotPanel& p, double top, Level&& level) const {
    const DensityRaster& r = p.density;
    std::map<int, std::string> paths;
    auto x_at = [&](std::int64_t c) {  // the left edge of column c, the last one cut at the window
      return x_of(double(std::min(d_.window.from + c * r.timesteps_per_column, d_.window.to)));
    };
    auto y_at = [&](std::int64_t row) {
      return y_of(p, top, double(p.y_first + std::min(row * r.y_per_row, p.y_size)));
    };
    for (std::int64_t row = 0; row < r.rows; ++row)
      for (std::int64_t c = 0; c < r.columns;) {
        const int wanted = level(std::size_t(row * r.columns + c));
        std::int64_t end = c + 1;
        while (end < r.columns && level(std::size_t(row * r.columns + end)) == wanted) ++end;
        if (wanted >= 0) box(paths[wanted], x_at(c), y_at(row + 1), x_at(end), y_at(row));
        c = end;
      }
    return paths;
  }

  void x_axis() {
    const double bottom = layout_.bottom(panel_count());
    out_ += "<g class=\"xaxis\">\n";
    for (std::int64_t t : ticks(d_.window.from, d_.window.to - 1, 8))
      out_ += "<text class=\"xtick\" x=\"" + num(x_of(double(t) + 0.5)) + "\" y=\"" + num(bottom + 17) +
              "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
    out_ += "<text class=\"xlabel\" x=\"" + num(layout_.left + layout_.plot_width / 2) +
            "\" y=\"" + num(bottom + 36) + "\" text-anchor=\"middle\">Timestep</text>\n";
    // Cut short by --max-timesteps is worth a warning; a zoom or a sample was asked for.
    const std::string span = "timesteps [" + std::to_string(d_.window.from) + ", " + std::to_string(d_.window.to) +
                             ") of " + std::to_string(d_.n_timesteps);
    std::string note, color = "#555";
    if (d_.cut_at_max_timesteps) note = "truncated at --max-timesteps: " + span, color = "#a33";
    else if (d_.truncated) note = span;
    if (d_.sampled_timesteps > 0)
      note += (note.empty() ? "" : "; ") + std::string(d_.from_boxes ? "counted from tile boxes at " : "drawn from ") +
              std::to_string(d_.sampled_timesteps) + " sampled timesteps" +
              (d_.sampled_for_speed ? " (too many to visit; --max-visited 0 visits every access)" : "");
    if (!note.empty())
      out_ += "<text class=\"note\" x=\"" + num(layout_.left) + "\" y=\"" + num(bottom + 54) + "\" fill=\"" + color +
              "\">" + xml(note) + "</text>\n";
    out_ += "</g>\n";
  }

  const PlotData& d_;
  const PlotOptions& o_;
  Layout layout_;
  double legend_height_ = 0;
  std::string out_;
};

}  // namespace

std::string render_svg(const PlotData& data, const PlotOptions& options) {
  return SvgPicture(data, options).render();
}

}  // namespace looptrace
