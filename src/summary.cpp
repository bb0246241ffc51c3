#include "looptrace/summary.hpp"

#include <algorithm>
#include <map>

#include "looptrace/stream.hpp"

namespace looptrace {

std::vector<TimeRange> find_windows(const std::vector<LevelWindows>& levels,
                                    const std::string& level, const std::string& tensor) {
  for (const auto& l : levels)
    if (l.level == level)
      for (const auto& t : l.tensors)
        if (t.tensor == tensor) return t.windows;
  return {};
}

std::vector<TimeRange> TraceSummary::tile_lifetime(const std::string& level,
                                                   const std::string& tensor) const {
  return find_windows(tile_windows, level, tensor);
}

std::vector<LevelWindows> tile_windows(const Schedule& s, const TimeRange& window,
                                       const std::vector<std::string>& tensors) {
  std::vector<LevelWindows> out;
  for (const auto& level : s.memory_levels) out.push_back({level, {}});
  auto keeps = [&](const std::string& t) {
    return tensors.empty() || std::find(tensors.begin(), tensors.end(), t) != tensors.end();
  };
  for (const auto& storage : s.storages) {
    auto level = std::find_if(out.begin(), out.end(),
                              [&](const auto& l) { return l.level == storage.level; });
    std::vector<TimeRange> windows;
    if (storage.duration > 0) {
      TimeOdometer starts = storage.starts();
      starts.seek(window.from - storage.duration + 1);  // the first window ending after from
      for (; !starts.done() && starts.time() < window.to; starts.advance()) {
        TimeRange w{std::max(starts.time(), window.from),
                    std::min(starts.time() + storage.duration, window.to)};
        if (!w.empty()) windows.push_back(w);
      }
    }
    for (const auto& tensor : storage.tensors) {
      if (!keeps(tensor)) continue;
      auto entry = std::find_if(level->tensors.begin(), level->tensors.end(),
                                [&](const auto& t) { return t.tensor == tensor; });
      if (entry == level->tensors.end()) {
        level->tensors.push_back({tensor, {}});
        entry = level->tensors.end() - 1;
      }
      entry->windows.insert(entry->windows.end(), windows.begin(), windows.end());
    }
  }
  for (auto& level : out)
    for (auto& t : level.tensors) {
      auto less = [](const TimeRange& a, const TimeRange& b) {
        return a.from != b.from ? a.from < b.from : a.to < b.to;
      };
      auto same = [](const TimeRange& a, const TimeRange& b) { return a.from == b.from && a.to == b.to; };
      std::sort(t.windows.begin(), t.windows.end(), less);
      t.windows.erase(std::unique(t.windows.begin(), t.windows.end(), same), t.windows.end());
    }
  // A level none of whose tensors pass the tensor filter is dropped, as the reference does.
  if (!tensors.empty())
    std::erase_if(out, [](const LevelWindows& level) { return level.tensors.empty(); });
  return out;
}

TraceSummary summarize(const Schedule& s, const TraceOptions& options) {
  const TraceFilter filter = TraceFilter::from_options(s, options);
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  TraceSummary out;
  out.n_timesteps = selection.window.to;
  out.truncated = selection.truncated;
  out.memory_levels = s.memory_levels;

  std::vector<std::int64_t> counts(s.traces.size(), 0);
  std::map<int, EinsumSpan> spans;  // einsum index -> span
  out.leaf_points.assign(s.leaves.size(), 0);
  for (LeafSource& leaf : make_leaf_sources(s, filter, options.max_tile_points)) {
    std::int64_t first = -1, last = -1;
    std::int64_t& points = out.leaf_points[std::size_t(&leaf.leaf() - s.leaves.data())];
    for (const TimeRange& range : selection.ranges) {
      for (leaf.seek(range.from); !leaf.done() && leaf.timestep() < range.to;) {
        LeafSource::RunTally run = leaf.count_run(counts, range.to);
        if (run.computing == 0) continue;
        if (first < 0) first = run.first;
        last = run.last;
        points += run.points;
      }
    }
    out.n_points += out.leaf_points[std::size_t(&leaf.leaf() - s.leaves.data())];
    if (first < 0) continue;
    auto [it, fresh] = spans.try_emplace(leaf.leaf().einsum_index,
                                         EinsumSpan{leaf.leaf().einsum, first, last + 1});
    if (!fresh) {
      it->second.first = std::min(it->second.first, first);
      it->second.end = std::max(it->second.end, last + 1);
    }
  }
  for (const auto& [index, span] : spans) out.einsum_timespans.push_back(span);
  std::stable_sort(out.einsum_timespans.begin(), out.einsum_timespans.end(),
                   [](const EinsumSpan& a, const EinsumSpan& b) {
                     return a.first != b.first ? a.first < b.first : a.end < b.end;
                   });
  for (const auto& span : out.einsum_timespans) out.einsums.push_back(span.einsum);

  for (std::size_t i = 0; i < s.traces.size(); ++i) {
    if (!filter.trace_enabled[i]) continue;
    const TraceInfo& t = s.traces[i];
    out.traces.push_back({t.einsum, t.tensor, t.is_output, counts[i], std::int64_t(i)});
    if (std::find(out.tensors.begin(), out.tensors.end(), t.tensor) == out.tensors.end())
      out.tensors.push_back(t.tensor);
  }
  out.tile_windows = tile_windows(s, selection.window, options.tensors);
  out.memory_levels.clear();  // the levels the tensor filter left
  for (const auto& level : out.tile_windows) out.memory_levels.push_back(level.level);
  return out;
}

}  // namespace looptrace
