#include "looptrace/closed_form/tile_timeline.hpp"

#include <algorithm>
#include <limits>

#include "looptrace/stages/time_selection.hpp"
#include "looptrace/stages/window_traffic.hpp"
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

// The tracks of one level, node by node; throws NotClosed.
void level_tracks(const Schedule& s, const TraceOptions& options, const TrafficPlan& plan, const TimeRange& window,
                  LevelTiles& level) {
  for (std::size_t n = 0; n < s.storages.size(); ++n) {
    const std::vector<int>& ks = plan.slots_of_storage[n];
    if (ks.empty() || s.storages[n].level != level.level) continue;
    std::vector<std::uint32_t> tensors;
    std::vector<std::int64_t> bytes;
    const std::size_t first = level.tracks.size();
    for (int k : ks) {
      const TensorInfo& info = s.tensors[plan.slots[std::size_t(k)].tensor];
      tensors.push_back(plan.slots[std::size_t(k)].tensor);
      TileTrack& t = level.tracks.emplace_back();
      t.storage = std::uint32_t(n);
      t.tensor = info.name;
      if (info.bits_per_value) t.bytes_per_value = (*info.bits_per_value + 7) / 8;
      bytes.push_back(t.bytes_per_value.value_or(0));
    }
    const movement_boxes::TallyObserver observe = [&](const WindowRun& w,
                                                      const std::vector<movement_boxes::WindowTally>& tallies) {
      for (std::size_t i = 0; i < tallies.size(); ++i)
        level.tracks[first + i].runs.push_back({w, tallies[i].tile, tallies[i].fills, tallies[i].drains});
    };
    movement_boxes::closed_form_node(s, std::uint32_t(n), tensors, options.einsums, bytes, window, nullptr, 0, {},
                                     observe);
  }
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
  out.einsum_spans = summarize(s, options, counts).einsum_timespans;
  std::vector<std::uint32_t> nodes(s.storages.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) nodes[n] = std::uint32_t(n);
  const TrafficPlan plan = TrafficPlan::make(s, nodes, options.tensors);
  for (const std::string& name : s.memory_levels) {
    LevelTiles level;
    level.level = name;
    try {
      level_tracks(s, options, plan, out.window, level);
    } catch (const movement_boxes::NotClosed& e) {
      level.tracks.clear();
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

std::int64_t span_count(const TileTrack& track, RunsPerSpan g) {
  if (g <= 0) {
    std::int64_t n = 0;
    for (const TileRun& r : track.runs) n = checked(__int128(n) + r.windows.count);
    return n;
  }
  return (std::int64_t(track.runs.size()) + g - 1) / g;
}

std::vector<TileSpan> tile_spans(const TileTrack& track, RunsPerSpan g) {
  std::vector<TileSpan> out;
  if (g <= 0) {
    for (const TileRun& r : track.runs)
      for (std::int64_t i = 0; i < r.windows.count; ++i) {
        const TimeRange w = r.windows.at(i);
        out.push_back({w.from, w.to, 1, r.tile, r.fills, r.drains, true});
      }
    return out;
  }
  for (std::size_t i = 0; i < track.runs.size(); i += std::size_t(g)) {
    const std::size_t end = std::min(track.runs.size(), i + std::size_t(g));
    TileSpan span{track.runs[i].windows.start, 0, 0, 0, 0, 0, true};
    __int128 windows = 0, fills = 0, drains = 0;
    for (std::size_t k = i; k < end; ++k) {
      const TileRun& r = track.runs[k];
      const bool back_to_back = r.windows.count == 1 || r.windows.period == r.windows.length;
      span.exact = span.exact && back_to_back && (k == i || (r.windows.start == span.to && r.tile == span.tile));
      span.to = std::max(span.to, r.windows.last().to);
      span.tile = std::max(span.tile, r.tile);
      windows += r.windows.count;
      fills += __int128(r.fills) * r.windows.count;
      drains += __int128(r.drains) * r.windows.count;
    }
    span.windows = checked(windows), span.fills = checked(fills), span.drains = checked(drains);
    out.push_back(span);
  }
  return out;
}

RunsPerSpan finest_within(const TileTimeline& timeline, std::int64_t max_spans) {
  std::int64_t most_runs = 1;
  for (const LevelTiles& l : timeline.levels)
    for (const TileTrack& t : l.tracks) most_runs = std::max(most_runs, std::int64_t(t.runs.size()));
  auto total = [&](RunsPerSpan g) {
    __int128 n = 0;
    for (const LevelTiles& l : timeline.levels)
      for (const TileTrack& t : l.tracks) n += span_count(t, g);
    return n;
  };
  if (total(0) <= max_spans) return 0;
  RunsPerSpan g = 1;
  while (g < most_runs && total(g) > max_spans) g = std::min(most_runs, g * 2);
  return g;
}

std::vector<FootprintStep> footprint_steps(const LevelTiles& level, RunsPerSpan g) {
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
