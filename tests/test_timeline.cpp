// The timeline (issue 30): the closed-form tile runs against the worked example and the
// enumerating engine window by window, footprints against `movement`'s peaks, and the
// JSON against the trace-event format (required fields, counters in time order, slices
// nested per track, the event bound).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "helpers.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/closed_form/tile_timeline.hpp"
#include "looptrace/sinks/timeline.hpp"
#include "looptrace/stages/window_traffic.hpp"
#include "looptrace/stream.hpp"

using namespace looptrace;

namespace {

const LevelTiles& level_of(const TileTimeline& tl, const std::string& name) {
  for (const auto& l : tl.levels)
    if (l.level == name) return l;
  FAIL("no level " << name);
  static LevelTiles none;
  return none;
}

using Steps = std::vector<std::pair<std::int64_t, std::int64_t>>;  // (at, elements)
Steps elements(const std::vector<FootprintStep>& steps) {
  Steps out;
  for (const auto& s : steps) out.emplace_back(s.at, s.elements);
  return out;
}

// The largest value of the steps and the first step reaching it.
FootprintPeak peak_of(const std::vector<FootprintStep>& steps) {
  FootprintPeak p{0, -1};
  for (const auto& s : steps)
    if (p.timestep < 0 || s.elements > p.value) p = {s.elements, s.at};
  return p;
}

// Every check of the trace-event format the timeline relies on; returns the events.
nlohmann::json validated(const std::string& text, std::int64_t max_events) {
  const nlohmann::json doc = nlohmann::json::parse(text);
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("traceEvents"));
  const nlohmann::json& events = doc["traceEvents"];
  REQUIRE(events.is_array());
  CHECK(std::int64_t(events.size()) <= max_events);
  std::map<std::pair<int, std::string>, double> last_counter;                        // (pid, name) -> ts
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;      // (pid, tid) -> [ts, end)
  std::set<int> named;
  for (const auto& e : events) {
    REQUIRE(e.is_object());
    for (const char* key : {"name", "ph", "pid", "tid", "ts"}) REQUIRE_MESSAGE(e.contains(key), key << " in " << e);
    CHECK(e["name"].is_string());
    CHECK(e["pid"].is_number_integer());
    CHECK(e["tid"].is_number_integer());
    CHECK(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    const std::string ph = e["ph"];
    if (ph == "X") {
      REQUIRE(e.contains("dur"));
      CHECK(e["dur"].get<double>() >= 0);
      slices[{e["pid"], e["tid"]}].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    } else if (ph == "C") {
      REQUIRE(e.contains("args"));
      REQUIRE(e["args"].is_object());
      CHECK(!e["args"].empty());
      for (const auto& [k, v] : e["args"].items()) CHECK_MESSAGE(v.is_number(), k);
      const auto key = std::make_pair(e["pid"].get<int>(), e["name"].get<std::string>());
      if (last_counter.count(key)) CHECK_MESSAGE(e["ts"].get<double>() > last_counter[key], "counter " << key.second);
      last_counter[key] = e["ts"];
    } else {
      REQUIRE(ph == "M");
      const std::string name = e["name"];
      CHECK((name == "process_name" || name == "thread_name" || name == "process_sort_index" ||
             name == "thread_sort_index" || name == "process_labels"));
      REQUIRE(e.contains("args"));
      if (name == "process_name") {
        named.insert(e["pid"].get<int>());
        CHECK(e["args"]["name"].is_string());
      }
      if (name == "thread_name") CHECK(e["args"]["name"].is_string());
      if (name.ends_with("sort_index")) CHECK(e["args"]["sort_index"].is_number_integer());
    }
  }
  for (auto& [track, s] : slices) {  // nested: each slice inside the open one, or after it
    CHECK(named.count(track.first));
    std::sort(s.begin(), s.end(), [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open;
    for (const auto& [from, to] : s) {
      while (!open.empty() && open.back() <= from) open.pop_back();
      if (!open.empty()) CHECK_MESSAGE(to <= open.back(), "slice [" << from << ", " << to << ") overlaps");
      open.push_back(to);
    }
  }
  return events;
}

const std::vector<std::vector<std::string>> kCorpus = {
    {"conv1d.workload.yaml", "conv1d.mapping.yaml"},
    {"conv2d.workload.yaml", "conv2d.mapping.yaml"},
    {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
    {"matmuls.yaml", "matmul_imperfect.mapping.yaml"},
    {"matmuls.yaml", "matmul_spatial.mapping.yaml"},
    {"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"},
    {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"},
    {"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"},
    {"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}};

Schedule corpus(const std::vector<std::string>& files) {
  return th::compile_corpus(files, {{"N_EINSUMS", std::int64_t(3)}, {"M", std::int64_t(6)}, {"KN", std::int64_t(4)}});
}

}  // namespace

TEST_CASE("timeline: the conv1d worked example, by hand") {
  const Schedule s = th::compile_text(th::kConv1d);
  const TileTimeline tl = tile_timeline(s);
  CHECK(tl.window.from == 0);
  CHECK(tl.window.to == 24);
  REQUIRE(tl.levels.size() == 2);
  REQUIRE(tl.einsum_spans.size() == 1);
  CHECK(tl.einsum_spans[0].first == 0);
  CHECK(tl.einsum_spans[0].end == 24);
  const LevelTiles& gb = level_of(tl, "GlobalBuffer");
  CHECK(gb.einsums == std::vector<std::string>{"Conv"});
  REQUIRE(gb.tracks.size() == 3);
  // 8 windows [3p, 3p + 3): I's tile {p, p+1, p+2} all filled, W's {0, 1, 2}, O's {p} drained.
  const std::map<std::string, std::tuple<std::int64_t, std::int64_t, std::int64_t>> want = {
      {"I", {3, 3, 0}}, {"W", {3, 3, 0}}, {"O", {1, 0, 1}}};
  for (const TileTrack& t : gb.tracks) {
    CAPTURE(t.tensor);
    const std::vector<TileSpan> spans = tile_spans(t);
    REQUIRE(spans.size() == 8);
    for (std::int64_t p = 0; p < 8; ++p) {
      const TileSpan& w = spans[std::size_t(p)];
      CHECK(w.from == 3 * p);
      CHECK(w.to == 3 * p + 3);
      CHECK(std::tie(w.tile, w.fills, w.drains) == want.at(t.tensor));
    }
    CHECK(t.runs.size() == 1);  // one run of alike windows
    CHECK(span_count(t, Resolution{1, 1}) == 1);
  }
  // The level holds 3 + 3 + 1 = 7 throughout (windows back to back), 21 at MainMemory.
  CHECK(elements(footprint_steps(gb)) == Steps{{0, 7}, {24, 0}});
  CHECK(elements(footprint_steps(gb, Resolution{1, 1})) == Steps{{0, 7}, {24, 0}});
  CHECK(elements(footprint_steps(level_of(tl, "MainMemory"))) == Steps{{0, 21}, {24, 0}});
  // A prefix of 7 cuts the third window to [6, 7): I's tile there is {2}.
  TraceOptions prefix;
  prefix.max_timesteps = 7;
  const TileTimeline cut = tile_timeline(s, prefix);
  const std::vector<TileSpan> i = tile_spans(level_of(cut, "GlobalBuffer").tracks[0]);
  REQUIRE(i.size() == 3);
  CHECK(i[2].from == 6);
  CHECK(i[2].to == 7);
  CHECK(i[2].tile == 1);
  CHECK(elements(footprint_steps(level_of(cut, "GlobalBuffer"))) == Steps{{0, 7}, {6, 3}, {7, 0}});
  TraceOptions sampled;
  sampled.sample_timesteps = 3;
  CHECK(th::contains(th::spec_error([&] { tile_timeline(s, sampled); }).message(), "--sample-timesteps"));
}

TEST_CASE("timeline: every window's tally is the enumeration's, every footprint peak movement's") {
  for (const auto& files : kCorpus) {
    CAPTURE(files[1]);
    const Schedule s = corpus(files);
    for (const std::int64_t to : {s.n_timesteps, s.n_timesteps * 2 / 3}) {
      CAPTURE(to);
      TraceOptions o;
      o.to = to;
      o.from = to < s.n_timesteps ? 1 : 0;
      const TileTimeline tl = tile_timeline(s, o);
      // The streaming engine's windows, (node, tensor name, start, end) -> tally.
      std::map<std::tuple<std::uint32_t, std::string, std::int64_t, std::int64_t>, std::tuple<std::int64_t, std::int64_t, std::int64_t>> enumerated;
      auto traffic = trace_pipeline(s, o) | tile_windows() | window_traffic();
      for (auto events = traffic.next_batch(); !events.empty(); events = traffic.next_batch())
        for (const TileTraffic& t : events)
          if (t.kind == TileTraffic::Kind::close)
            enumerated[{t.storage, s.tensors[t.tensor].name, t.start, t.end}] = {t.tile, t.fills, t.drains};
      const MovementReport movement = summarize_movement(s, o);
      std::size_t seen = 0;
      for (const LevelTiles& level : tl.levels) {
        CAPTURE(level.level);
        // What the closed form cannot count (a !Pipeline's leaves) is counted as movement
        // counts it, access by access.
        CHECK(level.enumerated == !level.not_closed.empty());
        CHECK(level.enumerated == std::any_of(movement.enumerated.begin(), movement.enumerated.end(),
                                              [&](const EnumeratedPart& p) { return p.level == level.level; }));
        for (const TileTrack& track : level.tracks)
          for (const TileSpan& w : tile_spans(track)) {
            const auto it = enumerated.find({track.storage, track.tensor, w.from, w.to});
            REQUIRE_MESSAGE(it != enumerated.end(), track.tensor << " [" << w.from << ", " << w.to << ")");
            CHECK(std::tie(w.tile, w.fills, w.drains) == it->second);
            ++seen;
          }
        const auto m = std::find_if(movement.levels.begin(), movement.levels.end(),
                                    [&](const LevelMovement& l) { return l.level == level.level; });
        REQUIRE(m != movement.levels.end());
        const FootprintPeak fine = peak_of(footprint_steps(level));
        CHECK(fine.value == m->peak_footprint.value);
        CHECK(fine.timestep == m->peak_footprint.timestep);
        // Coarser spans never hide a peak.
        for (const Resolution g : {Resolution{2, 1}, Resolution{1, 1}, Resolution{1, 2}, Resolution{1, 64}}) {
          CHECK(peak_of(footprint_steps(level, g)).value >= fine.value);
          std::int64_t windows = 0;  // every window in one span
          for (const TileTrack& track : level.tracks) {
            for (const TileSpan& w : tile_spans(track, g)) windows += w.windows;
            windows -= span_count(track);
          }
          CHECK(windows == 0);
        }
      }
      CHECK(seen == enumerated.size());  // no window left out, none made up
    }
  }
}

TEST_CASE("timeline: the JSON is trace-event JSON, bounded by --max-events") {
  int squeezed_cases = 0;
  for (const auto& files : kCorpus) {
    CAPTURE(files[1]);
    const Schedule s = corpus(files);
    const TileTimeline tl = tile_timeline(s);
    TimelineInfo info;
    const nlohmann::json events = validated(timeline_json(tl, {}, &info), TimelineOptions{}.max_events);
    CHECK(info.events == std::int64_t(events.size()));
    CHECK(info.resolution.every_window());  // small: every window its own slice
    // One process per level, named after it.
    std::vector<std::string> processes;
    for (const auto& e : events)
      if (e["ph"] == "M" && e["name"] == "process_name") processes.push_back(e["args"]["name"]);
    std::vector<std::string> levels;
    for (const auto& l : tl.levels) levels.push_back(l.level);
    CHECK(processes == levels);
    // Squeezed: merged slices that say so, still within the bound.
    std::int64_t windows = 0;
    for (const auto& l : tl.levels)
      for (const auto& t : l.tracks) windows += span_count(t);
    const std::int64_t tight = info.events - 1;  // one short of a slice per window
    TimelineOptions small;
    small.max_events = tight;
    TimelineInfo squeezed;
    std::string text;
    try {
      text = timeline_json(tl, small, &squeezed);
    } catch (const SpecError& e) {
      CHECK(th::contains(e.message(), "--max-events"));
      continue;
    }
    const nlohmann::json merged = validated(text, tight);
    CHECK(!squeezed.resolution.every_window());
    bool says_so = false;
    std::int64_t slice_windows = 0;
    for (const auto& e : merged)
      if (e["ph"] == "X" && e["cat"] == "tile") {
        says_so = says_so || e["args"].contains("merged");
        slice_windows += e["args"].value("windows", std::int64_t(1));
      }
    CHECK(says_so);
    CHECK(slice_windows == windows);  // every window in some slice
    ++squeezed_cases;
  }
  CHECK(squeezed_cases >= 5);
  const TileTimeline conv = tile_timeline(th::compile_text(th::kConv1d));
  TimelineOptions tiny;
  tiny.max_events = 5;
  CHECK(th::contains(th::spec_error([&] { timeline_json(conv, tiny); }).message(), "--max-events 5"));
}

TEST_CASE("timeline: counters by hand on conv1d, in timesteps and in cycles") {
  const TileTimeline tl = tile_timeline(th::compile_text(th::kConv1d));
  for (const std::int64_t cycles : {0, 10}) {
    CAPTURE(cycles);
    TimelineOptions o;
    o.cycles_per_timestep = cycles;
    const nlohmann::json events = validated(timeline_json(tl, o), o.max_events);
    const double c = cycles > 0 ? double(cycles) : 1;
    const std::string unit = cycles > 0 ? "cycle" : "timestep";
    int gb = -1;
    for (const auto& e : events)
      if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "GlobalBuffer") gb = e["pid"];
    REQUIRE(gb > 0);
    std::map<std::string, std::vector<std::pair<double, double>>> series;
    std::vector<std::pair<double, double>> i_slices;
    for (const auto& e : events) {
      if (e["pid"] != gb) continue;
      if (e["ph"] == "C") series[e["name"]].emplace_back(e["ts"].get<double>(), e["args"]["value"].get<double>());
      if (e["ph"] == "X" && e["name"] == "I") i_slices.emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
    }
    // Peak 7 at t = 0 (movement's), held to the end.
    CHECK(series["footprint (elements)"] == std::vector<std::pair<double, double>>{{0, 7}, {24 * c, 0}});
    // Fills: I and W bring 3 + 3 at each window's first timestep; O drains 1 at the
    // timestep after each window's last.
    const auto& fills = series["fills (elements/" + unit + ")"];
    REQUIRE(fills.size() == 16);
    CHECK(fills[0] == std::make_pair(0.0, 6 / c));
    CHECK(fills[1] == std::make_pair(1 * c, 0.0));
    CHECK(fills[2] == std::make_pair(3 * c, 6 / c));
    const auto& drains = series["drains (elements/" + unit + ")"];
    REQUIRE(drains.size() == 16);
    CHECK(drains[0] == std::make_pair(3 * c, 1 / c));
    CHECK(drains[15] == std::make_pair(25 * c, 0.0));
    REQUIRE(i_slices.size() == 8);
    CHECK(i_slices[1] == std::make_pair(3 * c, 3 * c));
  }
}
