#include "looptrace/sinks/timeline.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One Einsum lane per set of spans that do not overlap (slices of a track must nest).
std::vector<std::vector<const EinsumSpan*>> einsum_lanes(const TileTimeline& tl, const LevelTiles& level) {
  std::vector<std::vector<const EinsumSpan*>> lanes;
  for (const EinsumSpan& span : tl.einsum_spans) {
    if (std::find(level.einsums.begin(), level.einsums.end(), span.einsum) == level.einsums.end()) continue;
    auto lane = std::find_if(lanes.begin(), lanes.end(), [&](const auto& l) { return l.back()->end <= span.first; });
    if (lane != lanes.end()) lane->push_back(&span);
    else lanes.push_back({&span});
  }
  return lanes;
}

// The threads of a level's tiles: a tensor's tracks share one when their stretches of
// time do not overlap (one node after another), else each node has its own.
std::vector<std::vector<const TileTrack*>> tile_threads(const LevelTiles& level) {
  std::vector<std::vector<const TileTrack*>> threads;
  std::vector<std::string> done;
  auto extent = [](const TileTrack* t) {
    return t->runs.empty() ? TimeRange{0, 0} : TimeRange{t->runs.front().windows.start, t->runs.back().windows.last().to};
  };
  for (const TileTrack& track : level.tracks) {
    if (std::find(done.begin(), done.end(), track.tensor) != done.end()) continue;
    done.push_back(track.tensor);
    std::vector<const TileTrack*> group;
    for (const TileTrack& t : level.tracks)
      if (t.tensor == track.tensor) group.push_back(&t);
    std::sort(group.begin(), group.end(), [&](auto a, auto b) { return extent(a).from < extent(b).from; });
    bool apart = true;
    for (std::size_t i = 1; i < group.size(); ++i) apart = apart && extent(group[i - 1]).to <= extent(group[i]).from;
    if (apart) threads.push_back(group);
    else
      for (const TileTrack* t : group) threads.push_back({t});
  }
  return threads;
}

// A counter's samples: from `at` on, `value`; in time order, each differing from the last.
template <class V>
using Samples = std::vector<std::pair<std::int64_t, V>>;

struct LevelCounters {
  std::vector<FootprintStep> footprint;
  Samples<double> fills, drains;
  std::int64_t size_samples = 0;
};

// Fills at a window's first timestep and drains at the one after its last (where
// `transfers` puts them); a span of several windows spreads them evenly over its stretch. Per timestep,
// or per cycle with `cycles` > 1.
Samples<double> rates(const LevelTiles& level, const Resolution& g, std::int64_t cycles, bool fills) {
  std::vector<std::pair<std::int64_t, long double>> changes;
  for (const TileTrack& track : level.tracks)
    for (const TileSpan& s : tile_spans(track, g)) {
      const std::int64_t n = fills ? s.fills : s.drains;
      if (n == 0) continue;
      const bool merged = s.windows > 1;
      const std::int64_t from = merged || fills ? s.from : s.to;
      const std::int64_t to = merged ? s.to : from + 1;
      const long double rate = (long double)n / (long double)(to - from) / (long double)cycles;
      changes.emplace_back(from, rate);
      changes.emplace_back(to, -rate);
    }
  std::sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Samples<double> out;
  long double sum = 0;
  for (std::size_t i = 0; i < changes.size();) {
    const std::int64_t at = changes[i].first;
    for (; i < changes.size() && changes[i].first == at; ++i) sum += changes[i].second;
    if (std::fabs(double(sum)) < 1e-9) sum = 0;  // what rounding leaves of a sum back to nothing
    if (out.empty() || out.back().second != double(sum)) out.emplace_back(at, double(sum));
  }
  return out;
}

bool bounded(const LevelTiles& level) { return level.capacity_bits && !std::isinf(*level.capacity_bits); }

LevelCounters counters_of(const LevelTiles& level, const Resolution& g, std::int64_t cycles) {
  LevelCounters c;
  if (level.tracks.empty()) return c;
  c.footprint = footprint_steps(level, g);
  c.fills = rates(level, g, cycles, true);
  c.drains = rates(level, g, cycles, false);
  c.size_samples = level.has_bytes() && bounded(level) && !c.footprint.empty() ? 2 : 0;
  return c;
}

std::int64_t counter_events(const LevelTiles& level, const LevelCounters& c) {
  return std::int64_t(c.footprint.size()) * (level.has_bytes() ? 2 : 1) + c.size_samples +
         std::int64_t(c.fills.size() + c.drains.size());
}

// Events that do not depend on the spans: names, sort indices, labels, Einsums.
std::int64_t fixed_events(const TileTimeline& tl) {
  std::int64_t n = 0;
  for (const LevelTiles& level : tl.levels) {
    n += 3;  // process name, sort index, labels
    for (const auto& lane : einsum_lanes(tl, level)) n += 2 + std::int64_t(lane.size());
    n += 2 * std::int64_t(tile_threads(level).size());
  }
  return n;
}

std::int64_t slice_count(const TileTimeline& tl, const Resolution& g) {
  __int128 n = 0;
  for (const LevelTiles& l : tl.levels)
    for (const TileTrack& t : l.tracks) n += span_count(t, g);
  return n > std::numeric_limits<std::int64_t>::max() ? std::numeric_limits<std::int64_t>::max() : std::int64_t(n);
}

// All the events at `g`, or nothing past `max_events` (the slices alone decide first,
// so counters are worked out only for spans that fit).
std::optional<std::int64_t> events_at(const TileTimeline& tl, const Resolution& g, std::int64_t cycles, std::int64_t max_events) {
  __int128 n = __int128(fixed_events(tl)) + slice_count(tl, g);
  if (n > max_events) return std::nullopt;
  for (const LevelTiles& level : tl.levels) {
    n += counter_events(level, counters_of(level, g, cycles));
    if (n > max_events) return std::nullopt;
  }
  return std::int64_t(n);
}

class Writer {
 public:
  Writer(const TileTimeline& tl, const TimelineOptions& o, const Resolution& g) : tl_(tl), options_(o), g_(g) {}

  std::string run() {
    out_ = "{\"traceEvents\":[\n";
    for (std::size_t l = 0; l < tl_.levels.size(); ++l) level(tl_.levels[l], int(l) + 1);
    if (events_ > 0) out_.resize(out_.size() - 2);  // the last ",\n"
    out_ += "\n],\"otherData\":";
    nlohmann::ordered_json other;
    other["from"] = tl_.window.from;
    other["to"] = tl_.window.to;
    other["n_timesteps"] = tl_.n_timesteps;
    other["time_unit"] = options_.cycles_per_timestep > 0 ? "1 us = 1 cycle" : "1 us = 1 timestep";
    other["cycles_per_timestep"] = scale();
    other["slices"] = resolution_text(g_);
    other["max_events"] = options_.max_events;
    out_ += other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out_ += "}\n";
    return std::move(out_);
  }
  std::int64_t events() const { return events_; }

 private:
  std::int64_t scale() const { return options_.cycles_per_timestep > 0 ? options_.cycles_per_timestep : 1; }
  std::int64_t ts(std::int64_t t) const {
    const __int128 v = __int128(t) * scale();
    if (v > std::numeric_limits<std::int64_t>::max())
      throw SpecError("the timeline's time axis passes 2^63 - 1 cycles: give a smaller --cycles-per-timestep");
    return std::int64_t(v);
  }
  void number(std::int64_t v) {
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  void number(double v) {
    char buf[32];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  // {"ph":..,"name":..,"pid":..,"tid":..,"ts":.. and the caller's fields, then "},\n".
  void open(char ph, const std::string& name, int pid, int tid, std::int64_t t) {
    out_ += "{\"ph\":\"";
    out_ += ph;
    out_ += "\",\"name\":";
    out_ += name;
    out_ += ",\"pid\":";
    number(std::int64_t(pid));
    out_ += ",\"tid\":";
    number(std::int64_t(tid));
    out_ += ",\"ts\":";
    number(ts(t));
  }
  void close() {
    out_ += "},\n";
    ++events_;
  }
  void meta(const char* what, int pid, int tid, const std::string& key, const std::string& value) {
    open('M', quoted(what), pid, tid, 0);
    out_ += ",\"args\":{" + quoted(key) + ":" + value + "}";
    close();
  }
  void slice(const std::string& name, const char* cat, int pid, int tid, std::int64_t from, std::int64_t to,
             const nlohmann::ordered_json& args) {
    open('X', name, pid, tid, from);
    out_ += ",\"dur\":";
    number(ts(to) - ts(from));
    out_ += ",\"cat\":\"";
    out_ += cat;
    out_ += "\",\"args\":";
    out_ += args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    close();
  }
  template <class V>
  void counter(const std::string& name, int pid, std::int64_t t, V v) {
    open('C', name, pid, 0, t);
    out_ += ",\"args\":{\"value\":";
    number(v);
    out_ += "}";
    close();
  }

  // What Perfetto shows next to the level's name: its size, and why it is not drawn.
  static std::string labels(const LevelTiles& level) {
    std::string size = "size not given";
    if (level.capacity_unevaluated) size = "size " + *level.capacity_unevaluated + " (not evaluated)";
    if (level.capacity_bits) size = bounded(level) ? "size " + bits(*level.capacity_bits) + " bits" : "size unbounded";
    if (level.not_closed.empty()) return size;
    return (level.enumerated ? "counted access by access (" : "not drawn (") + level.not_closed + "); " + size;
  }
  static std::string bits(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, v == std::floor(v) && v < 1e18 ? "%.0f" : "%g", v);
    return buf;
  }

  void level(const LevelTiles& level, int pid) {
    meta("process_name", pid, 0, "name", quoted(level.level));
    meta("process_sort_index", pid, 0, "sort_index", std::to_string(pid));
    meta("process_labels", pid, 0, "labels", quoted(labels(level)));
    int tid = 1;
    for (const auto& lane : einsum_lanes(tl_, level)) {
      meta("thread_name", pid, tid, "name", quoted(tid == 1 ? "Einsums" : "Einsums (" + std::to_string(tid) + ")"));
      meta("thread_sort_index", pid, tid, "sort_index", std::to_string(tid));
      for (const EinsumSpan* s : lane)
        slice(quoted(s->einsum), "einsum", pid, tid, s->first, s->end, {{"first", s->first}, {"end", s->end}});
      ++tid;
    }
    for (const auto& thread : tile_threads(level)) {
      const TileTrack& first = *thread.front();
      const bool own = thread.size() == 1 &&
                       std::count_if(level.tracks.begin(), level.tracks.end(),
                                     [&](const TileTrack& t) { return t.tensor == first.tensor; }) > 1;
      meta("thread_name", pid, tid, "name",
           quoted(own ? first.tensor + " (Storage node " + std::to_string(first.storage) + ")" : first.tensor));
      meta("thread_sort_index", pid, tid, "sort_index", std::to_string(tid));
      for (const TileTrack* track : thread) tile_slices(*track, pid, tid);
      ++tid;
    }
    counters(level, pid);
  }

  // Slices by hand (their args are numbers under fixed keys): a whole layer writes
  // hundreds of thousands.
  void tile_slices(const TileTrack& track, int pid, int tid) {
    const std::string name = quoted(track.tensor);
    const std::int64_t per = track.bytes_per_value.value_or(0);
    for (const TileSpan& s : tile_spans(track, g_)) {
      open('X', name, pid, tid, s.from);
      out_ += ",\"dur\":";
      number(ts(s.to) - ts(s.from));
      out_ += ",\"cat\":\"tile\",\"args\":{";
      const bool merged = s.windows > 1;  // (a span of one window is that window)
      if (merged) arg("windows", s.windows);
      arg(merged ? "largest_tile" : "tile", s.tile);
      arg("fills", s.fills);
      arg("drains", s.drains);
      if (track.bytes_per_value) arg(merged ? "largest_tile_bytes" : "tile_bytes", s.tile * per);
      if (merged) {
        out_ += "\"merged\":\"";
        number(s.windows);
        out_ += " tile windows in one slice (--max-events)\",";
      }
      out_.back() = '}';
      close();
    }
  }
  void arg(const char* key, std::int64_t v) {
    out_ += '"';
    out_ += key;
    out_ += "\":";
    number(v);
    out_ += ',';
  }

  void counters(const LevelTiles& level, int pid) {
    const LevelCounters c = counters_of(level, g_, scale());
    for (const FootprintStep& s : c.footprint) counter(quoted("footprint (elements)"), pid, s.at, s.elements);
    if (level.has_bytes())
      for (const FootprintStep& s : c.footprint) counter(quoted("footprint (bytes)"), pid, s.at, s.bytes);
    if (c.size_samples > 0) {
      const double size = *level.capacity_bits / 8;
      counter(quoted("size (bytes)"), pid, c.footprint.front().at, size);
      counter(quoted("size (bytes)"), pid, c.footprint.back().at, size);
    }
    const std::string unit = options_.cycles_per_timestep > 0 ? "cycle" : "timestep";
    for (const auto& [at, v] : c.fills) counter(quoted("fills (elements/" + unit + ")"), pid, at, v);
    for (const auto& [at, v] : c.drains) counter(quoted("drains (elements/" + unit + ")"), pid, at, v);
  }

  const TileTimeline& tl_;
  const TimelineOptions& options_;
  const Resolution g_;
  std::string out_;
  std::int64_t events_ = 0;
};

}  // namespace

std::string resolution_text(const Resolution& r) {
  if (r.every_window()) return "one per tile window";
  if (r.runs_per_span > 1) return std::to_string(r.runs_per_span) + " runs of alike windows per slice (--max-events)";
  return "one per tile window in runs of at most " + std::to_string(r.expand_up_to) +
         " alike windows, one per longer run (--max-events)";
}

Resolution timeline_resolution(const TileTimeline& tl, std::int64_t max_events, std::int64_t cycles_per_timestep) {
  const std::int64_t cycles = std::max<std::int64_t>(cycles_per_timestep, 1);
  std::int64_t most_runs = 1, longest = 1;
  for (const LevelTiles& l : tl.levels)
    for (const TileTrack& t : l.tracks) {
      most_runs = std::max(most_runs, std::int64_t(t.runs.size()));
      for (const TileRun& r : t.runs) longest = std::max(longest, r.windows.count);
    }
  // Finest first: every window, then runs of at most 2^k windows expanded (k down to
  // 0), then 2, 4, ... runs a slice.
  std::vector<Resolution> tries{{}};
  for (std::int64_t e = std::int64_t(1) << (63 - __builtin_clzll(std::uint64_t(longest))); e >= 1; e /= 2)
    tries.push_back({e, 1});
  for (std::int64_t g = 2; g < 2 * most_runs; g *= 2) tries.push_back({1, std::min(g, most_runs)});
  for (const Resolution& r : tries)
    if (events_at(tl, r, cycles, max_events)) return r;
  const Resolution coarsest = tries.back();
  __int128 least = __int128(fixed_events(tl)) + slice_count(tl, coarsest);
  for (const LevelTiles& level : tl.levels) least += counter_events(level, counters_of(level, coarsest, cycles));
  throw SpecError("--max-events " + std::to_string(max_events) + " is too few for this timeline: it needs at least " +
                  std::to_string(std::int64_t(least)) + " (one slice per tile track)");
}

std::string timeline_json(const TileTimeline& tl, const TimelineOptions& options, TimelineInfo* info) {
  const Resolution g = timeline_resolution(tl, options.max_events, options.cycles_per_timestep);
  Writer w(tl, options, g);
  std::string out = w.run();
  if (info) *info = {w.events(), g};
  return out;
}

}  // namespace looptrace
