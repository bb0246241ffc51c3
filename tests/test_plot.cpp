// The picture: panels, labels, legend, memory-level tiles clipped to live spans, errors,
// and the switch to bounded density rasters, checked on the bundled fused example
// (two matmuls fused along m: per m, Matmul0 for 16 timesteps, then Matmul1 for 16).
#include <doctest/doctest.h>

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
  CHECK(block.runs[0].lo == 12);
  CHECK(block.runs[0].hi == 16);
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
        std::vector<std::string>{"truncated: timesteps [0, 40) of 256"});
  CHECK(matches(render_svg(build_plot(s, {})), "(class=\"note\")").empty());
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
  CHECK(d.series.empty());
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
  const std::string svg = render_svg(d, small);
  CHECK(matches(svg, "(class=\"points\")").empty());
  CHECK(legend(svg) == std::vector<std::string>{"accesses per cell (1 to 4)",
                                                "GlobalBuffer tile (live span)"});
}

TEST_CASE("plot: a long trace stays a small file") {
  Schedule s = fused(32, 32);  // 3 accesses per timestep, 65536 timesteps: past the default 150,000 points
  PlotData d = build_plot(s, {}, level("GlobalBuffer"));
  CHECK(d.raster);
  const std::string svg = render_svg(d, level("GlobalBuffer"));
  CHECK(svg.size() < 3u << 20);
  CHECK(svg.rfind("</svg>") != std::string::npos);
}
