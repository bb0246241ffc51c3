#include "looptrace/movement.hpp"

#include <algorithm>
#include <future>

#include "looptrace/error.hpp"
#include "looptrace/stages/window_traffic.hpp"
#include "looptrace/stream.hpp"

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

// The report of the Storage nodes of some levels (all when `levels` is empty).
MovementReport movement_of(const Schedule& s, const TraceOptions& options, const std::vector<std::string>& levels) {
  std::vector<std::uint32_t> nodes;
  for (std::size_t n = 0; n < s.storages.size(); ++n)
    if (levels.empty() || std::find(levels.begin(), levels.end(), s.storages[n].level) != levels.end())
      nodes.push_back(std::uint32_t(n));
  auto traffic = trace_pipeline(s, options) | tile_windows(nodes, options.tensors) | window_traffic();
  MovementReport report;
  report.from = traffic.context().window.from;
  report.n_timesteps = traffic.context().window.to;
  report.truncated = report.from > 0 || report.n_timesteps < s.n_timesteps;

  // Levels in tree order; per level the tensors its nodes keep, in the order listed.
  const auto& slots = traffic.traffic().slots;
  for (const std::string& name : s.memory_levels)
    if (std::any_of(slots.begin(), slots.end(), [&](const auto& slot) { return s.storages[slot.storage].level == name; }))
      report.levels.push_back({name, {}, {}, {}, {}, {}});
  std::vector<int> level_of_slot, tensor_entry_of_slot;
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
    level_of_slot.push_back(int(level - report.levels.begin()));
    tensor_entry_of_slot.push_back(int(entry - level->tensors.begin()));
  }
  std::vector<PeakTracker> peaks(report.levels.size()), peak_bytes(report.levels.size());
  std::vector<bool> has_bytes(report.levels.size(), true);
  for (std::size_t l = 0; l < report.levels.size(); ++l)
    for (const auto& t : report.levels[l].tensors) has_bytes[l] = has_bytes[l] && t.bytes_per_value.has_value();

  auto slot_of = [&](const TileTraffic& t) {
    for (int k : traffic.traffic().slots_of_storage[t.storage])
      if (traffic.traffic().slots[std::size_t(k)].tensor == t.tensor) return std::size_t(k);
    return std::size_t(0);
  };
  for (auto events = traffic.next_batch(); !events.empty(); events = traffic.next_batch())
    for (const TileTraffic& t : events) {
      const std::size_t k = slot_of(t);
      const auto l = std::size_t(level_of_slot[k]);
      TensorMovement& m = report.levels[l].tensors[std::size_t(tensor_entry_of_slot[k])];
      if (t.kind == TileTraffic::Kind::open) {
        peaks[l].open(t.start);
        peak_bytes[l].open(t.start);
        continue;
      }
      ++m.windows;
      m.max_tile = std::max(m.max_tile, t.tile);
      m.fills += t.fills;
      m.drains += t.drains;
      peaks[l].close(t.start, t.tile);
      peak_bytes[l].close(t.start, t.tile * m.bytes_per_value.value_or(0));
    }
  for (std::size_t l = 0; l < report.levels.size(); ++l) {
    LevelMovement& level = report.levels[l];
    level.peak_footprint = peaks[l].peak();
    if (has_bytes[l]) level.peak_footprint_bytes = peak_bytes[l].peak();
    if (auto m = s.memories.find(level.level); m != s.memories.end()) {
      if (m->second.size_bits) level.capacity_bits = m->second.size_bits;
      else level.capacity_unevaluated = m->second.size_text;
    }
  }
  return report;
}

}  // namespace

MovementReport summarize_movement(const Schedule& s, const TraceOptions& options, int threads) {
  if (options.sample_timesteps)
    throw SpecError("data movement needs whole stretches of time: use --from/--to, --max-timesteps "
                    "or --shard, not --sample-timesteps");
  if (threads <= 1 || s.memory_levels.size() <= 1) return movement_of(s, options, {});
  // Windows cut at a timestep boundary would be filled twice, so workers split the
  // levels, not time: each streams the whole selection and keeps its levels' tiles.
  const std::size_t n = std::min<std::size_t>(std::size_t(threads), s.memory_levels.size());
  std::vector<std::vector<std::string>> share(n);
  for (std::size_t l = 0; l < s.memory_levels.size(); ++l) share[l % n].push_back(s.memory_levels[l]);
  std::vector<std::future<MovementReport>> parts;
  for (std::size_t i = 1; i < n; ++i)
    parts.push_back(std::async(std::launch::async, [&, i] { return movement_of(s, options, share[i]); }));
  MovementReport report = movement_of(s, options, share[0]);
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

}  // namespace looptrace
