// The picture: panels, labels, legend, memory-level tiles clipped to live spans, errors,
// and the switch to bounded density rasters, checked on the bundled fused example
// (two matmuls fused along m: per m, Matmul0 for 16 timesteps, then Matmul1 for 16).
#include <doctest/doctest.h>

#include <optional>

#include <algorithm>
#include <numeric>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "looptrace/sinks/plot.hpp"

using looptrace::build_plot;
using looptrace::PlotColor;
using looptrace::PlotData;
using looptrace::PlotOptions;
using looptrace::PlotPanel;
using looptrace::render_svg;
using looptrace::Schedule;
using looptrace::TraceOptions;

namespace {

Schedule fused(std::int64_t m = 8, std::int64_t kn = 4) {
  const std::string dir = std::string(LOOPTRACE_SOURCE_ROOT) + "/examples/specs/";
  return looptrace::compile_schedule(looptrace::load_spec(
      {dir + "matmuls.yaml", dir + "fused_matmuls_to_simple.mapping.yaml"},
      {{"N_EINSUMS", std::int64_t(2)}, {"M", m}, {"KN", kn}}));
}

TraceOptions tensors(std::vector<std::string> names) {
  TraceOptions o;
  o.tensors = std::move(names);
  return o;
}

PlotOptions level(const std::string& name) {
  PlotOptions p;
  p.memory_level = name;
  return p;
}

std::vector<std::string> panel_names(const PlotData& d) {
  std::vector<std::string> out;
  for (const auto& p : d.panels) out.push_back(p.tensor);
  return out;
}

const PlotPanel& panel(const PlotData& d, const std::string& tensor) {
  for (const auto& p : d.panels)
    if (p.tensor == tensor) return p;
  FAIL("no panel " << tensor);
  return d.panels.front();
}

std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

std::vector<std::string> legend(const std::string& svg) {
  return matches(svg, "class=\"legend-entry\"[^>]*>.*?<text[^>]*>([^<]*)</text>");
}

using Spans = std::vector<std::pair<std::int64_t, std::int64_t>>;
Spans spans(const PlotPanel& p) {
  Spans out;
  for (const auto& b : p.blocks) out.emplace_back(b.from, b.to);
  return out;
}

}  // namespace

TEST_CASE("plot: one panel per tensor with accesses, in order of first trace or --tensors order") {
  Schedule s = fused();
  PlotData all = build_plot(s, {});
  CHECK(panel_names(all) == std::vector<std::string>{"T0", "W0", "T1", "W1", "T2"});
  CHECK(panel(all, "T0").title() == "T0 (M=8, N0=4)");

  PlotData chosen = build_plot(s, tensors({"T2", "T0"}));
  CHECK(panel_names(chosen) == std::vector<std::string>{"T2", "T0"});
  const std::string svg = render_svg(chosen);
  CHECK(matches(svg, "class=\"panel\" data-tensor=\"([^\"]*)\"") == std::vector<std::string>{"T2", "T0"});
  CHECK(matches(svg, "class=\"title\"[^>]*>([^<]*)<") ==
        std::vector<std::string>{"T2 (M=8, N2=4)", "T0 (M=8, N0=4)"});

  TraceOptions matmul1;  // Matmul0's inputs have no access left: their panels go
  matmul1.einsums = {"Matmul1"};
  CHECK(panel_names(build_plot(s, matmul1)) == std::vector<std::string>{"T1", "W1", "T2"});
}

TEST_CASE("plot: a shared Timestep axis, a y label per panel, --rank coordinates") {
  Schedule s = fused();
  const std::string svg = render_svg(build_plot(s, {}));
  CHECK(matches(svg, "class=\"xlabel\"[^>]*>([^<]*)<") == std::vector<std::string>{"Timestep"});
  CHECK(matches(svg, "class=\"ylabel\"[^>]*>([^<]*)<") == std::vector<std::string>(5, "element"));

  PlotOptions by_n0;
  by_n0.rank = "N0";
  PlotData d = build_plot(s, tensors({"T0", "W0", "T1"}), by_n0);
  CHECK(panel(d, "T0").y_label() == "N0");
  CHECK(panel(d, "T0").y_size == 4);
  CHECK(panel(d, "W0").y_label() == "N0");
  CHECK(panel(d, "T1").y_label() == "element");  // T1 has no rank N0
  CHECK(panel(d, "T1").y_size == 32);
  // T0[m, n0] at t = 32m + 4 n0 + n1: y is n0, so each timestep draws one point.
  const auto& t0 = panel(d, "T0").points;
  REQUIRE(t0.size() == 8 * 16);
  CHECK(t0[0].y == 0);
  CHECK(t0[37 - 32 + 16].timestep == 37);  // m = 1 starts the 17th point
  CHECK(t0[37 - 32 + 16].y == 1);
}

TEST_CASE("plot: the legend lists exactly the series drawn") {
  Schedule s = fused();
  CHECK(legend(render_svg(build_plot(s, {}))) ==
        std::vector<std::string>{"Matmul0 read", "Matmul0 write", "Matmul1 read", "Matmul1 write"});
  CHECK(legend(render_svg(build_plot(s, tensors({"T0"})))) == std::vector<std::string>{"Matmul0 read"});

  PlotOptions by_access = level("GlobalBuffer");
  by_access.color_by = PlotColor::access;
  PlotData t1 = build_plot(s, tensors({"T1"}), by_access);
  CHECK(legend(render_svg(t1, by_access)) ==
        std::vector<std::string>{"read", "write", "GlobalBuffer tile (live span)"});
  // Reads and writes differ in shape: squares are stroked segments ('h'), triangles
  // filled outlines ('l', 'h', 'z').
  const std::string svg = render_svg(t1, by_access);
  const auto reads = matches(svg, "data-series=\"read\"[^>]*d=\"([^\"]*)\"");
  const auto writes = matches(svg, "data-series=\"write\"[^>]*d=\"([^\"]*)\"");
  REQUIRE(reads.size() == 1);
  REQUIRE(writes.size() == 1);
  CHECK(reads[0].find_first_of("lz") == std::string::npos);
  CHECK(std::count(writes[0].begin(), writes[0].end(), 'z') == 8 * 16);  // one per write
  CHECK(std::count(reads[0].begin(), reads[0].end(), 'h') == 8 * 16);
  CHECK(panel(t1, "T1").points.size() == 2 * 8 * 16);  // written then read, 128 each
}

TEST_CASE("plot: memory-level tiles span first to last touch within each window") {
  Schedule s = fused();
  PlotData d = build_plot(s, {}, level("GlobalBuffer"));
  // T0 is read only by Matmul0, the first branch: its blocks end halfway through each
  // 32-timestep window. T1 lives through both branches, T2 only through the second.
  Spans t0, t1, t2;
  for (std::int64_t m = 0; m < 8; ++m) {
    t0.emplace_back(32 * m, 32 * m + 16);
    t1.emplace_back(32 * m, 32 * m + 32);
    t2.emplace_back(32 * m + 16, 32 * m + 32);
  }
  CHECK(spans(panel(d, "T0")) == t0);
  CHECK(spans(panel(d, "T1")) == t1);
  CHECK(spans(panel(d, "T2")) == t2);
  CHECK(s.n_timesteps == 256);
  CHECK(spans(panel(d, "W0")) == Spans{{0, 240}});  // one window [0, 256), last read at 239
  CHECK(spans(panel(d, "W1")) == Spans{{16, 256}});
  // y: the row m of T0, elements [4m, 4m + 4), one contiguous run per block.
  const auto& block = panel(d, "T0").blocks[3];
  REQUIRE(block.runs.size() == 1);
  CHECK(block.runs[0].from == 12);
  CHECK(block.runs[0].to == 16);
  // The SVG draws one tile group per block.
  const std::string svg = render_svg(d, level("GlobalBuffer"));
  CHECK(matches(svg, "(class=\"tile\")").size() == 8 + 1 + 8 + 1 + 8);
}

TEST_CASE("plot: block count per level equals the windows in which the tensor is touched") {
  Schedule s = fused(4, 3);
  const auto rows = th::collect(s);
  const auto summary = looptrace::summarize(s);
  for (const std::string l : {"MainMemory", "GlobalBuffer"}) {
    PlotData d = build_plot(s, {}, level(l));
    for (const auto& p : d.panels) {
      std::int64_t touched = 0;
      for (const auto& w : summary.tile_lifetime(l, p.tensor)) {
        bool hit = false;
        for (const auto& [t, trace, e] : rows)
          hit = hit || (s.traces[trace].tensor == p.tensor && t >= w.from && t < w.to);
        touched += hit;
      }
      CAPTURE(l);
      CAPTURE(p.tensor);
      CHECK(p.n_blocks == touched);
      CHECK(std::int64_t(p.blocks.size()) == touched);
    }
  }
}

TEST_CASE("plot: a prefix clips blocks and adds a truncation note") {
  Schedule s = fused();
  TraceOptions prefix = tensors({"T0"});
  prefix.max_timesteps = 40;
  PlotData d = build_plot(s, prefix, level("GlobalBuffer"));
  CHECK(d.truncated);
  CHECK(spans(panel(d, "T0")) == Spans{{0, 16}, {32, 40}});
  const std::string svg = render_svg(d, level("GlobalBuffer"));
  CHECK(matches(svg, "class=\"note\"[^>]*>([^<]*)<") ==
        std::vector<std::string>{"truncated at --max-timesteps: timesteps [0, 40) of 256"});
  CHECK(matches(render_svg(build_plot(s, {})), "(class=\"note\")").empty());
  // A zoom or a sample was asked for: said, not called truncated.
  TraceOptions zoom = tensors({"T0"});
  zoom.from = 16, zoom.to = 48;
  PlotData z = build_plot(s, zoom);
  CHECK_FALSE(z.cut_at_max_timesteps);
  CHECK(matches(render_svg(z), "class=\"note\"[^>]*>([^<]*)<") == std::vector<std::string>{"timesteps [16, 48) of 256"});
  TraceOptions sample = tensors({"T0"});
  sample.sample_timesteps = 10;
  PlotData sampled = build_plot(s, sample);
  CHECK(sampled.sampled_timesteps == 10);
  CHECK_FALSE(sampled.sampled_for_speed);
  CHECK(matches(render_svg(sampled), "class=\"note\"[^>]*>([^<]*)<") ==
        std::vector<std::string>{"timesteps [0, 256) of 256; drawn from 10 sampled timesteps"});
}

TEST_CASE("plot: errors name what exists") {
  Schedule s = fused();
  auto no_access = th::spec_error([&] {
    TraceOptions o = tensors({"T0", "T2"});
    o.einsums = {"Matmul1"};
    build_plot(s, o);
  });
  CHECK(th::contains(no_access.message(), "'T0', which has no accesses"));
  CHECK(th::contains(no_access.message(), "T2"));

  auto unknown_level = th::spec_error([&] { build_plot(s, {}, level("L9")); });
  CHECK(th::contains(unknown_level.message(), "'L9' holds none of the plotted tensors"));
  CHECK(th::contains(unknown_level.message(), "MainMemory (T0, T2, W0, W1)"));
  CHECK(th::contains(unknown_level.message(), "GlobalBuffer"));

  // MainMemory holds T0, T2, W0, W1 but not the intermediate T1.
  auto not_held = th::spec_error([&] { build_plot(s, tensors({"T1"}), level("MainMemory")); });
  CHECK(th::contains(not_held.message(), "'MainMemory' holds none of the plotted tensors (T1)"));

  PlotOptions rank;
  rank.rank = "K";
  auto no_rank = th::spec_error([&] { build_plot(s, tensors({"T0", "W0"}), rank); });
  CHECK(th::contains(no_rank.message(), "their ranks: M, N0, N1"));

  TraceOptions none;
  none.max_timesteps = 0;
  CHECK(th::contains(th::spec_error([&] { build_plot(s, none); }).message(), "nothing to plot"));
}

TEST_CASE("plot: past max_points, a fixed raster per panel counts every access") {
  Schedule s = fused();
  PlotOptions small = level("GlobalBuffer");
  small.max_points = 100;
  small.raster_columns = 64;
  small.raster_rows = 8;
  PlotData d = build_plot(s, {}, small);
  REQUIRE(d.raster);
  // Raster colours are the Einsums: no column mixes them (each phase lasts 16
  // timesteps, a column 4).
  REQUIRE(d.series.size() == 2);
  CHECK(d.series[0].label == "Matmul0");
  CHECK(d.series[1].label == "Matmul1");
  const auto summary = looptrace::summarize(s);
  for (const auto& p : d.panels) {
    CAPTURE(p.tensor);
    CHECK(p.points.empty());
    CHECK(p.density.columns == 64);
    CHECK(p.density.rows == std::min<std::int64_t>(8, p.y_size));
    std::int64_t expected = 0;
    for (const auto& t : summary.traces)
      if (t.tensor == p.tensor) expected += t.n_accesses;
    CHECK(std::accumulate(p.density.counts.begin(), p.density.counts.end(), std::int64_t(0)) == expected);
  }
  CHECK(panel(d, "T0").n_blocks == 8);
  // T0's first block covers timesteps [0, 16): columns 0..3, row 0 (elements 0..3).
  const auto& t0 = panel(d, "T0").density;
  CHECK(t0.tiles[0] == 1);
  CHECK(t0.tiles[3] == 1);
  CHECK(t0.tiles[4] == 0);
  // T1 is written by Matmul0 in [32m, 32m + 16) and read by Matmul1 after: column 0
  // (timesteps 0..3) is Matmul0's, column 4 (16..19) Matmul1's; row 0 is elements 0..3.
  const auto& t1 = panel(d, "T1").density;
  CHECK(t1.series[0] == 0);
  CHECK(t1.series[4] == 1);
  CHECK(t1.series[std::size_t(t1.columns)] == looptrace::DensityRaster::kNoSeries);  // row 1: m = 1 from t = 32
  const std::string svg = render_svg(d, small);
  CHECK(matches(svg, "(class=\"points\")").empty());
  // 256 timesteps in 64 columns; T0, T1, T2 (32 elements) in 8 rows, W0, W1 (16) in 8.
  CHECK(legend(svg) == std::vector<std::string>{
                           "Matmul0", "Matmul1",
                           "share of a cell's elements touched at a timestep (up to 1/8, ..., all)",
                           "GlobalBuffer tile (live span)"});
  // Each panel says what its cell is.
  std::vector<std::string> cells;
  for (const auto& p : d.panels) cells.push_back(p.density.y_per_row == 4 ? "cell: 4 timesteps \u00d7 4 elements"
                                                                          : "cell: 4 timesteps \u00d7 2 elements");
  CHECK(matches(svg, "class=\"cell-size\"[^>]*>([^<]*)<") == cells);
  CHECK(matches(svg, "(class=\"xgrid\")").size() == d.panels.size());
  for (const auto& p : d.panels)
    for (std::size_t c = 0; c < p.density.counts.size(); ++c) {
      CHECK((p.density.counts[c] == 0) == (p.density.timesteps[c] == 0));
      CHECK(p.touched_share(c) <= 1.0);
      if (p.density.counts[c]) CHECK(p.touched_share(c) > 0);
    }
  // Cells are drawn in their Einsum's colour.
  CHECK(matches(svg, "class=\"density\" data-series=\"([^\"]*)\"").size() >= 2);
  for (const auto& colour : matches(svg, "class=\"density\" data-series=\"Matmul0\"[^>]*fill=\"([^\"]*)\""))
    CHECK(colour == d.series[0].color);

  // By access, one column for all of time: T1's cells hold writes and reads; a row is
  // one m: 4 elements, each written 4 times (n0) and read 4 times (n2): 32 accesses.
  PlotOptions one_column = small;
  one_column.raster_columns = 1;
  one_column.color_by = PlotColor::access;
  PlotData mixed = build_plot(s, tensors({"T1"}), one_column);
  REQUIRE(mixed.series.size() == 1);
  CHECK(mixed.series[0].label == "read and write");
  // Row m is touched at 32 timesteps (16 writing, then 16 reading), each touching one
  // of its 4 elements: a share of 1/4, the second of eight shades.
  const PlotPanel& t1m = mixed.panels.front();
  CHECK(t1m.density.counts[0] == 32);
  CHECK(t1m.density.timesteps[0] == 32);
  CHECK(t1m.touched_share(0) == doctest::Approx(0.25));
  const std::string one = render_svg(mixed, one_column);
  CHECK(matches(one, "class=\"cell-size\"[^>]*>([^<]*)<")[0] == "cell: 256 timesteps \u00d7 4 elements");
  CHECK(matches(one, "class=\"density\"[^>]*data-shade=\"([0-9])\"") == std::vector<std::string>{"1"});

  // Too many accesses to visit: counted from tile boxes at every timestep, the same.
  PlotOptions quick = one_column;
  quick.max_visited = 100;
  PlotData fast = build_plot(s, tensors({"T1"}), quick);
  CHECK(fast.from_boxes);
  CHECK(fast.sampled_timesteps == 0);
  CHECK(fast.panels.front().density.counts == t1m.density.counts);
  CHECK(fast.panels.front().density.tiles == t1m.density.tiles);
  CHECK(matches(render_svg(fast, quick), "(class=\"note\")").empty());
}

TEST_CASE("plot: a raster too large to visit and not made of boxes is drawn from sampled timesteps") {
  // A[2s + t] with s spatial: a timestep touches every other element of four, no box.
  const Schedule s = th::compile_text(
      "workload:\n  iteration_space_shape: {t: 0 <= t < 256, s: 0 <= s < 4}\n"
      "  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: {X: 2*s + t}}\n"
      "    - {name: B, projection: [t], output: True}\n"
      "mapping:\n  nodes:\n  - !Storage {component: DRAM, tensors: [A, B]}\n"
      "  - !Temporal {rank_variable: t, tile_shape: 1}\n  - !Spatial {rank_variable: s, tile_shape: 1}\n"
      "  - !Compute {einsum: E}\n");
  PlotOptions quick;
  quick.max_points = 0;
  quick.raster_columns = 4;
  quick.max_visited = 100;
  PlotData fast = build_plot(s, {}, quick);
  CHECK_FALSE(fast.from_boxes);
  CHECK(fast.sampled_for_speed);
  CHECK(fast.sampled_timesteps == 32);  // 1280 accesses: 8 timesteps a column, above 256 x 100 / 1280
  std::int64_t visited = 0;
  for (const auto& p : fast.panels)
    for (std::uint32_t c : p.density.counts) visited += c;
  CHECK(visited == 32 * 5);  // four A and one B a timestep
  CHECK(th::contains(matches(render_svg(fast, quick), "class=\"note\"[^>]*>([^<]*)<").at(0),
                     "drawn from 32 sampled timesteps (too many to visit"));
  quick.max_visited = 0;
  CHECK(build_plot(s, {}, quick).sampled_timesteps == 0);
}

TEST_CASE("plot: a y zoom keeps the panels that have y in range and draws only those") {
  Schedule s = fused();
  PlotOptions zoom;
  zoom.y_from = 4;
  zoom.y_to = 12;
  // T0[m, n0] is element 4m + n0: elements [4, 12) are rows m = 1, 2, read at
  // t = 32m + 4 n0 + n1, so 2 rows x 16 timesteps.
  PlotData d = build_plot(s, tensors({"T0"}), zoom);
  const PlotPanel& t0 = panel(d, "T0");
  CHECK(t0.y_first == 4);
  CHECK(t0.y_size == 8);
  CHECK(t0.title() == "T0 (M=8, N0=4), element [4, 12)");
  REQUIRE(t0.points.size() == 32);
  for (const auto& pt : t0.points) {
    CHECK(pt.y >= 4);
    CHECK(pt.y < 12);
    CHECK(pt.timestep / 32 == pt.y / 4);
  }
  // Past W0's 16 elements: W0's panel goes, T0's stays.
  zoom.y_from = 20;
  zoom.y_to = -1;
  CHECK(panel_names(build_plot(s, tensors({"T0", "W0"}), zoom)) == std::vector<std::string>{"T0"});
  zoom.y_from = 40;
  auto none = th::spec_error([&] { build_plot(s, tensors({"T0", "W0"}), zoom); });
  CHECK(th::contains(none.message(), "holds no y of the plotted tensors (their sizes: T0 32, W0 16)"));
  // Ticks label the zoomed range.
  zoom.y_from = 4;
  zoom.y_to = 12;
  const std::string svg = render_svg(build_plot(s, tensors({"T0"}), zoom));
  const auto labels = matches(svg, "class=\"ytick\"[^>]*>([^<]*)<");
  REQUIRE(!labels.empty());
  for (const auto& l : labels) {
    CHECK(std::stoll(l) >= 4);
    CHECK(std::stoll(l) < 12);
  }
}

TEST_CASE("plot: tick labels stay short on large axes") {
  // A reads element 25,000,000 t at timestep t: a tensor of 10^8 + 1 elements, 5 accesses.
  Schedule s = th::compile_text(
      "workload:\n  iteration_space_shape: {t: 0 <= t < 5}\n"
      "  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: {E: 25000000 * t}}\n"
      "    - {name: B, projection: [t], output: True}\n"
      "mapping:\n  nodes:\n  - !Temporal {rank_variable: t, tile_shape: 1}\n  - !Compute {einsum: E}\n");
  const std::string svg = render_svg(build_plot(s, tensors({"A"})));
  CHECK(matches(svg, "class=\"ytick\"[^>]*>([^<]*)<") == std::vector<std::string>{"0", "50M", "100M"});
  CHECK(matches(svg, "class=\"xtick\"[^>]*>([^<]*)<") == std::vector<std::string>{"0", "1", "2", "3", "4"});
}

TEST_CASE("plot: markers keep a visible size; crowded timesteps make rasters") {
  // 10^8 elements in 180 pixels: markers would be far under a pixel tall.
  Schedule tall = th::compile_text(
      "workload:\n  iteration_space_shape: {t: 0 <= t < 5}\n"
      "  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: {E: 25000000 * t}}\n"
      "    - {name: B, projection: [t], output: True}\n"
      "mapping:\n  nodes:\n  - !Temporal {rank_variable: t, tile_shape: 1}\n  - !Compute {einsum: E}\n");
  PlotData d = build_plot(tall, tensors({"A"}));
  REQUIRE(!d.raster);
  const auto widths = matches(render_svg(d), "class=\"points\"[^>]*stroke-width=\"([^\"]*)\"");
  REQUIRE(widths.size() == 1);
  CHECK(std::stod(widths[0]) >= looptrace::kMinMarkerPixels);
  // 256 timesteps fit across 846 pixels at 3 px each (282); 2048 do not, however few
  // the accesses.
  PlotOptions many_points;
  many_points.max_points = 1'000'000;
  CHECK(!build_plot(fused(8, 4), tensors({"T0"}), many_points).raster);
  CHECK(build_plot(fused(16, 8), tensors({"T0"}), many_points).raster);
  many_points.width = 6300;  // 6186 pixels: 2062 markers fit
  CHECK(!build_plot(fused(16, 8), tensors({"T0"}), many_points).raster);
  // Cells cover whole timesteps and elements: 2048 timesteps in at most 280 columns is
  // 8 a column (256 columns); T0's 128 elements in at most 60 rows is 3 a row (43 rows,
  // the last one partly past the panel), W0's 64 is 2 a row.
  PlotData d16 = build_plot(fused(16, 8), tensors({"T0", "W0"}));
  REQUIRE(d16.raster);
  CHECK(panel(d16, "T0").density.columns == 256);
  CHECK(panel(d16, "T0").density.rows == 43);
  CHECK(panel(d16, "W0").density.rows == 32);
  CHECK(matches(render_svg(d16), "class=\"cell-size\"[^>]*>([^<]*)<") ==
        std::vector<std::string>{"cell: 8 timesteps \u00d7 3 elements", "cell: 8 timesteps \u00d7 2 elements"});
}

TEST_CASE("plot: a long trace stays a small file") {
  Schedule s = fused(32, 32);  // 3 accesses per timestep, 65536 timesteps: past the default 150,000 points
  PlotData d = build_plot(s, {}, level("GlobalBuffer"));
  CHECK(d.raster);
  const std::string svg = render_svg(d, level("GlobalBuffer"));
  CHECK(svg.size() < 3u << 20);
  CHECK(svg.rfind("</svg>") != std::string::npos);
}

// build_plot visiting every access (`visit`) and from boxes (`boxes`); none where the
// options do not apply (a rank none of the tensors has, a level that holds none).
std::optional<std::pair<PlotData, PlotData>> both_ways(const Schedule& s, const PlotOptions& visit,
                                                       const PlotOptions& boxes) {
  try {
    PlotData a = build_plot(s, {}, visit);
    return std::pair<PlotData, PlotData>{std::move(a), build_plot(s, {}, boxes)};
  } catch (const looptrace::SpecError&) {
    return std::nullopt;
  }
}

// Rasters too large to visit are counted from each timestep's tile boxes; over every
// timestep they equal the visit of every access, cell by cell.
TEST_CASE("plot: rasters from tile boxes equal the visit of every access") {
  const std::string tiled =
      "workload:\n  iteration_space_shape: {m: 0 <= m < 7, k: 0 <= k < 5, n: 0 <= n < 6}\n"
      "  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: [m, k]}\n"
      "    - {name: B, projection: [k, n]}\n    - {name: Z, projection: [m, n], output: True}\n"
      "mapping:\n  nodes:\n  - !Storage {component: DRAM, tensors: [A, B, Z]}\n"
      "  - !Temporal {rank_variable: m, tile_shape: 3}\n  - !Temporal {rank_variable: n, tile_shape: 4}\n"
      "  - !Spatial {rank_variable: n, tile_shape: 1}\n  - !Temporal {rank_variable: k, tile_shape: 2}\n"
      "  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: E}\n";
  // I[2p + r] with p spatial: a timestep touches every other element, no box, so the
  // accesses are visited.
  std::string strided = th::kConv1d;
  strided.replace(strided.find("p + r"), 5, "2*p + r");
  strided.replace(strided.find("!Temporal {rank_variable: p"), 9, "!Spatial");
  struct Case {
    const char* name;
    Schedule schedule;
  };
  std::vector<Case> cases;
  cases.push_back({"fused 16 x 8", fused(16, 8)});
  cases.push_back({"tiled, imperfect, spatial", th::compile_text(tiled)});
  cases.push_back({"conv1d halo", th::compile_text(th::kConv1d)});
  cases.push_back({"strided", th::compile_text(strided)});
  // m < 4 in tiles of 3, then of 1: the last outer tile's inner iterations 1 and 2 are
  // empty, so a block ends at its last access, not its last iteration.
  cases.push_back({"imperfect, empty inner iterations",
                   th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n  - name: E\n"
                                    "    tensor_accesses: [{name: A, projection: [m]}, {name: Z, projection: [m], output: True}]\n"
                                    "mapping:\n  nodes:\n  - !Storage {component: MainMemory, tensors: [A, Z]}\n"
                                    "  - !Temporal {rank_variable: m, tile_shape: 3}\n"
                                    "  - !Storage {component: GlobalBuffer, tensors: [A, Z]}\n"
                                    "  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: E}\n")});
  // Points: a memory level's blocks from boxes equal those of the visit.
  for (const auto& c : cases)
    for (std::string memory_level : std::vector<std::string>{"MainMemory", "GlobalBuffer", "DRAM"})
      for (const char* rank : {"", "M", "K"}) {
        CAPTURE(std::string(c.name));
        CAPTURE(memory_level);
        CAPTURE(std::string(rank));
        PlotOptions boxes;
        boxes.max_points = 10'000'000;
        boxes.width = 20000;  // markers fit: points, not rasters
        boxes.memory_level = memory_level;
        boxes.rank = rank;
        PlotOptions visit = boxes;
        visit.max_visited = 0;
        auto both = both_ways(c.schedule, visit, boxes);
        if (!both) continue;
        const auto& [a, b] = *both;
        REQUIRE(!a.raster);
        CHECK_FALSE(a.blocks_from_boxes);
        CHECK(b.blocks_from_boxes == (std::string(c.name) != "strided"));
        REQUIRE(a.panels.size() == b.panels.size());
        for (std::size_t p = 0; p < a.panels.size(); ++p) {
          CAPTURE(a.panels[p].tensor);
          CHECK(a.panels[p].n_blocks == b.panels[p].n_blocks);
          REQUIRE(a.panels[p].blocks.size() == b.panels[p].blocks.size());
          for (std::size_t k = 0; k < a.panels[p].blocks.size(); ++k) {
            CHECK(a.panels[p].blocks[k].from == b.panels[p].blocks[k].from);
            CHECK(a.panels[p].blocks[k].to == b.panels[p].blocks[k].to);
            CHECK(a.panels[p].blocks[k].runs == b.panels[p].blocks[k].runs);
          }
          CHECK(a.panels[p].points == b.panels[p].points);
        }
      }
  std::int64_t compared = 0;
  for (const auto& c : cases)
    for (std::string memory_level : std::vector<std::string>{"", "MainMemory", "GlobalBuffer", "DRAM"})
    for (const char* rank : {"", "M", "K"})
      for (std::int64_t y_to : {std::int64_t(-1), std::int64_t(5)})
      for (std::int64_t columns : {std::int64_t(7), std::int64_t(4096)}) {  // 4096: a timestep a column
        CAPTURE(std::string(c.name));
        CAPTURE(memory_level);
        CAPTURE(std::string(rank));
        CAPTURE(y_to);
        CAPTURE(columns);
        if (!memory_level.empty() &&
            std::find(c.schedule.memory_levels.begin(), c.schedule.memory_levels.end(), memory_level) ==
                c.schedule.memory_levels.end())
          continue;
        PlotOptions visit;
        visit.memory_level = memory_level;
        visit.max_points = 0;
        visit.max_visited = 0;
        visit.raster_columns = columns;
        visit.raster_rows = 3;
        visit.rank = rank;
        visit.y_from = y_to > 0 ? 1 : 0;
        visit.y_to = y_to;
        PlotOptions boxes = visit;
        boxes.max_visited = 1;
        auto both = both_ways(c.schedule, visit, boxes);
        if (!both) continue;
        const auto& [a, b] = *both;
        // Boxes unless an image is strided, or a level's blocks are asked for under a y
        // zoom (their live spans are those of the accesses in the zoom).
        CHECK(b.from_boxes == (std::string(c.name) != "strided" && (memory_level.empty() || y_to < 0)));
        CHECK_FALSE(a.from_boxes);
        if (b.sampled_timesteps > 0) continue;  // visited at a sample: not comparable
        REQUIRE(a.panels.size() == b.panels.size());
        REQUIRE(a.series.size() == b.series.size());
        for (std::size_t k = 0; k < a.series.size(); ++k) CHECK(a.series[k].label == b.series[k].label);
        for (std::size_t p = 0; p < a.panels.size(); ++p) {
          CAPTURE(a.panels[p].tensor);
          CHECK(a.panels[p].density.counts == b.panels[p].density.counts);
          CHECK(a.panels[p].density.timesteps == b.panels[p].density.timesteps);
          CHECK(a.panels[p].density.series == b.panels[p].density.series);
          CHECK(a.panels[p].density.tiles == b.panels[p].density.tiles);
          CHECK(a.panels[p].n_blocks == b.panels[p].n_blocks);
        }
        ++compared;
      }
  CHECK(compared >= 70);  // of 5 cases x levels x ranks x zooms x cells, those that apply
}

TEST_CASE("plot: with a rank on y, a cell's share is of all the elements of its coordinates") {
  // A[m, k], 8 x 8, a timestep per m touching all 8 k: one coordinate of a row's two,
  // half its 16 elements.
  const Schedule s = th::compile_text(
      "workload:\n  iteration_space_shape: {m: 0 <= m < 8, k: 0 <= k < 8}\n  einsums:\n  - name: E\n"
      "    tensor_accesses: [{name: A, projection: [m, k]}, {name: Z, projection: [m], output: True}]\n"
      "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: E}\n");
  PlotOptions o;
  o.max_points = 0;
  o.rank = "M";
  o.raster_rows = 4;
  for (std::int64_t visited : {std::int64_t(0), std::int64_t(1)}) {
    o.max_visited = visited;
    const PlotData d = build_plot(s, tensors({"A"}), o);
    const PlotPanel& a = d.panels.front();
    REQUIRE(a.density.y_per_row == 2);
    for (std::size_t c = 0; c < a.density.counts.size(); ++c)
      if (a.density.counts[c]) CHECK(a.touched_share(c) == doctest::Approx(0.5));
  }
}
