#include "looptrace/closed_form/summary.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "looptrace/closed_form/counts.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/stream.hpp"

namespace looptrace {

namespace {

void sort_distinct(std::vector<TimeRange>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::vector<WindowRun> as_runs(const std::vector<TimeRange>& windows) {
  RunBuilder b;
  for (const auto& w : windows) b.add(w);
  return b.finish();
}

// Windows of one (level, tensor) in both forms, from canonical runs.
void set_windows(TensorWindows& t, std::vector<WindowRun> runs, WindowsForm form) {
  if (form == WindowsForm::full) t.windows = expand(runs);
  else if (form == WindowsForm::compact) t.runs = std::move(runs);
}

// The pieces (clipped windows) of `cut` that also stand in `interior` as whole windows:
// they go into `cut` too, so that merging can tell them apart.
void add_coinciding(std::vector<TimeRange>& cut, const TimeRange& window,
                    const std::function<bool(const TimeRange&)>& interior) {
  std::vector<TimeRange> extra;
  for (const auto& o : cut) {
    const TimeRange piece = intersect(o, window);
    if (piece != o && !piece.empty() && interior(piece)) extra.push_back(piece);
  }
  cut.insert(cut.end(), extra.begin(), extra.end());
  sort_distinct(cut);
}

// The selection cut into contiguous parts for `threads` workers.
std::vector<std::pair<TimeRange, std::vector<TimeRange>>> split(const TimeSelection& sel,
                                                                bool sampled, int threads) {
  std::vector<std::pair<TimeRange, std::vector<TimeRange>>> parts;
  const TimeRange w = sel.window;
  if (!sampled) {
    const std::int64_t len = w.to - w.from;
    const std::int64_t n = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, len));
    for (std::int64_t i = 0; i < n; ++i) {
      TimeRange part{w.from + std::int64_t(__int128(len) * i / n),
                     w.from + std::int64_t(__int128(len) * (i + 1) / n)};
      parts.push_back({part, part.empty() ? std::vector<TimeRange>{} : std::vector<TimeRange>{part}});
    }
    return parts;
  }
  const std::size_t k = sel.ranges.size();
  const std::size_t n = std::max<std::size_t>(1, std::min<std::size_t>(std::size_t(threads), k));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t a = k * i / n, b = k * (i + 1) / n;
    TimeRange part{i == 0 ? w.from : sel.ranges[a].from, i + 1 == n ? w.to : sel.ranges[b].from};
    parts.push_back({part, {sel.ranges.begin() + std::ptrdiff_t(a), sel.ranges.begin() + std::ptrdiff_t(b)}});
  }
  return parts;
}

struct Progress {
  std::atomic<std::int64_t> done{0};
  std::int64_t total = 0;
};

TraceSummary summarize_part(const Schedule& s, const TraceFilter& filter, const TraceOptions& options,
                            const TimeRange& window, const std::vector<TimeRange>& ranges,
                            bool sampled, WindowsForm form, Progress& progress,
                            const std::function<void()>& report) {
  TraceSummary out;
  out.n_timesteps = window.to;
  out.selection = {window.from, window.to, s.n_timesteps, sampled ? std::int64_t(ranges.size()) : -1};
  out.truncated = window.from > 0 || window.to < s.n_timesteps ||
                  (sampled && std::int64_t(ranges.size()) < window.to - window.from);
  out.windows_form = form;
  out.einsum_order = s.einsums;

  std::vector<std::int64_t> counts(s.traces.size(), 0);
  std::vector<bool> enumerated(s.traces.size(), false);
  std::map<int, EinsumSpan> spans;  // einsum index -> span
  out.leaf_points.assign(s.leaves.size(), 0);
  auto add = [](std::int64_t& into, std::int64_t n) {
    if (__builtin_add_overflow(into, n, &into))
      throw SpecError("a count of the summary passes 2^63 - 1");
  };
  for (std::size_t i = 0; i < s.leaves.size(); ++i) {
    if (!filter.leaf_enabled[i]) continue;
    const LeafSchedule& leaf = s.leaves[i];
    std::vector<bool> enabled;
    for (const auto& lt : leaf.tensors) enabled.push_back(filter.trace_enabled[std::size_t(lt.trace)]);
    LeafCounter counter(s, leaf, enabled, options.max_tile_points);
    LeafTotals totals;
    std::size_t since = 0;
    for (const TimeRange& r : ranges) {
      counter.add(r, totals);
      if (++since == 256) progress.done += std::int64_t(since), since = 0, report();
    }
    progress.done += std::int64_t(since);
    report();
    totals.accesses.resize(leaf.tensors.size(), 0);
    for (std::size_t k = 0; k < leaf.tensors.size(); ++k) {
      const auto trace = std::size_t(leaf.tensors[k].trace);
      add(counts[trace], totals.accesses[k]);
      if (enabled[k] && counter.enumerated(k)) enumerated[trace] = true;
    }
    out.leaf_points[i] = totals.points;
    add(out.n_points, totals.points);
    if (totals.first < 0) continue;
    auto [it, fresh] = spans.try_emplace(leaf.einsum_index, EinsumSpan{leaf.einsum, totals.first, totals.last + 1});
    if (!fresh) {
      it->second.first = std::min(it->second.first, totals.first);
      it->second.end = std::max(it->second.end, totals.last + 1);
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
    if (enumerated[i]) out.enumerated.push_back(std::int64_t(out.traces.size()));
    out.traces.push_back({t.einsum, t.tensor, t.is_output, counts[i], std::int64_t(i)});
    if (std::find(out.tensors.begin(), out.tensors.end(), t.tensor) == out.tensors.end()) {
      out.tensors.push_back(t.tensor);
      out.tensor_shapes.push_back(s.tensors[std::size_t(t.tensor_index)].shape);
      out.tensor_ranks.push_back(s.tensors[std::size_t(t.tensor_index)].ranks);
    }
  }
  out.tile_windows = level_windows(s, window, options.tensors, form);
  for (const auto& level : out.tile_windows) out.memory_levels.push_back(level.level);
  return out;
}

[[noreturn]] void misfit(const std::vector<std::string>& names, std::size_t i, const std::string& what) {
  const std::string name = i < names.size() ? names[i] : "summary " + std::to_string(i + 1);
  throw SpecError(SourceLocation{name, 0, 0}, what);
}

}  // namespace

std::vector<TimeRange> find_windows(const std::vector<LevelWindows>& levels,
                                    const std::string& level, const std::string& tensor) {
  for (const auto& l : levels)
    if (l.level == level)
      for (const auto& t : l.tensors)
        if (t.tensor == tensor) return t.runs.empty() ? t.windows : expand(t.runs);
  return {};
}

std::vector<TimeRange> TraceSummary::tile_lifetime(const std::string& level,
                                                   const std::string& tensor) const {
  return find_windows(tile_windows, level, tensor);
}

std::vector<LevelWindows> level_windows(const Schedule& s, const TimeRange& window,
                                        const std::vector<std::string>& tensors, WindowsForm form) {
  struct Entry {
    std::vector<std::vector<WindowRun>> lists;     // per storage: its windows
    std::vector<std::vector<WindowRun>> interior;  // per storage: without clipped pieces
    std::vector<TimeRange> cut;
  };
  std::vector<LevelWindows> out;
  std::vector<std::vector<Entry>> entries;
  for (const auto& level : s.memory_levels) out.push_back({level, {}}), entries.emplace_back();
  auto keeps = [&](const std::string& t) {
    return tensors.empty() || std::find(tensors.begin(), tensors.end(), t) != tensors.end();
  };
  for (const auto& storage : s.storages) {
    const std::size_t li = std::size_t(
        std::find(s.memory_levels.begin(), s.memory_levels.end(), storage.level) - s.memory_levels.begin());
    LevelWindows& level = out[li];
    std::vector<WindowRun> runs, interior;
    std::vector<TimeRange> cut;
    if (form != WindowsForm::none) {
      storage_window_runs(storage, window, runs, cut);
      interior = runs;
      for (const auto& o : cut) remove_window(interior, intersect(o, window));
    }
    for (const auto& tensor : storage.tensors) {
      if (!keeps(tensor)) continue;
      auto at = std::find_if(level.tensors.begin(), level.tensors.end(),
                             [&](const auto& t) { return t.tensor == tensor; });
      if (at == level.tensors.end()) {
        level.tensors.push_back({tensor, {}, {}, {}});
        entries[li].emplace_back();
        at = level.tensors.end() - 1;
      }
      Entry& e = entries[li][std::size_t(at - level.tensors.begin())];
      e.lists.push_back(runs);
      e.interior.push_back(interior);
      e.cut.insert(e.cut.end(), cut.begin(), cut.end());
    }
  }
  for (std::size_t li = 0; li < out.size(); ++li)
    for (std::size_t ti = 0; ti < out[li].tensors.size(); ++ti) {
      Entry& e = entries[li][ti];
      TensorWindows& t = out[li].tensors[ti];
      if (form == WindowsForm::none) continue;
      set_windows(t, merge_runs(e.lists), form);
      add_coinciding(e.cut, window, [&](const TimeRange& piece) {
        return std::any_of(e.interior.begin(), e.interior.end(),
                           [&](const auto& runs) { return holds_window(runs, piece); });
      });
      t.cut = std::move(e.cut);
    }
  // A level none of whose tensors pass the tensor filter is dropped, as the reference does.
  if (!tensors.empty()) std::erase_if(out, [](const LevelWindows& l) { return l.tensors.empty(); });
  return out;
}

TraceSummary summarize(const Schedule& s, const TraceOptions& options, const SummaryOptions& so) {
  const TraceFilter filter = TraceFilter::from_names(s, options.tensors, options.einsums);
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  const bool sampled = options.sample_timesteps.has_value();
  const auto parts = split(selection, sampled, std::max(1, so.threads));

  Progress progress;
  for (bool enabled : filter.leaf_enabled) progress.total += enabled ? std::int64_t(selection.ranges.size()) : 0;
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_report = Clock::now();
  const std::thread::id caller = std::this_thread::get_id();
  auto report = [&] {  // from the calling thread only, at most ten times a second
    if (!so.progress || std::this_thread::get_id() != caller) return;
    const auto now = Clock::now();
    if (now - last_report < std::chrono::milliseconds(100)) return;
    last_report = now;
    so.progress(progress.done.load(), progress.total);
  };

  if (parts.size() == 1)
    return summarize_part(s, filter, options, parts[0].first, parts[0].second, sampled, so.windows,
                          progress, report);
  std::vector<std::future<TraceSummary>> futures;
  for (std::size_t i = 1; i < parts.size(); ++i)
    futures.push_back(std::async(std::launch::async, [&, i] {
      return summarize_part(s, filter, options, parts[i].first, parts[i].second, sampled, so.windows,
                            progress, report);
    }));
  std::vector<TraceSummary> results;
  std::exception_ptr failure;
  try {
    results.push_back(summarize_part(s, filter, options, parts[0].first, parts[0].second, sampled,
                                     so.windows, progress, report));
  } catch (...) {
    failure = std::current_exception();
  }
  for (auto& f : futures) {
    try {
      results.push_back(f.get());
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return merge_summaries(std::move(results));
}

namespace {

// Refuses shards that are not pieces of one run (exit 2 naming the file).
void check_shards_fit(const std::vector<TraceSummary>& shards, const std::vector<std::size_t>& order,
                      const std::vector<std::string>& names) {
  const TraceSummary& first = shards[order[0]];
  auto traces_key = [](const TraceSummary& x) {
    std::vector<std::tuple<std::string, std::string, bool, std::int64_t>> k;
    for (const auto& t : x.traces) k.emplace_back(t.einsum, t.tensor, t.is_output, t.trace);
    return k;
  };
  auto layout_key = [](const TraceSummary& x) {
    std::vector<std::pair<std::string, std::vector<std::string>>> k;
    for (const auto& l : x.tile_windows) {
      k.push_back({l.level, {}});
      for (const auto& t : l.tensors) k.back().second.push_back(t.tensor);
    }
    return k;
  };
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    const TraceSummary& x = shards[i];
    if (x.selection.full_timesteps != first.selection.full_timesteps || traces_key(x) != traces_key(first) ||
        x.tensors != first.tensors || x.tensor_shapes != first.tensor_shapes ||
        x.tensor_ranks != first.tensor_ranks || x.memory_levels != first.memory_levels ||
        x.einsum_order != first.einsum_order || layout_key(x) != layout_key(first))
      misfit(names, i, "this summary is of another schedule or other filters than " +
                           (order[0] < names.size() ? names[order[0]] : std::string("the first")) +
                           " (traces, tensors, memory levels or schedule length differ)");
    if (x.windows_form != first.windows_form)
      misfit(names, i, "this summary gives its tile windows in another form (--windows) than the others");
    if ((x.selection.sample_timesteps < 0) != (first.selection.sample_timesteps < 0))
      misfit(names, i, "some summaries are sampled (--sample-timesteps) and others are not");
    if (n > 0 && shards[order[n - 1]].selection.to != x.selection.from)
      misfit(names, i, "the shards do not fit together: this one covers [" + std::to_string(x.selection.from) +
                           ", " + std::to_string(x.selection.to) + ") but the one before it ends at " +
                           std::to_string(shards[order[n - 1]].selection.to) +
                           " (merge the shards of one window, each once)");
  }
}

// Counts add up; spans widen and are ordered as summarize orders them.
void merge_counts(const std::vector<TraceSummary>& shards, const std::vector<std::size_t>& order, TraceSummary& out) {
  auto add = [](std::int64_t& into, std::int64_t n) {
    if (__builtin_add_overflow(into, n, &into)) throw SpecError("a merged count passes 2^63 - 1");
  };
  std::set<std::int64_t> enumerated;
  std::map<std::string, EinsumSpan> spans;
  for (std::size_t n = 0; n < order.size(); ++n) {
    const TraceSummary& x = shards[order[n]];
    enumerated.insert(x.enumerated.begin(), x.enumerated.end());
    for (const auto& span : x.einsum_timespans) {
      auto [it, fresh] = spans.try_emplace(span.einsum, span);
      if (!fresh) {
        it->second.first = std::min(it->second.first, span.first);
        it->second.end = std::max(it->second.end, span.end);
      }
    }
    if (n == 0) continue;
    if (x.selection.sample_timesteps >= 0) add(out.selection.sample_timesteps, x.selection.sample_timesteps);
    for (std::size_t k = 0; k < out.traces.size(); ++k) add(out.traces[k].n_accesses, x.traces[k].n_accesses);
    add(out.n_points, x.n_points);
    if (x.leaf_points.size() == out.leaf_points.size())
      for (std::size_t k = 0; k < out.leaf_points.size(); ++k) add(out.leaf_points[k], x.leaf_points[k]);
  }
  out.enumerated.assign(enumerated.begin(), enumerated.end());
  // Spans ordered by (first, end), ties in the workload's order, as summarize does.
  out.einsum_timespans.clear();
  for (const auto& [name, span] : spans) out.einsum_timespans.push_back(span);
  auto rank = [&](const std::string& e) {
    return std::find(out.einsum_order.begin(), out.einsum_order.end(), e) - out.einsum_order.begin();
  };
  std::sort(out.einsum_timespans.begin(), out.einsum_timespans.end(), [&](const EinsumSpan& a, const EinsumSpan& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.end != b.end) return a.end < b.end;
    return rank(a.einsum) < rank(b.einsum);
  });
  out.einsums.clear();
  for (const auto& span : out.einsum_timespans) out.einsums.push_back(span.einsum);
}

// Windows: each shard's without the pieces its clip made, then every unclipped window
// behind a piece, clipped to the whole; the same set the whole run gives.
void merge_windows(const std::vector<TraceSummary>& shards, const std::vector<std::size_t>& order,
                   const TimeRange& whole, std::size_t li, std::size_t ti, TraceSummary& out) {
  std::vector<WindowRun> interior;
  std::vector<TimeRange> originals;
  for (std::size_t i : order) {
    const TensorWindows& t = shards[i].tile_windows[li].tensors[ti];
    std::vector<WindowRun> runs = out.windows_form == WindowsForm::full ? as_runs(t.windows) : t.runs;
    const TimeRange part{shards[i].selection.from, shards[i].selection.to};
    for (const auto& o : t.cut) remove_window(runs, intersect(o, part));
    interior.insert(interior.end(), runs.begin(), runs.end());  // shards are in time order
    originals.insert(originals.end(), t.cut.begin(), t.cut.end());
  }
  sort_distinct(originals);
  std::vector<TimeRange> rejoined;
  for (const auto& o : originals)
    if (const TimeRange piece = intersect(o, whole); !piece.empty()) rejoined.push_back(piece);
  sort_distinct(rejoined);
  TensorWindows& t = out.tile_windows[li].tensors[ti];
  t.windows.clear();
  t.runs.clear();
  set_windows(t, merge_runs({interior, as_runs(rejoined)}), out.windows_form);
  std::vector<TimeRange> cut;
  for (const auto& o : originals)
    if (!whole.contains(o)) cut.push_back(o);
  add_coinciding(cut, whole, [&](const TimeRange& piece) {
    return holds_window(interior, piece) ||
           std::any_of(originals.begin(), originals.end(),
                       [&](const TimeRange& o) { return whole.contains(o) && o == piece; });
  });
  t.cut = std::move(cut);
}

}  // namespace

TraceSummary merge_summaries(std::vector<TraceSummary> shards, const std::vector<std::string>& names) {
  if (shards.empty()) throw SpecError("nothing to merge");
  std::vector<std::size_t> order(shards.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = shards[a].selection;
    const auto& y = shards[b].selection;
    return x.from != y.from ? x.from < y.from : x.to < y.to;  // empty shards first
  });
  check_shards_fit(shards, order, names);
  const TraceSummary& first = shards[order[0]];
  TraceSummary out = first;
  const TimeRange whole{first.selection.from, shards[order.back()].selection.to};
  out.selection.to = whole.to;
  out.n_timesteps = whole.to;
  merge_counts(shards, order, out);
  out.truncated = whole.from > 0 || whole.to < out.selection.full_timesteps ||
                  (out.selection.sample_timesteps >= 0 && out.selection.sample_timesteps < whole.to - whole.from);
  if (out.windows_form == WindowsForm::none) return out;
  for (std::size_t li = 0; li < out.tile_windows.size(); ++li)
    for (std::size_t ti = 0; ti < out.tile_windows[li].tensors.size(); ++ti)
      merge_windows(shards, order, whole, li, ti, out);
  return out;
}

}  // namespace looptrace
