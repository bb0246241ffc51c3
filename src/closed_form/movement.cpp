#include "looptrace/closed_form/movement.hpp"

#include <algorithm>
#include <future>
#include <iterator>
#include <limits>
#include <unordered_set>

#include "looptrace/support/error.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/stages/window_traffic.hpp"
#include "looptrace/stream.hpp"
#include "movement_boxes.hpp"
#include "timeloop_convention.hpp"

namespace looptrace {

void PeakTracker::open(std::int64_t start) {
  if (!segments_.empty() && segments_.back().start == start) ++segments_.back().open;
  else segments_.push_back({start, 0, start, 1});
}

void PeakTracker::close(std::int64_t start, std::int64_t size) {
  auto seg = std::find_if(segments_.begin(), segments_.end(), [&](const Segment& s) { return s.start == start; });
  if (seg == segments_.end()) return;  // never opened
  for (auto s = seg; s != segments_.end(); ++s) s->max += size;  // the window covers them all
  if (--seg->open > 0) return;
  if (seg == segments_.begin()) {
    finalize(*seg);  // no open window covers its times any more: their sums are final
  } else {
    auto prev = seg - 1;  // still covered by earlier windows: one segment with the one before
    if (seg->max > prev->max) prev->max = seg->max, prev->at = seg->at;
  }
  segments_.erase(seg);
}

void PeakTracker::finalize(const Segment& s) {
  if (peak_.timestep < 0 || s.max > peak_.value) peak_ = {s.max, s.at};
}

namespace {

// The report's skeleton for the slots of `plan`: levels in tree order, per level the
// tensors its nodes keep in the order listed, and where each slot's figures go.
struct Layout {
  MovementReport report;
  std::vector<int> level_of_slot, entry_of_slot;
};

Layout layout_of(const Schedule& s, const TrafficPlan& plan) {
  Layout out;
  MovementReport& report = out.report;
  const auto& slots = plan.slots;
  for (const std::string& name : s.memory_levels)
    if (std::any_of(slots.begin(), slots.end(), [&](const auto& slot) { return s.storages[slot.storage].level == name; }))
      report.levels.push_back({name, {}, {}, {}, {}, {}});
  for (const auto& slot : slots) {
    const StorageWindows& node = s.storages[slot.storage];
    const auto level = std::find_if(report.levels.begin(), report.levels.end(),
                                    [&](const LevelMovement& l) { return l.level == node.level; });
    const TensorInfo& info = s.tensors[slot.tensor];
    auto entry = std::find_if(level->tensors.begin(), level->tensors.end(),
                              [&](const TensorMovement& t) { return t.tensor == info.name; });
    if (entry == level->tensors.end()) {
      TensorMovement t;
      t.tensor = info.name;
      if (info.bits_per_value) t.bytes_per_value = (*info.bits_per_value + 7) / 8;
      level->tensors.push_back(t);
      entry = level->tensors.end() - 1;
    }
    entry->home = entry->home || s.parent(slot.storage, info.name) < 0;
    out.level_of_slot.push_back(int(level - report.levels.begin()));
    out.entry_of_slot.push_back(int(entry - level->tensors.begin()));
  }
  return out;
}

bool has_bytes(const LevelMovement& level) {
  return std::all_of(level.tensors.begin(), level.tensors.end(),
                     [](const TensorMovement& t) { return t.bytes_per_value.has_value(); });
}


std::vector<std::uint32_t> nodes_of(const Schedule& s, const std::vector<std::string>& levels) {
  std::vector<std::uint32_t> nodes;
  for (std::size_t n = 0; n < s.storages.size(); ++n)
    if (levels.empty() || std::find(levels.begin(), levels.end(), s.storages[n].level) != levels.end())
      nodes.push_back(std::uint32_t(n));
  return nodes;
}

// Stretches of a level's nodes: more are enumerated instead (memory follows them).
constexpr std::size_t kMaxHeldSpans = std::size_t(1) << 19;  // 16 MiB, and twice that to sort

// Adds a window to what a slot holds when: one stretch with the one before where it
// follows back to back with the same size.
void hold_window(std::vector<movement_boxes::HeldSpan>& held, const TimeRange& when, std::int64_t elements,
                 std::int64_t bytes) {
  if (!held.empty() && held.back().when.to == when.from && held.back().elements == elements &&
      held.back().bytes == bytes) {
    held.back().when.to = when.to;
    return;
  }
  if (held.size() >= kMaxHeldSpans)
    throw movement_boxes::NotClosed{"its slots counted apart hold tiles in more than " +
                                    std::to_string(kMaxHeldSpans) + " stretches"};
  held.push_back({when, elements, bytes});
}

// The enumerated report of some Storage nodes: one pass over their accesses.
// With `partial_sums`, the windows hand out their elements: what a window writes first
// (drained, not filled) that an earlier window of its node drained is read back from
// the parent, unless the node is the tensor's home. (The check of the closed form:
// memory follows the elements drained.)
// With `held`, also what each window holds when (back-to-back windows of one size as
// one stretch), for a level whose peak is summed over slots counted apart.
MovementReport enumerate_movement(const Schedule& s, const TraceOptions& options, const std::vector<std::uint32_t>& nodes,
                                  bool partial_sums = false, std::vector<movement_boxes::HeldSpan>* held = nullptr) {
  auto traffic = trace_pipeline(s, options) | tile_windows(nodes, options.tensors) | window_traffic(partial_sums);
  std::vector<std::unordered_set<std::int64_t>> drained_before(traffic.traffic().slots.size());
  std::vector<std::int64_t> written_first;
  Layout layout = layout_of(s, traffic.traffic());
  MovementReport& report = layout.report;
  report.method = MovementMethod::enumerate;
  report.from = traffic.context().window.from;
  report.n_timesteps = traffic.context().window.to;
  report.truncated = report.from > 0 || report.n_timesteps < s.n_timesteps;
  std::vector<PeakTracker> peaks(report.levels.size()), peak_bytes(report.levels.size());

  auto slot_of = [&](const TileTraffic& t) {
    for (int k : traffic.traffic().slots_of_storage[t.storage])
      if (traffic.traffic().slots[std::size_t(k)].tensor == t.tensor) return std::size_t(k);
    return std::size_t(0);
  };
  for (auto events = traffic.next_batch(); !events.empty(); events = traffic.next_batch())
    for (const TileTraffic& t : events) {
      const std::size_t k = slot_of(t);
      const auto l = std::size_t(layout.level_of_slot[k]);
      TensorMovement& m = report.levels[l].tensors[std::size_t(layout.entry_of_slot[k])];
      if (t.kind == TileTraffic::Kind::open) {
        peaks[l].open(t.start);
        peak_bytes[l].open(t.start);
        continue;
      }
      ++m.windows;
      m.max_tile = std::max(m.max_tile, t.tile);
      m.fills += t.fills;
      m.drains += t.drains;
      if (partial_sums && s.parent(t.storage, s.tensors[t.tensor].name) >= 0) {
        written_first.clear();
        std::set_difference(t.drained.begin(), t.drained.end(), t.filled.begin(), t.filled.end(),
                            std::back_inserter(written_first));
        for (std::int64_t e : written_first) m.fills += drained_before[k].count(e);
        drained_before[k].insert(t.drained.begin(), t.drained.end());
      }
      peaks[l].close(t.start, t.tile);
      peak_bytes[l].close(t.start, t.tile * m.bytes_per_value.value_or(0));
      if (held) hold_window(*held, {t.start, t.end}, t.tile, t.tile * m.bytes_per_value.value_or(0));
    }
  for (std::size_t l = 0; l < report.levels.size(); ++l) {
    report.levels[l].peak_footprint = peaks[l].peak();
    if (has_bytes(report.levels[l])) report.levels[l].peak_footprint_bytes = peak_bytes[l].peak();
  }
  return report;
}

MovementReport enumerate_threaded(const Schedule& s, const TraceOptions& options, int threads, bool partial_sums) {
  if (threads <= 1 || s.memory_levels.size() <= 1) return enumerate_movement(s, options, nodes_of(s, {}), partial_sums);
  // Windows cut at a timestep boundary would be filled twice, so workers split the
  // levels, not time: each streams the whole selection and keeps its levels' tiles.
  const std::size_t n = std::min<std::size_t>(std::size_t(threads), s.memory_levels.size());
  std::vector<std::vector<std::string>> share(n);
  for (std::size_t l = 0; l < s.memory_levels.size(); ++l) share[l % n].push_back(s.memory_levels[l]);
  std::vector<std::future<MovementReport>> parts;
  for (std::size_t i = 1; i < n; ++i)
    parts.push_back(std::async(std::launch::async,
                               [&, i] { return enumerate_movement(s, options, nodes_of(s, share[i]), partial_sums); }));
  MovementReport report = enumerate_movement(s, options, nodes_of(s, share[0]), partial_sums);
  for (auto& part : parts) {
    MovementReport r = part.get();
    for (auto& level : r.levels) report.levels.push_back(std::move(level));
  }
  std::sort(report.levels.begin(), report.levels.end(), [&](const LevelMovement& a, const LevelMovement& b) {
    return std::find(s.memory_levels.begin(), s.memory_levels.end(), a.level) <
           std::find(s.memory_levels.begin(), s.memory_levels.end(), b.level);
  });
  return report;
}

// The earlier of two peaks when they tie.
void keep_larger(FootprintPeak& best, const FootprintPeak& p) {
  if (p.timestep < 0) return;
  if (best.timestep < 0 || p.value > best.value || (p.value == best.value && p.timestep < best.timestep)) best = p;
}

// Whether two nodes can hold tiles at the same time. Within one iteration of the loops
// above both, each node's windows fill one stretch of time, the same in every iteration.
bool hold_at_once(const StorageWindows& a, const StorageWindows& b) {
  std::size_t shared = 0;
  while (shared < a.loop_ids.size() && shared < b.loop_ids.size() && a.loop_ids[shared] == b.loop_ids[shared])
    ++shared;
  auto stretch = [&](const StorageWindows& n) {
    std::int64_t length = n.duration;
    for (std::size_t l = shared; l < n.time_levels.size(); ++l)
      length += (n.time_levels[l].count - 1) * n.time_levels[l].period;
    const std::int64_t from = n.starts().first_time();
    return TimeRange{from, from + length};
  };
  const TimeRange x = stretch(a), y = stretch(b);
  return a.duration > 0 && b.duration > 0 && overlaps(x, y);
}

void add_checked(std::int64_t& into, std::int64_t n) {
  if (__builtin_add_overflow(into, n, &into))
    throw SpecError("data movement counts exceed 2^63 - 1: select fewer timesteps (--from/--to) or tensors");
}


// The largest sum over time of what the stretches hold, first reached where.
FootprintPeak peak_of(const std::vector<movement_boxes::HeldSpan>& held, bool bytes) {
  std::vector<std::pair<std::int64_t, std::int64_t>> changes;  // (time, delta): ends sort first
  for (const auto& h : held) {
    const std::int64_t v = bytes ? h.bytes : h.elements;
    changes.push_back({h.when.from, v});
    changes.push_back({h.when.to, -v});
  }
  std::sort(changes.begin(), changes.end());
  FootprintPeak peak{0, -1};
  __int128 sum = 0;
  for (std::size_t i = 0; i < changes.size();) {
    const std::int64_t t = changes[i].first;
    for (; i < changes.size() && changes[i].first == t; ++i) sum += changes[i].second;
    if (sum > std::numeric_limits<std::int64_t>::max())
      throw SpecError("a peak footprint exceeds 2^63 - 1: select fewer tensors (--tensors)");
    if (i < changes.size() || sum > 0)  // (after the last change nothing is held)
      if (peak.timestep < 0 || sum > peak.value) peak = {std::int64_t(sum), t};
  }
  return peak;
}

// A node whose tensors are not all closed form, one (node, tensor) slot at a time: each
// in closed form where it is, else by one pass over that tensor's accesses alone
// (memory follows its tile), named in `enumerated`. The node's peak sums what its
// slots hold over time; with `level_held`, that goes to the level's. Throws NotClosed
// when the slots hold tiles in too many stretches to sum.
movement_boxes::NodeTotals slot_by_slot(const Schedule& s, const TraceOptions& options, std::uint32_t node,
                                        const std::vector<std::uint32_t>& tensors, const std::vector<std::int64_t>& bytes,
                                        const std::vector<bool>& read_back, const TimeRange& window, bool partial_sums,
                                        std::vector<movement_boxes::HeldSpan>* level_held,
                                        std::vector<EnumeratedPart>& enumerated) {
  movement_boxes::NodeTotals out;
  out.slots.resize(tensors.size());
  std::vector<movement_boxes::HeldSpan> held;
  std::vector<EnumeratedPart> named;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const std::string& name = s.tensors[tensors[k]].name;
    const std::size_t held_before = held.size();
    try {
      const movement_boxes::NodeTotals one = movement_boxes::closed_form_node(
          s, node, {tensors[k]}, options.einsums, {bytes[k]}, window, &held, kMaxHeldSpans, {read_back[k]});
      out.slots[k] = one.slots.front();
    } catch (const movement_boxes::NotClosed& e) {
      held.resize(held_before);  // what the attempt held
      TraceOptions alone = options;
      alone.tensors = {name};
      const MovementReport r = enumerate_movement(s, alone, {node}, partial_sums, &held);
      const TensorMovement& m = r.levels.front().tensors.front();
      out.slots[k] = {m.windows, m.max_tile, m.fills, m.drains};
      named.push_back({s.storages[node].level, e.reason, name});
    }
  }
  out.peak = peak_of(held, false);
  out.peak_bytes = peak_of(held, true);
  if (level_held) level_held->insert(level_held->end(), held.begin(), held.end());
  for (EnumeratedPart& part : named)  // several nodes of the level and tensor, one entry
    if (std::none_of(enumerated.begin(), enumerated.end(), [&](const EnumeratedPart& p) {
          return p.level == part.level && p.tensor == part.tensor && p.reason == part.reason;
        }))
      enumerated.push_back(std::move(part));
  return out;
}

// One level in closed form from its nodes' windows; throws NotClosed.
void closed_form_level(const Schedule& s, const TraceOptions& options, const TrafficPlan& plan, const Layout& layout,
                       std::size_t l, const TimeRange& window, bool partial_sums, MovementReport& report) {
  LevelMovement& level = report.levels[l];
  FootprintPeak peak{0, -1}, peak_bytes{0, -1};
  // The level's nodes and, per node, its slots (a node's slots are all of one level).
  std::vector<std::uint32_t> level_nodes;
  for (std::size_t n = 0; n < s.storages.size(); ++n)
    if (!plan.slots_of_storage[n].empty() &&
        std::size_t(layout.level_of_slot[std::size_t(plan.slots_of_storage[n].front())]) == l)
      level_nodes.push_back(std::uint32_t(n));
  // Whether they hold tiles at once (a node inside another, a !Pipeline): then the
  // footprint is a sum over time of what each holds.
  bool at_once = false;
  for (std::size_t i = 0; i < level_nodes.size(); ++i)
    for (std::size_t k = i + 1; k < level_nodes.size(); ++k)
      at_once = at_once || hold_at_once(s.storages[level_nodes[i]], s.storages[level_nodes[k]]);
  std::vector<movement_boxes::HeldSpan> held;
  for (const std::uint32_t n : level_nodes) {
    const std::vector<int>& ks = plan.slots_of_storage[n];
    std::vector<std::uint32_t> tensors;
    std::vector<std::int64_t> bytes;
    std::vector<bool> read_back;  // partial sums: not at the tensor's home
    for (int k : ks) {
      tensors.push_back(plan.slots[std::size_t(k)].tensor);
      read_back.push_back(partial_sums && s.parent(n, s.tensors[tensors.back()].name) >= 0 &&
                          std::any_of(s.traces.begin(), s.traces.end(), [&](const TraceInfo& t) {
                            return t.is_output && std::uint32_t(t.tensor_index) == tensors.back();
                          }));
      bytes.push_back(level.tensors[std::size_t(layout.entry_of_slot[std::size_t(k)])].bytes_per_value.value_or(0));
    }
    movement_boxes::NodeTotals totals;
    const std::size_t held_before = held.size();
    try {
      totals = movement_boxes::closed_form_node(s, std::uint32_t(n), tensors, options.einsums, bytes, window,
                                                at_once ? &held : nullptr, kMaxHeldSpans, read_back);
    } catch (const movement_boxes::NotClosed&) {
      held.resize(held_before);  // what the attempt held
      totals = slot_by_slot(s, options, n, tensors, bytes, read_back, window, partial_sums, at_once ? &held : nullptr,
                            report.enumerated);
    }
    for (std::size_t i = 0; i < ks.size(); ++i) {
      TensorMovement& m = level.tensors[std::size_t(layout.entry_of_slot[std::size_t(ks[i])])];
      const movement_boxes::SlotTotals& t = totals.slots[i];
      add_checked(m.windows, t.windows);
      add_checked(m.fills, t.fills);
      add_checked(m.drains, t.drains);
      m.max_tile = std::max(m.max_tile, t.max_tile);
    }
    keep_larger(peak, totals.peak);
    keep_larger(peak_bytes, totals.peak_bytes);
  }
  if (at_once) peak = peak_of(held, false), peak_bytes = peak_of(held, true);
  level.peak_footprint = peak;
  if (has_bytes(level)) level.peak_footprint_bytes = peak_bytes;
}

// The levels named (every level if none), each in closed form or else enumerated.
MovementReport closed_form_movement(const Schedule& s, const TraceOptions& options, bool partial_sums,
                                    const std::vector<std::string>& levels = {}) {
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  const TrafficPlan plan = TrafficPlan::make(s, nodes_of(s, levels), options.tensors);
  Layout layout = layout_of(s, plan);
  MovementReport report = std::move(layout.report);
  report.from = selection.window.from;
  report.n_timesteps = selection.window.to;
  report.truncated = report.from > 0 || report.n_timesteps < s.n_timesteps;
  for (std::size_t l = 0; l < report.levels.size(); ++l) {
    const LevelMovement skeleton = report.levels[l];
    try {
      closed_form_level(s, options, plan, layout, l, selection.window, partial_sums, report);
    } catch (const movement_boxes::NotClosed& e) {
      MovementReport whole = enumerate_movement(s, options, nodes_of(s, {skeleton.level}), partial_sums);
      report.levels[l] = std::move(whole.levels.front());
      std::erase_if(report.enumerated, [&](const EnumeratedPart& p) { return p.level == skeleton.level; });
      report.enumerated.push_back({skeleton.level, e.reason, {}});
    }
  }
  return report;
}

// The level's movement counting only `einsum`'s windows.
LevelMovement level_in_einsum(const Schedule& s, TraceOptions options, const MovementOptions& how,
                              const std::string& level, const std::string& einsum) {
  options.einsums = {einsum};
  MovementReport r = how.method == MovementMethod::enumerate
                         ? enumerate_movement(s, options, nodes_of(s, {level}), how.partial_sums)
                         : closed_form_movement(s, options, how.partial_sums, {level});
  return r.levels.empty() ? LevelMovement{} : std::move(r.levels.front());
}

// The most instances of `level` any of its nodes (of `einsum`'s leaves, if given) spans.
std::int64_t instances_of(const Schedule& s, const std::string& level, const std::string& einsum = {}) {
  std::int64_t most = 1;
  for (const LeafSchedule& leaf : s.leaves)
    if (einsum.empty() || leaf.einsum == einsum)
      for (int n : leaf.storages)
        if (s.storages[std::size_t(n)].level == level) most = std::max(most, s.storages[std::size_t(n)].instances);
  return most;
}

// The arch's sizes. A size per Einsum is checked against the level's peak in that
// Einsum, as AccelForge evaluates the arch once per Einsum.
void add_capacities(const Schedule& s, const TraceOptions& options, const MovementOptions& how,
                    MovementReport& report) {
  const auto& selected = options.einsums;
  for (LevelMovement& level : report.levels) {
    const ArchMemory* m = s.memory(level.level);
    if (!m) continue;
    if (m->size_bits) {
      level.capacity_bits = m->size_bits;
      level.instances = instances_of(s, level.level);
      continue;
    }
    if (m->per_einsum.empty()) {
      level.capacity_unevaluated = m->size_text;
      level.capacity_unevaluated_reason = m->unevaluated;
      continue;
    }
    for (const EinsumSize& size : m->per_einsum) {
      if (!selected.empty() && std::find(selected.begin(), selected.end(), size.einsum) == selected.end()) continue;
      const LevelMovement in = level_in_einsum(s, options, how, level.level, size.einsum);
      if (in.peak_footprint.timestep < 0 || in.peak_footprint.value == 0) continue;  // holds nothing of it
      level.einsum_capacities.push_back({size.einsum, size.size_bits, size.bits_of, in.peak_footprint,
                                         in.peak_footprint_bytes, instances_of(s, level.level, size.einsum)});
    }
  }
}


// The byte figures the sinks print (counts times bytes per value) must fit too.
MovementReport checked_bytes(MovementReport report) {
  for (const LevelMovement& level : report.levels)
    for (const TensorMovement& t : level.tensors) {
      if (!t.bytes_per_value) continue;
      std::int64_t ignored;
      for (std::int64_t n : {t.fills, t.drains, t.max_tile})
        if (__builtin_mul_overflow(n, *t.bytes_per_value, &ignored))
          throw SpecError("the bytes moved of tensor '" + t.tensor + "' at " + level.level +
                          " exceed 2^63 - 1: select fewer timesteps (--from/--to)");
    }
  return report;
}

}  // namespace

MovementReport summarize_movement(const Schedule& s, const TraceOptions& options, const MovementOptions& how) {
  if (options.sample_timesteps)
    throw SpecError("data movement needs whole stretches of time: use --from/--to, --max-timesteps "
                    "or --shard, not --sample-timesteps");
  if (how.convention == Convention::timeloop) return checked_bytes(timeloop_movement(s, options));
  MovementReport report = how.method == MovementMethod::enumerate
                              ? enumerate_threaded(s, options, how.threads, how.partial_sums)
                              : closed_form_movement(s, options, how.partial_sums);
  add_capacities(s, options, how, report);
  add_per_instance(s, options, report);
  return checked_bytes(std::move(report));
}

MovementReport summarize_movement(const Schedule& s, const TraceOptions& options, int threads) {
  return summarize_movement(s, options, MovementOptions{MovementMethod::closed_form, threads});
}

}  // namespace looptrace
