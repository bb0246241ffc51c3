#include "looptrace/closed_form/tile_timeline.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "looptrace/stages/time_selection.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stages/window_traffic.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/support/error.hpp"
#include "movement_boxes.hpp"

namespace looptrace {

bool LevelTiles::has_bytes() const {
  return !tracks.empty() &&
         std::all_of(tracks.begin(), tracks.end(), [](const TileTrack& t) { return t.bytes_per_value.has_value(); });
}

namespace {

std::int64_t checked(__int128 v) {
  if (v > std::numeric_limits<std::int64_t>::max())
    throw SpecError("a timeline figure exceeds 2^63 - 1: select fewer timesteps (--from/--to) or tensors");
  return std::int64_t(v);
}

// Runs of one level kept at most (memory follows them: 56 bytes each, 56 MiB in all).
constexpr std::size_t kMaxRuns = std::size_t(1) << 20;
// A level the closed form cannot count is enumerated up to this many accesses (about
// a second), else not drawn.
constexpr std::int64_t kMaxVisited = std::int64_t(1) << 27;

// The tracks of node `n` (one per tensor it holds that is traced), appended to the level's.
std::vector<std::uint32_t> add_tracks(const Schedule& s, const TrafficPlan& plan, std::size_t n, LevelTiles& level) {
  std::vector<std::uint32_t> tensors;
  for (int k : plan.slots_of_storage[n]) {
    const TensorInfo& info = s.tensors[plan.slots[std::size_t(k)].tensor];
    tensors.push_back(plan.slots[std::size_t(k)].tensor);
    TileTrack& t = level.tracks.emplace_back();
    t.storage = std::uint32_t(n);
    t.tensor = info.name;
    if (info.bits_per_value) t.bytes_per_value = (*info.bits_per_value + 7) / 8;
  }
  return tensors;
}

bool of_level(const Schedule& s, const TrafficPlan& plan, std::size_t n, const LevelTiles& level) {
  return !plan.slots_of_storage[n].empty() && s.storages[n].level == level.level;
}

// `w` after the runs so far: it extends the last run when it moves the same and keeps its step.
void append(std::vector<TileRun>& runs, const TimeRange& w, const TileTraffic& t);

// One (node, tensor) track from the streaming engine that `movement` enumerates it with
// (one pass over that tensor's accesses). False past kMaxRuns runs.
bool enumerated_track(const Schedule& s, TraceOptions options, std::uint32_t node, std::uint32_t tensor,
                      std::size_t& runs, TileTrack& track) {
  options.tensors = {s.tensors[tensor].name};
  auto traffic = trace_pipeline(s, options) | tile_windows(std::vector<std::uint32_t>{node}, options.tensors) | window_traffic();
  for (auto events = traffic.next_batch(); !events.empty(); events = traffic.next_batch())
    for (const TileTraffic& t : events) {
      if (t.kind != TileTraffic::Kind::close || t.storage != node || t.tensor != tensor) continue;
      const std::size_t before = track.runs.size();
      append(track.runs, {t.start, t.end}, t);
      if ((runs += track.runs.size() - before) > kMaxRuns) return false;
    }
  return true;
}

// The tracks of one level, node by node, in closed form; a node that is not, one
// (node, tensor) slot at a time, each in closed form where it is and else enumerated
// (as `movement` does) while the trace has at most `visitable` accesses. Throws
// NotClosed when a slot can be neither.
void level_tracks(const Schedule& s, const TraceOptions& options, const TrafficPlan& plan, const TimeRange& window,
                  bool visitable, LevelTiles& level) {
  std::size_t runs = 0;
  for (std::size_t n = 0; n < s.storages.size(); ++n) {
    if (!of_level(s, plan, n, level)) continue;
    const std::size_t first = level.tracks.size();
    const std::vector<std::uint32_t> tensors = add_tracks(s, plan, n, level);
    std::vector<std::int64_t> bytes;
    for (std::size_t i = first; i < level.tracks.size(); ++i) bytes.push_back(level.tracks[i].bytes_per_value.value_or(0));
    // Runs of the tensors from `from` on go to the tracks from `first + from` on.
    auto observer = [&](std::size_t from) -> movement_boxes::TallyObserver {
      return [&, from](const WindowRun& w, const std::vector<movement_boxes::WindowTally>& tallies) {
        if ((runs += tallies.size()) > kMaxRuns)
          throw movement_boxes::NotClosed{"more than " + std::to_string(kMaxRuns) +
                                          " runs of alike windows (select fewer timesteps: --from/--to)"};
        for (std::size_t i = 0; i < tallies.size(); ++i)
          level.tracks[first + from + i].runs.push_back({w, tallies[i].tile, tallies[i].fills, tallies[i].drains});
      };
    };
    const std::size_t runs_before = runs;
    try {
      movement_boxes::closed_form_node(s, std::uint32_t(n), tensors, options.einsums, bytes, window, nullptr, 0, {},
                                       observer(0));
      continue;
    } catch (const movement_boxes::NotClosed&) {
      runs = runs_before;
      for (std::size_t i = first; i < level.tracks.size(); ++i) level.tracks[i].runs.clear();
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      TileTrack& track = level.tracks[first + i];
      const std::size_t slot_before = runs;
      try {
        movement_boxes::closed_form_node(s, std::uint32_t(n), {tensors[i]}, options.einsums, {bytes[i]}, window,
                                         nullptr, 0, {}, observer(i));
        continue;
      } catch (const movement_boxes::NotClosed& e) {
        runs = slot_before;
        track.runs.clear();
        if (!visitable) throw movement_boxes::NotClosed{track.tensor + ": " + e.reason};
        if (level.not_closed.empty()) level.not_closed = track.tensor + ": " + e.reason;
      }
      if (!enumerated_track(s, options, std::uint32_t(n), tensors[i], runs, track))
        throw movement_boxes::NotClosed{level.not_closed + "; enumerated, more than " + std::to_string(kMaxRuns) +
                                        " runs of alike windows"};
      level.enumerated = true;
    }
  }
}

// `w` after the runs so far: it extends the last run when it moves the same and keeps its step.
void append(std::vector<TileRun>& runs, const TimeRange& w, const TileTraffic& t) {
  if (!runs.empty()) {
    TileRun& r = runs.back();
    const bool alike = r.tile == t.tile && r.fills == t.fills && r.drains == t.drains &&
                       r.windows.length == w.to - w.from && w.from > r.windows.start;
    const std::int64_t step = w.from - r.windows.last().from;
    if (alike && (r.windows.count == 1 || step == r.windows.period) && step >= r.windows.length) {
      r.windows.period = step;
      ++r.windows.count;
      return;
    }
  }
  runs.push_back({{w.from, w.to - w.from, 0, 1}, t.tile, t.fills, t.drains});
}

// The Einsums with a leaf below a node of `level`, in the order of `spans`.
std::vector<std::string> einsums_below(const Schedule& s, const std::string& level,
                                       const std::vector<EinsumSpan>& spans) {
  std::vector<std::string> out;
  for (const EinsumSpan& span : spans)
    for (const LeafSchedule& leaf : s.leaves)
      if (leaf.einsum == span.einsum &&
          std::any_of(leaf.storages.begin(), leaf.storages.end(),
                      [&](int n) { return s.storages[std::size_t(n)].level == level; })) {
        out.push_back(span.einsum);
        break;
      }
  return out;
}

}  // namespace

TileTimeline tile_timeline(const Schedule& s, const TraceOptions& options) {
  if (options.sample_timesteps)
    throw SpecError("a timeline needs whole stretches of time: use --from/--to, --max-timesteps or --shard, "
                    "not --sample-timesteps");
  TileTimeline out;
  out.window = TimeSelection::from_options(options, s.n_timesteps).window;
  out.n_timesteps = s.n_timesteps;
  SummaryOptions counts;
  counts.windows = WindowsForm::none;
  const TraceSummary summary = summarize(s, options, counts);
  out.einsum_spans = summary.einsum_timespans;
  __int128 accesses = 0;  // what enumerating a level would visit, at most
  for (const TraceCount& t : summary.traces) accesses += t.n_accesses;
  std::vector<std::uint32_t> nodes(s.storages.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) nodes[n] = std::uint32_t(n);
  const TrafficPlan plan = TrafficPlan::make(s, nodes, options.tensors);
  for (const std::string& name : s.memory_levels) {
    LevelTiles level;
    level.level = name;
    try {
      level_tracks(s, options, plan, out.window, accesses <= kMaxVisited, level);
    } catch (const movement_boxes::NotClosed& e) {  // not drawn
      level.tracks.clear();
      level.enumerated = false;
      level.not_closed = e.reason;
    }
    if (level.tracks.empty() && level.not_closed.empty()) continue;  // holds no traced tensor
    level.einsums = einsums_below(s, name, out.einsum_spans);
    if (const ArchMemory* m = s.memory(name)) {
      if (m->size_bits) level.capacity_bits = m->size_bits;
      else level.capacity_unevaluated = m->size_text;
    }
    out.levels.push_back(std::move(level));
  }
  return out;
}

std::int64_t span_count(const TileTrack& track, const Resolution& r) {
  if (r.runs_per_span > 1) return (std::int64_t(track.runs.size()) + r.runs_per_span - 1) / r.runs_per_span;
  __int128 n = 0;
  for (const TileRun& run : track.runs) n += run.windows.count <= r.expand_up_to ? run.windows.count : 1;
  return checked(n);
}

namespace {

// Runs [i, end) of a track as one span.
TileSpan span_of(const std::vector<TileRun>& runs, std::size_t i, std::size_t end) {
  TileSpan span{runs[i].windows.start, 0, 0, 0, 0, 0, true};
  __int128 windows = 0, fills = 0, drains = 0;
  for (std::size_t k = i; k < end; ++k) {
    const TileRun& r = runs[k];
    const bool back_to_back = r.windows.count == 1 || r.windows.period == r.windows.length;
    span.exact = span.exact && back_to_back && (k == i || (r.windows.start == span.to && r.tile == span.tile));
    span.to = std::max(span.to, r.windows.last().to);
    span.tile = std::max(span.tile, r.tile);
    windows += r.windows.count;
    fills += __int128(r.fills) * r.windows.count;
    drains += __int128(r.drains) * r.windows.count;
  }
  span.windows = checked(windows), span.fills = checked(fills), span.drains = checked(drains);
  return span;
}

}  // namespace

std::vector<TileSpan> tile_spans(const TileTrack& track, const Resolution& res) {
  std::vector<TileSpan> out;
  const std::size_t g = std::size_t(std::max<std::int64_t>(res.runs_per_span, 1));
  for (std::size_t i = 0; i < track.runs.size(); i += g) {
    const TileRun& r = track.runs[i];
    if (g > 1 || r.windows.count > res.expand_up_to) {
      out.push_back(span_of(track.runs, i, std::min(track.runs.size(), i + g)));
      continue;
    }
    for (std::int64_t k = 0; k < r.windows.count; ++k) {
      const TimeRange w = r.windows.at(k);
      out.push_back({w.from, w.to, 1, r.tile, r.fills, r.drains, true});
    }
  }
  return out;
}

std::vector<FootprintStep> footprint_steps(const LevelTiles& level, const Resolution& g) {
  struct Change {
    std::int64_t at, elements, bytes;
  };
  std::vector<Change> changes;
  const bool bytes = level.has_bytes();
  for (const TileTrack& t : level.tracks) {
    const std::int64_t per = bytes ? *t.bytes_per_value : 0;
    for (const TileSpan& s : tile_spans(t, g)) {
      const std::int64_t b = checked(__int128(s.tile) * per);
      changes.push_back({s.from, s.tile, b});
      changes.push_back({s.to, -s.tile, -b});
    }
  }
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) { return a.at < b.at; });
  std::vector<FootprintStep> out;
  __int128 elements = 0, held_bytes = 0;
  for (std::size_t i = 0; i < changes.size();) {
    const std::int64_t at = changes[i].at;
    for (; i < changes.size() && changes[i].at == at; ++i) elements += changes[i].elements, held_bytes += changes[i].bytes;
    const FootprintStep step{at, checked(elements), checked(held_bytes)};
    if (!out.empty() && out.back().elements == step.elements && out.back().bytes == step.bytes) continue;
    out.push_back(step);
  }
  return out;
}

}  // namespace looptrace
