#include "stages/cache_warp.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>

#include "compile/tiling.hpp"
#include "looptrace/stages/cache_lines.hpp"
#include "looptrace/stages/trace_pipeline.hpp"

namespace looptrace {

namespace {

// A temporal loop node whose iterations translate: every leaf under it, advanced one
// iteration, touches each tensor `shift` bytes further on (the same for all of them).
struct WarpLoop {
  std::uint32_t id = 0;
  std::vector<std::size_t> leaves;  // under it
  std::vector<std::size_t> loop;    // per leaves[i]: the loop's index in its `loops`
  std::size_t level = 0;            // its time level (the same in every leaf under it)
  std::int64_t period = 0, count = 0;
  std::int64_t block = 1;             // iterations per block: every shift a multiple of the sets
  std::vector<std::int64_t> delta;    // per tensor: lines per block
};

std::int64_t positive_mod(std::int64_t a, std::int64_t m) { return ((a % m) + m) % m; }

// The loop `id` if its iterations translate in a way the cache can shift (each line
// stays in its set), else nothing.
std::optional<WarpLoop> translating_loop(const Schedule& s, std::uint32_t id, const AddressMap& map,
                                         std::uint64_t line_bytes, std::uint64_t sets) {
  WarpLoop w;
  w.id = id;
  std::vector<std::optional<std::int64_t>> bytes_per_iteration(s.tensors.size());
  const LeafSchedule* first = nullptr;
  for (std::size_t i = 0; i < s.leaves.size(); ++i) {
    const LeafSchedule& leaf = s.leaves[i];
    const auto at = std::find(leaf.loop_ids.begin(), leaf.loop_ids.end(), id);
    if (at == leaf.loop_ids.end()) continue;
    const std::size_t level = std::size_t(at - leaf.loop_ids.begin());
    if (!first) {
      first = &leaf, w.level = level;
      w.period = leaf.time_levels[level].period, w.count = leaf.time_levels[level].count;
    }
    // The same node: the same times above it in every leaf.
    if (level != w.level || leaf.time_base != first->time_base) return std::nullopt;
    for (std::size_t l = 0; l <= level; ++l) {
      const TimeLevel &a = leaf.time_levels[l], &b = first->time_levels[l];
      if (a.count != b.count || a.period != b.period || a.offset != b.offset) return std::nullopt;
    }
    std::size_t li = 0;
    while (li < leaf.loops.size() && (leaf.loops[li].spatial || leaf.loops[li].time_level != int(level))) ++li;
    if (li == leaf.loops.size()) return std::nullopt;
    const LoopLevel& loop = leaf.loops[li];
    // A spatial split of its variable above it would give each instance its own clip.
    for (std::size_t k = 0; k < li && loop.variable >= 0; ++k)
      if (leaf.loops[k].spatial && leaf.loops[k].variable == loop.variable) return std::nullopt;
    w.leaves.push_back(i), w.loop.push_back(li);
    for (const LeafTensor& lt : leaf.tensors) {
      std::int64_t elements = 0;
      if (loop.variable >= 0) {
        const TensorInfo& t = s.tensors[std::size_t(lt.tensor)];
        for (std::size_t r = 0; r < lt.coefficients.size(); ++r)
          elements += t.strides[r] * lt.coefficients[r][std::size_t(loop.variable)];
        elements *= loop.tile_shape;
      }
      const std::int64_t b = elements * std::int64_t(map.bytes[std::size_t(lt.tensor)]);
      auto& have = bytes_per_iteration[std::size_t(lt.tensor)];
      if (have && *have != b) return std::nullopt;  // two leaves move one tensor differently
      have = b;
    }
  }
  if (!first || w.count < 3) return std::nullopt;
  // Blocks of iterations that move every tensor by whole multiples of line x sets.
  const std::int64_t m = std::int64_t(line_bytes * sets);
  for (const auto& b : bytes_per_iteration)
    if (b && *b != 0) {
      const std::int64_t r = positive_mod(*b, m);
      if (r != 0) w.block = std::lcm(w.block, m / std::gcd(m, r));
      if (w.block > w.count / 3) return std::nullopt;
    }
  w.delta.assign(s.tensors.size(), 0);
  for (std::size_t t = 0; t < s.tensors.size(); ++t)
    if (bytes_per_iteration[t]) w.delta[t] = *bytes_per_iteration[t] * w.block / std::int64_t(line_bytes);
  return w;
}

}  // namespace

bool warp_trace(const Schedule& s, const TraceOptions& o, const AddressMap& map, std::uint64_t line_bytes,
                CacheModel& model, WarpStats& stats) {
  if (o.shard || o.sample_timesteps || !model.can_warp()) return false;
  // Row-major tensors on whole lines: a shift of elements is a shift of lines, and each
  // line has one owner.
  LineOwners owners;
  for (std::size_t t = 0; t < map.layouts.size(); ++t) {
    const TensorLayout& l = map.layouts[t];
    if (l.span() == 0) continue;
    if (!l.identity() || l.base % line_bytes != 0) return false;
    owners.add(std::uint32_t(t), l.base / line_bytes, (l.end() - 1) / line_bytes);
  }
  const std::uint64_t sets = model.sets();

  // The loops to warp: every loop that translates, outer ones first. A span of an
  // outer loop is tried first; where it does not warp, the spans of the loops inside it.
  std::map<std::uint32_t, bool> tried;
  std::vector<std::pair<std::size_t, WarpLoop>> found;  // (depth, loop)
  for (const LeafSchedule& leaf : s.leaves)
    for (std::uint32_t id : leaf.loop_ids)
      if (tried.try_emplace(id, true).second)
        if (auto w = translating_loop(s, id, map, line_bytes, sets)) found.emplace_back(w->level, std::move(*w));
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<WarpLoop> loops;
  for (auto& f : found) loops.push_back(std::move(f.second));
  if (loops.empty()) return false;

  // The selection, as one window.
  std::int64_t lo = std::max<std::int64_t>(0, o.from.value_or(0)), hi = s.n_timesteps;
  if (o.to) hi = std::min(hi, *o.to);
  if (o.max_timesteps) hi = std::min(hi, *o.max_timesteps);

  // Each loop's instances (one per iteration of the loops above it) as spans of whole
  // strides, in time order.
  struct Span {
    std::int64_t begin, end;  // the iterations' times [begin, end)
    std::int64_t blocks;      // of loop.block iterations each
    const WarpLoop* loop;
  };
  std::vector<Span> spans;
  // Memory follows the spans: at most 2^16 instances of a loop, 2^18 in all.
  constexpr std::size_t kMaxSpans = std::size_t(1) << 16, kMaxAllSpans = std::size_t(1) << 18;
  std::vector<TimeOdometer> odometers;
  for (const LeafSchedule& leaf : s.leaves) odometers.push_back(leaf.odometer());
  // Whether no other leaf has a timestep in the span (a !Pipeline or !Parallel branch
  // beside the loop would not translate with it).
  const auto alone = [&](const WarpLoop& w, std::int64_t begin, std::int64_t end) {
    for (std::size_t i = 0; i < s.leaves.size(); ++i) {
      if (std::find(w.leaves.begin(), w.leaves.end(), i) != w.leaves.end()) continue;
      odometers[i].seek(begin);
      if (!odometers[i].done() && odometers[i].time() < end) return false;
    }
    return true;
  };
  for (const WarpLoop& w : loops) {
    const LeafSchedule& leaf = s.leaves[w.leaves.front()];
    std::vector<std::int64_t> digit(w.level, 0);
    std::int64_t instances = 1;
    for (std::size_t l = 0; l < w.level && instances <= std::int64_t(kMaxSpans); ++l)
      instances *= leaf.time_levels[l].count;
    if (std::size_t(instances) > kMaxSpans || spans.size() + std::size_t(instances) > kMaxAllSpans) continue;
    for (std::int64_t n = 0; n < instances; ++n) {
      std::int64_t start = leaf.time_base + leaf.time_levels[w.level].offset;
      for (std::size_t l = 0; l < w.level; ++l)
        start += digit[l] * leaf.time_levels[l].period + leaf.time_levels[l].offset;
      // The iterations [j0, j1) that are whole strides, in every leaf under the loop.
      std::int64_t j0 = 0, j1 = w.count;
      for (std::size_t i = 0; i < w.leaves.size(); ++i) {
        const LeafSchedule& f = s.leaves[w.leaves[i]];
        const LoopLevel& loop = f.loops[w.loop[i]];
        if (loop.variable < 0) continue;
        if (loop.initial_tile_shape != loop.tile_shape) j0 = 1;
        Interval iv{0, f.extent[std::size_t(loop.variable)]};
        for (std::size_t k = 0; k < w.loop[i]; ++k)
          if (f.loops[k].variable == loop.variable)
            iv = tiling::sub_tile(iv, f.loops[k], digit[std::size_t(f.loops[k].time_level)]);
        j1 = std::min(j1, tiling::first_not_full(iv.size(), loop));
      }
      const std::int64_t blocks = (j1 - j0) / w.block;
      const std::int64_t begin = start + j0 * w.period, end = begin + blocks * w.block * w.period;
      if (blocks >= 3 && begin >= lo && end <= hi && alone(w, begin, end)) spans.push_back({begin, end, blocks, &w});
      for (std::size_t l = w.level; l-- > 0;) {
        if (++digit[l] < leaf.time_levels[l].count) break;
        digit[l] = 0;
      }
    }
  }
  // In time order, a span before the spans inside it.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end > b.end; });
  if (spans.empty()) return false;

  std::int64_t now = lo;  // the timesteps before it are simulated
  WarpBlock first;
  const std::size_t max_runs = WarpBlock::max_runs(model);  // memory follows the cache, not the block
  const auto run = [&](std::int64_t a, std::int64_t b, bool record) {
    if (a >= b) return;
    TraceOptions r = o;
    r.from = a, r.to = b, r.max_timesteps.reset();
    auto lines = trace_runs_pipeline(s, r) | cache_lines(line_bytes, map, true);
    for (auto batch = lines.next_batch(); !batch.empty(); batch = lines.next_batch()) {
      if (record) first.add(batch, model);
      model.count(batch);
      stats.simulated += batch.size();
    }
  };
  CacheSnapshot before, after;
  constexpr int kAttempts = 6;  // blocks compared per span before the spans inside it are tried
  // Simulates [now, sp.begin), then a block of sp at a time until one matches the
  // block before it: then the rest of its blocks are counted. What the span came to:
  // warped; not matched in kAttempts blocks (the spans inside it may); or not worth
  // trying, as what the rest of its blocks could skip is less than what comparing
  // states costs (kWorth times the lines of a snapshot, where that is more than kSmall;
  // the spans inside it could skip less still): on DeepSeek-V3's decode layer the
  // snapshots of a 1 MiB cache cost twice the simulation they saved.
  enum class Warp { warped, unmatched, not_worth };
  constexpr std::uint64_t kWorth = 16, kSmall = std::uint64_t(1) << 16;  // a small cache's states cost little
  const CacheConfig& config = model.config();
  const std::uint64_t compare = kWorth * config.lines() * (config.three_cs ? 2 : 1);
  const auto worth = [&](std::int64_t blocks, std::uint64_t per_block) {
    return std::uint64_t(blocks) * per_block >= compare || compare <= kSmall;
  };
  // Per loop, the accesses of the last block of it simulated: a span of a loop whose
  // blocks are known to be too small to pay for a snapshot is not tried (on DeepSeek-V3's
  // decode layer, 128 spans of 7 blocks of 512 line accesses each took two snapshots of
  // a 1 MiB cache and its shadow).
  std::map<const WarpLoop*, std::uint64_t> seen_per_block;
  const auto warp = [&](const Span& sp) {
    if (const auto k = seen_per_block.find(sp.loop); k != seen_per_block.end() && !worth(sp.blocks - 1, k->second))
      return Warp::not_worth;
    run(now, sp.begin, false);
    now = sp.begin;
    const WarpLoop& w = *sp.loop;
    const std::int64_t block_time = w.block * w.period;
    model.snapshot(owners, before);
    for (std::int64_t b = 0; b + 1 < sp.blocks && b < kAttempts; ++b) {
      first.reset(w.delta, max_runs);
      run(now, now + block_time, true);
      now += block_time;
      model.snapshot(owners, after);
      const std::int64_t left = sp.blocks - b - 1;
      std::uint64_t per_block = 0;
      for (std::size_t k = 0; k < after.tallies.size(); ++k)
        per_block += after.tallies[k].accesses - before.tallies[k].accesses;
      seen_per_block[sp.loop] = per_block;
      if (first.matches(before, after, left)) {
        model.fast_forward(before, after, first, left);
        stats.skipped += std::uint64_t(left) * per_block;
        ++stats.warps;
        now += left * block_time;
        return Warp::warped;
      }
      if (!worth(left, per_block)) return Warp::not_worth;
      std::swap(before, after);
    }
    return Warp::unmatched;
  };
  // Simulates [now, end), warping the outermost spans inside it; where one does not
  // warp, the spans inside it from where it stopped.
  const auto by_begin = [](const Span& sp, std::int64_t t) { return sp.begin < t; };
  const auto within = [&](std::int64_t end, auto&& self) -> void {
    for (auto it = std::lower_bound(spans.begin(), spans.end(), now, by_begin); it != spans.end() && it->begin < end;) {
      if (it->end > end) {
        ++it;
        continue;
      }
      const Span& sp = *it;
      switch (warp(sp)) {
        case Warp::warped: break;
        case Warp::unmatched: self(sp.end, self); break;
        case Warp::not_worth: run(now, sp.end, false), now = sp.end; break;
      }
      it = std::lower_bound(spans.begin(), spans.end(), now, by_begin);
    }
    run(now, end, false);
    now = end;
  };
  within(hi, within);
  model.finish();
  return true;
}

}  // namespace looptrace
