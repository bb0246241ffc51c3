#include "stages/cache_warp.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

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

// The spans a cache over `map`'s lines may warp, in time order (a span before the spans
// inside it), and what it needs to compare and shift states; nothing when it cannot
// warp anywhere.
struct WarpPlan {
  struct Span {
    std::int64_t begin, end;  // the iterations' times [begin, end)
    std::int64_t blocks;      // of loop.block iterations each
    const WarpLoop* loop;
    std::int64_t block_time() const { return loop->block * loop->period; }
  };
  LineOwners owners;
  std::vector<WarpLoop> loops;  // the spans point into it
  std::vector<Span> spans;
  std::int64_t lo = 0, hi = 0;  // the selection, as one window
};

std::optional<WarpPlan> plan_warps(const Schedule& s, const TraceOptions& o, const AddressMap& map,
                                   std::uint64_t line_bytes, const CacheModel& model) {
  if (o.shard || o.sample_timesteps || !model.can_warp()) return std::nullopt;
  WarpPlan plan;
  // Row-major tensors on whole lines: a shift of elements is a shift of lines, and each
  // line has one owner.
  for (std::size_t t = 0; t < map.layouts.size(); ++t) {
    const TensorLayout& l = map.layouts[t];
    // A tensor not traced sits at 0, over the first traced one: it owns no line.
    if (l.span() == 0 || (t < map.placed.size() && !map.placed[t])) continue;
    if (!l.identity() || l.base % line_bytes != 0) return std::nullopt;
    plan.owners.add(std::uint32_t(t), l.base / line_bytes, (l.end() - 1) / line_bytes);
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
  for (auto& f : found) plan.loops.push_back(std::move(f.second));
  if (plan.loops.empty()) return std::nullopt;

  std::int64_t& lo = plan.lo;
  std::int64_t& hi = plan.hi;
  lo = std::max<std::int64_t>(0, o.from.value_or(0)), hi = s.n_timesteps;
  if (o.to) hi = std::min(hi, *o.to);
  if (o.max_timesteps) hi = std::min(hi, *o.max_timesteps);

  // Each loop's instances (one per iteration of the loops above it) as spans of whole
  // strides, in time order.
  std::vector<WarpPlan::Span>& spans = plan.spans;
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
  for (const WarpLoop& w : plan.loops) {
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
  std::sort(spans.begin(), spans.end(), [](const WarpPlan::Span& a, const WarpPlan::Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  if (spans.empty()) return std::nullopt;
  return plan;
}

// Whether a warp can pay: what the rest of a span's blocks could skip against what
// comparing states costs (kWorth times the lines of a snapshot, where that is more than
// kSmall; the spans inside it could skip less still). On DeepSeek-V3's decode layer the
// snapshots of a 1 MiB cache cost twice the simulation they saved. kWorth was 16 until
// stop 53, just above DeepSeek-V3's softmax spans of 128 tokens (127 blocks of 4,096
// line accesses left: 8,192 a line of the cache and its shadow, not 16); at 8, with the
// loops whose spans do not match left to rest, its prefill layer takes 7% fewer
// instructions, Llama 3 8B's 1% fewer, Mixtral 8x22B's 1% more (callgrind). Per loop it
// keeps the line accesses of the last block of it simulated: a span of a loop whose blocks are
// known to be too small is not tried at all (that layer has 128 spans of 7 blocks of
// 512 line accesses, each of which took two snapshots of a 1 MiB cache and its shadow).
class WarpWorth {
 public:
  explicit WarpWorth(const CacheConfig& c) : compare_(kWorth * c.lines() * (c.three_cs ? 2 : 1)) {}
  bool pays(std::int64_t blocks, std::uint64_t per_block) const {
    return std::uint64_t(blocks) * per_block >= compare_ || compare_ <= kSmall;
  }
  // Whether a span of `blocks` blocks of `loop` may pay, from its last block seen.
  bool may_pay(const WarpLoop* loop, std::int64_t blocks) const {
    const auto k = seen_.find(loop);
    return k == seen_.end() || pays(blocks, k->second);
  }
  // Whether comparing states at kPhases times into each block may pay: its blocks (the
  // last one seen) are each worth a comparison, and the loop's phases have not missed
  // kPhaseMisses blocks in a row. DeepSeek-V3's softmax matches at the first phase of
  // its second block (28% fewer instructions on its first eighth; at 8 comparisons a
  // block, as until stop 43, its blocks of 2^19 line accesses were not tried); its
  // scores never match at a phase (the keys' lines of the span before stay in their
  // sets through the second block): phases on every span cost 3% more instructions
  // there and 2% on its decode layer, and 1% once they stop after two misses.
  bool phases_pay(const WarpLoop* loop) const {
    if (const auto m = missed_.find(loop); m != missed_.end() && m->second >= kPhaseMisses) return false;
    const auto k = seen_.find(loop);
    return k == seen_.end() || pays(1, k->second);
  }
  void saw(const WarpLoop* loop, std::uint64_t per_block) { seen_[loop] = per_block; }
  // Whether to try a span of `loop`: not its next kRest (or more: tried()) spans after
  // kUnmatched in a row did not match (DeepSeek-V3's scores: spans of 128 blocks of one
  // token, whose three Cs' shadow holds the scores' rows of the previous latent tile,
  // read again at the same token: never the state before renamed; each try cost 6
  // blocks' snapshots). The spans inside one not tried are tried.
  bool may_try(const WarpLoop* loop) {
    const auto u = unmatched_.find(loop);
    if (u == unmatched_.end() || u->second.rest == 0) return true;
    --u->second.rest;
    return false;
  }
  // A span of `loop` was tried: whether it warped. Each rest in a row is twice as long
  // as the one before (up to 2^16 spans): a try of a span of 128 blocks of one token
  // took as many instructions as simulating 60 of them.
  void tried(const WarpLoop* loop, bool matched) {
    Unmatched& u = unmatched_[loop];
    if (matched) {
      u.in_row = 0, u.rests = 0;
    } else if (++u.in_row >= kUnmatched) {
      u.in_row = 0, u.rest = kRest << std::min(u.rests, 10u);
      ++u.rests;
    }
  }
  // A block of a span of `loop` compared states at phases: whether one matched.
  void phases_tried(const WarpLoop* loop, bool matched) {
    if (matched) missed_.erase(loop);
    else ++missed_[loop];
  }

 private:
  static constexpr std::uint64_t kWorth = 8, kSmall = std::uint64_t(1) << 16;  // a small cache's states cost little
  static constexpr std::uint64_t kPhaseMisses = 2;
  static constexpr unsigned kUnmatched = 2, kRest = 64;
  std::uint64_t compare_;
  std::map<const WarpLoop*, std::uint64_t> seen_;
  std::map<const WarpLoop*, std::uint64_t> missed_;  // blocks in a row whose phases matched none
  struct Unmatched {
    unsigned in_row = 0, rest = 0;  // spans unmatched in a row; spans left untried
    unsigned rests = 0;             // rests since a span of the loop matched
  };
  std::map<const WarpLoop*, Unmatched> unmatched_;
};

std::uint64_t accesses_between(const CacheSnapshot& before, const CacheSnapshot& after) {
  std::uint64_t n = 0;
  for (std::size_t k = 0; k < after.tallies.size(); ++k) n += after.tallies[k].accesses - before.tallies[k].accesses;
  return n;
}

constexpr int kAttempts = 6;  // blocks compared per span before the spans inside it are tried

// The times into a block [t0, t0 + length) at which its state is compared with the block
// before's at the same time: 1/16, 1/8, 3/16, 1/4, 3/8, 1/2 and 3/4 of the way, each moved
// on to the end of any span inside the block that holds it and may warp (a span is
// warped whole or not at all; one known not to pay is simulated, and may be cut); -1
// where that leaves the block, or repeats the time before.
constexpr std::size_t kPhases = 7;
constexpr std::array<std::int64_t, kPhases> kPhaseSixteenths = {1, 2, 3, 4, 6, 8, 12};
template <class MayWarp>
std::array<std::int64_t, kPhases> phase_times(const std::vector<WarpPlan::Span>& spans, std::int64_t t0,
                                              std::int64_t length, MayWarp may_warp) {
  std::array<std::int64_t, kPhases> at{};
  std::int64_t last = 0;
  const auto inside = std::lower_bound(spans.begin(), spans.end(), t0,
                                       [](const WarpPlan::Span& sp, std::int64_t x) { return sp.begin < x; });
  for (std::size_t k = 0; k < kPhases; ++k) {
    std::int64_t t = t0 + length / 16 * kPhaseSixteenths[k] + length % 16 * kPhaseSixteenths[k] / 16;
    for (auto it = inside; it != spans.end() && it->begin < t; ++it)
      if (it->end > t && it->end <= t0 + length && may_warp(*it)) t = it->end;
    at[k] = t <= t0 || t >= t0 + length || t - t0 == last ? -1 : t - t0;
    if (at[k] > 0) last = at[k];
  }
  return at;
}

// Probes: earlier times into a block, at 1/1024, 1/256, 1/64 and 1/32 of it, where its state
// is compared with the block before's too, but not moved on to the end of a span inside
// the block: the span goes on as it would (a probe only looks, as the simulation passes
// it), and where the states match, the outer span warps from there and the span inside
// is left. Mixtral 8x22B's experts: the second expert's first block of 128 token tiles
// (196,608 timesteps, simulated whole: its c-tiles do not translate) held the first
// phase of the span of experts, where the state had matched the first expert's after
// 12,288 (every set's lines, and the shadow's, are new by then).
constexpr std::size_t kProbes = 4;
constexpr std::array<std::int64_t, kProbes> kProbeParts = {1, 4, 16, 32};  // of 1024
// Thrown where a probe matched: the span of depth `depth` warped; the spans inside it
// are left as they are.
struct ProbeWarped {
  std::size_t depth;
};

}  // namespace

bool warp_trace(const Schedule& s, const TraceOptions& o, const AddressMap& map, std::uint64_t line_bytes,
                CacheModel& model, WarpStats& stats) {
  std::optional<WarpPlan> planned = plan_warps(s, o, map, line_bytes, model);
  if (!planned) return false;
  const WarpPlan& plan = *planned;
  using Span = WarpPlan::Span;
  const std::vector<Span>& spans = plan.spans;

  std::int64_t now = plan.lo;  // the timesteps before it are simulated
  const std::size_t max_runs = WarpBlock::max_runs(model);  // memory follows the cache, not the block
  // Per depth of the warps in progress (a span inside a block of a span being tried):
  // its block and the states around it.
  struct Level {
    WarpBlock first, previous;  // the block being simulated, the one before it
    CacheSnapshot before, after;
    // Per phase: the state at that time into the block before (if its time is the same
    // into this one), and the state now.
    std::array<CacheSnapshot, kPhases> phase_state;
    std::array<std::int64_t, kPhases> phase_time{};
    CacheSnapshot state;
    // The same for the probes, and what a probe needs to warp the span: it, the block
    // being simulated, its start, the records before its own, and whether a probe or a
    // phase of this block compared states.
    std::array<CacheSnapshot, kProbes> probe_state;
    std::array<std::int64_t, kProbes> probe_time{};
    const WarpPlan::Span* span = nullptr;
    std::int64_t block = 0, t0 = 0;
    std::size_t recorded = 0;
    bool compared = false;
  };
  std::deque<Level> levels;
  // The blocks being recorded, outer first: every access simulated goes to all of them.
  std::vector<WarpBlock*> recording;
  // One pipeline over the plan's window, sought to each window simulated: made anew for
  // each, its buffers' fresh pages and its plans took a third of Llama 3 8B's
  // feed-forward blocks (a window of 128 timesteps for each weight tile).
  TraceOptions window = o;
  window.from = plan.lo, window.to = plan.hi, window.max_timesteps.reset();
  auto lines = trace_runs_pipeline(s, window) | cache_lines(line_bytes, map, true);
  // The probes waiting, in time order, and what a probe does when the simulation
  // reaches its time (fire, below).
  struct Probe {
    std::int64_t time;
    std::size_t depth, k;
  };
  std::vector<Probe> probes;
  std::function<void(const Probe&)> fire;
  // Where the last window simulated ended: a window that starts there needs no seek (the
  // pipeline stands at the first timestep from there; a seek made its odometers again,
  // which cost more than a block of 4 timesteps of DeepSeek-V3's scores).
  std::int64_t simulated_to = -1;
  const auto simulate = [&](std::int64_t a, std::int64_t b) {
    if (a >= b) return;
    if (a != simulated_to) lines.seek(a);
    simulated_to = b;
    for (auto batch = lines.next_batch(b); !batch.empty(); batch = lines.next_batch(b)) {
      for (WarpBlock* w : recording) w->add(batch, model, lines.repeated());
      model.count(batch);
      stats.simulated += batch.size();
    }
  };
  // Simulates [a, b), stopping at each probe's time on the way (a probe whose time was
  // skipped by a warp is dropped).
  const auto run = [&](std::int64_t a, std::int64_t b) {
    while (a < b) {
      std::erase_if(probes, [&](const Probe& p) { return p.time < a; });
      if (!probes.empty() && probes.front().time == a) {
        const Probe p = probes.front();
        probes.erase(probes.begin());
        fire(p);  // (may throw ProbeWarped)
        continue;
      }
      const std::int64_t stop = probes.empty() ? b : std::min(b, probes.front().time);
      simulate(a, stop);
      a = stop;
    }
  };
  WarpWorth worth(model.config());
  // The loops whose blocks mark the lines of the tensors that do not move (and the
  // blocks inside theirs): those whose shadow matched only in part, or could have, and
  // those whose states differed only in places that such marks would show idle.
  std::vector<const WarpLoop*> still_loops;
  // The span of `at` warped from a time into its current block where the state matched
  // `earlier`, the block before's at that time (a phase or a probe): the rest of the
  // block is the block before's from there, the blocks after it the window's.
  const auto warp_from = [&](Level& at, const CacheSnapshot& earlier, std::int64_t n) {
    worth.phases_tried(at.span->loop, true);
    recording.resize(at.recorded);  // (this block's record, and those of the spans inside it)
    model.fast_forward_phase(at.before, earlier, at.state, at.first, at.previous, n);
    for (WarpBlock* outer : recording) outer->add_shifted(at.previous, n);
    stats.skipped += accesses_between(earlier, at.before) + std::uint64_t(n - 1) * accesses_between(earlier, at.state);
    ++stats.warps, ++stats.phase_warps;
    now = at.span->end;
  };
  // Simulates [now, sp.begin), then a block of sp at a time until one matches the
  // block before it: then the rest of its blocks are counted. Each block is simulated
  // warping the spans inside it (DeepSeek-V3's scores: a span of 8 blocks of two
  // context tiles matches only at its fifth block, while the sets that only the keys
  // use drop the lines of the head before it, and inside each block the spans of 16
  // token tiles match at their second); the lines they skip go to the block's record
  // shifted (add_shifted). A block is also compared with the one before it at phases
  // (phase_times): where the lines from before the span are gone from every set early in
  // the second block (GPT-3's feed-forward blocks of 8 token rows: after the first
  // row), the span warps there, not a block later. What the span came to: warped; not
  // matched in kAttempts blocks (the spans inside it may); or not worth trying
  // (WarpWorth).
  // Or resting: its loop's spans did not match of late (WarpWorth::may_try), so it is
  // not tried, and the spans inside it are.
  enum class Warp { warped, unmatched, not_worth, resting };
  const auto warp = [&](const Span& sp, std::size_t depth, auto&& within) {
    if (!worth.may_pay(sp.loop, sp.blocks - 1)) return Warp::not_worth;
    if (!worth.may_try(sp.loop)) return Warp::resting;
    run(now, sp.begin);
    now = sp.begin;
    const WarpLoop& w = *sp.loop;
    const std::int64_t block_time = sp.block_time();
    if (levels.size() <= depth) levels.emplace_back();
    Level& at = levels[depth];
    model.snapshot(plan.owners, at.before);
    at.phase_time.fill(-1), at.probe_time.fill(-1);
    at.span = &sp;
    const auto drop_probes = [&] { std::erase_if(probes, [&](const Probe& p) { return p.depth >= depth; }); };
    // Every way out of the span drops its probes and those of the spans inside it (all in
    // the past where a block ended; run() would drop them, but none is left to chance).
    struct DropProbes {
      decltype(drop_probes)& drop;
      ~DropProbes() { drop(); }
    } dropped_on_exit{drop_probes};
    for (std::int64_t b = 0; b + 1 < sp.blocks && b < kAttempts; ++b) try {
      at.first.reset(w.delta, max_runs);
      at.first.mark_still(std::find(still_loops.begin(), still_loops.end(), sp.loop) != still_loops.end() ||
                          std::any_of(recording.begin(), recording.end(), [](const WarpBlock* o) { return o->marks_still(); }));
      at.recorded = recording.size();
      recording.push_back(&at.first);
      const std::int64_t t0 = now;
      at.block = b, at.t0 = t0;
      const bool phases = b + 2 < sp.blocks && b + 1 < kAttempts && worth.phases_pay(sp.loop);
      std::array<std::int64_t, kPhases> times;
      if (phases)
        times = phase_times(spans, t0, block_time, [&](const Span& in) { return worth.may_pay(in.loop, in.blocks - 1); });
      bool& compared = at.compared;  // (at a phase or probe of this block and the one before)
      compared = false;
      // The probes of this block: before its first phase, each at a time of its own.
      drop_probes();
      if (phases) {
        std::int64_t first_phase = block_time, last = 0;
        for (const std::int64_t t : times)
          if (t > 0) first_phase = std::min(first_phase, t);
        for (std::size_t k = 0; k < kProbes; ++k) {
          const std::int64_t t = block_time / 1024 * kProbeParts[k] + block_time % 1024 * kProbeParts[k] / 1024;
          if (t > last && t < first_phase) probes.push_back({t0 + t, depth, k}), last = t;
        }
        std::sort(probes.begin(), probes.end(), [](const Probe& x, const Probe& y) { return x.time < y.time; });
      }
      for (std::size_t k = 0; k < kPhases && phases; ++k) {
        const std::int64_t t = times[k];
        if (t < 0) continue;
        within(t0 + t, depth + 1, within);
        model.snapshot(plan.owners, at.state);
        // The blocks b .. sp.blocks - 1 repeat from here if the window since this
        // phase of block b - 1 renames its state to this one.
        const std::int64_t n = sp.blocks - b;
        compared = compared || at.phase_time[k] == t;
        if (at.phase_time[k] == t && at.first.matches(at.phase_state[k], at.state, n, &at.previous)) {
          warp_from(at, at.phase_state[k], n);
          return Warp::warped;
        }
        std::swap(at.phase_state[k], at.state);
        at.phase_time[k] = t;
      }
      if (compared) worth.phases_tried(sp.loop, false);
      if (!phases) at.phase_time.fill(-1);
      within(t0 + block_time, depth + 1, within);
      recording.pop_back();
      model.snapshot(plan.owners, at.after);
      const std::int64_t left = sp.blocks - b - 1;
      const std::uint64_t per_block = accesses_between(at.before, at.after);
      worth.saw(sp.loop, per_block);
      if (at.first.matches(at.before, at.after, left)) {
        stats.partial_shadow_warps += at.first.shadow_top() < at.after.shadow.size();
        stats.idle_place_warps += at.first.idle_places() != 0;
        model.fast_forward(at.before, at.after, at.first, left);
        for (WarpBlock* outer : recording) outer->add_shifted(at.first, left);
        stats.skipped += std::uint64_t(left) * per_block;
        ++stats.warps;
        now += left * block_time;
        return Warp::warped;
      }
      if (at.first.wants_still() && !at.first.marks_still()) still_loops.push_back(sp.loop);
      if (!worth.pays(left, per_block)) return Warp::not_worth;
      std::swap(at.before, at.after);
      std::swap(at.first, at.previous);
    } catch (const ProbeWarped& e) {
      if (e.depth != depth) throw;
      return Warp::warped;
    }
    return Warp::unmatched;
  };
  // A probe reached: its level's state compared with the block before's at the same
  // time into it; where they match, the span warps from here (as at a phase), and the
  // spans inside it are left (ProbeWarped unwinds them).
  fire = [&](const Probe& p) {
    Level& at = levels[p.depth];
    const Span& sp = *at.span;
    const std::int64_t t = p.time - at.t0;
    model.snapshot(plan.owners, at.state);
    const std::int64_t n = sp.blocks - at.block;
    at.compared = at.compared || at.probe_time[p.k] == t;
    if (at.probe_time[p.k] == t && at.first.matches(at.probe_state[p.k], at.state, n, &at.previous)) {
      warp_from(at, at.probe_state[p.k], n);
      ++stats.probe_warps;
      throw ProbeWarped{p.depth};
    }
    std::swap(at.probe_state[p.k], at.state);
    at.probe_time[p.k] = t;
  };
  // Simulates [now, end), warping the outermost spans inside it; where one does not
  // warp, the spans inside it from where it stopped.
  const auto by_begin = [](const Span& sp, std::int64_t t) { return sp.begin < t; };
  const auto within = [&](std::int64_t end, std::size_t depth, auto&& self) -> void {
    for (auto it = std::lower_bound(spans.begin(), spans.end(), now, by_begin); it != spans.end() && it->begin < end;) {
      if (it->end > end) {
        ++it;
        continue;
      }
      const Span& sp = *it;
      switch (warp(sp, depth, self)) {
        case Warp::warped: worth.tried(sp.loop, true); break;
        case Warp::unmatched: worth.tried(sp.loop, false), self(sp.end, depth, self); break;
        case Warp::not_worth: run(now, sp.end), now = sp.end; break;
        case Warp::resting:  // block by block, as a span being tried simulates its blocks
          run(now, sp.begin), now = sp.begin;
          for (std::int64_t b = 1; b <= sp.blocks; ++b) self(sp.begin + b * sp.block_time(), depth + 1, self);
          break;
      }
      it = std::lower_bound(spans.begin(), spans.end(), now, by_begin);
    }
    run(now, end);
    now = end;
  };
  within(plan.hi, 0, within);
  model.finish();
  return true;
}

namespace {

// A recorded block's line accesses in order, as runs of consecutive lines of one trace,
// tensor and direction: what a later block must repeat, shifted, to be counted as it.
// At most `max_runs` runs (then it overflows: no warp), so memory follows the cache.
class BlockAccesses {
 public:
  struct Run {
    std::uint64_t line;  // the first
    std::uint64_t length;
    std::uint32_t trace, tensor;
    bool write;
  };
  void reset(std::size_t max_runs) { runs_.clear(), max_runs_ = max_runs, overflow_ = false; }
  void add(std::span<const LineAccess> batch) {
    for (const LineAccess& a : batch) {
      if (overflow_) return;
      if (!runs_.empty()) {
        Run& r = runs_.back();
        if (a.line == r.line + r.length && a.trace == r.trace && a.tensor == r.tensor && a.write == r.write) {
          ++r.length;
          continue;
        }
      }
      if (runs_.size() == max_runs_) {
        overflow_ = true, runs_.clear();
        return;
      }
      runs_.push_back({a.line, 1, a.trace, a.tensor, a.write});
    }
  }
  bool overflow() const { return overflow_; }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;
  std::size_t max_runs_ = 0;
  bool overflow_ = false;
};

}  // namespace

bool warp_stream(const Schedule& s, const TraceOptions& o, const AddressMap& map, std::uint64_t line_bytes,
                 const std::function<std::span<const LineAccess>()>& next, CacheModel& model, WarpStats& stats) {
  std::optional<WarpPlan> planned = plan_warps(s, o, map, line_bytes, model);
  if (!planned) return false;
  const WarpPlan& plan = *planned;
  using Span = WarpPlan::Span;
  const std::vector<Span>& spans = plan.spans;
  const std::size_t max_runs = WarpBlock::max_runs(model);
  WarpWorth worth(model.config());
  WarpBlock first;         // the recorded block's lines, for matches() and fast_forward()
  BlockAccesses recorded;  // ... and its accesses in order, for checking the blocks after it
  CacheSnapshot before, after;

  // Where the stream is: plainly simulated; in a span, recording block `block` (ending at
  // `block_end`); or checking that block `block` repeats the recorded one shifted
  // `block - recorded_block` times (`checked` blocks so far did), `in_run` lines into
  // run `run_at` of it. A span is tried only if it begins at or after `now`: every
  // access before `now` was simulated, and none after it.
  enum class Phase { plain, record, check } phase = Phase::plain;
  auto it = spans.begin();  // the next span to try
  const Span* sp = nullptr;
  std::int64_t now = plan.lo, block = 0, block_end = 0, recorded_block = 0, checked = 0, left = 0;
  std::uint64_t per_block = 0;
  std::size_t run_at = 0;
  std::uint64_t in_run = 0;
  std::vector<LineAccess> replay;

  const auto start_recording = [&] { first.reset(sp->loop->delta, max_runs), recorded.reset(max_runs); };
  const auto simulate = [&](std::span<const LineAccess> batch, bool record) {
    if (batch.empty()) return;
    if (record) first.add(batch, model), recorded.add(batch);
    model.count(batch);
    stats.simulated += batch.size();
  };
  // The blocks checked so far are counted and the state shifted past them.
  const auto take_checked = [&] {
    if (checked == 0) return;
    stats.partial_shadow_warps += first.shadow_top() < after.shadow.size();
    stats.idle_place_warps += first.idle_places() != 0;
    model.fast_forward(before, after, first, checked);
    stats.skipped += std::uint64_t(checked) * per_block;
    ++stats.warps;
  };
  // The block being checked did not repeat the recorded one: the blocks before it are
  // counted, what it repeated so far is simulated, and the stream goes on plainly from
  // `resume` on.
  const auto give_up = [&](std::int64_t resume) {
    ++stats.abandoned;
    take_checked();
    const std::int64_t times = block - recorded_block;
    const auto& runs = recorded.runs();
    replay.clear();
    for (std::size_t r = 0; r <= run_at && r < runs.size(); ++r) {
      const std::uint64_t n = r < run_at ? runs[r].length : in_run;
      const std::int64_t d = times * sp->loop->delta[runs[r].tensor];
      for (std::uint64_t k = 0; k < n; ++k) {
        replay.push_back({block_end - sp->block_time(), std::uint64_t(std::int64_t(runs[r].line + k) + d),
                          runs[r].trace, runs[r].tensor, runs[r].write});
        if (replay.size() == 4096) simulate(replay, false), replay.clear();
      }
    }
    simulate(replay, false);
    phase = Phase::plain, now = resume;
  };
  // Block `block` of sp is over: every access before block_end was seen.
  const auto end_block = [&] {
    if (phase == Phase::record) {
      model.snapshot(plan.owners, after);
      left = sp->blocks - block - 1;
      per_block = accesses_between(before, after);
      worth.saw(sp->loop, per_block);
      if (!recorded.overflow() && first.matches(before, after, left)) {
        phase = Phase::check, recorded_block = block, checked = 0, run_at = 0, in_run = 0;
      } else if (!worth.pays(left, per_block)) {
        phase = Phase::plain, now = sp->end;  // nor the spans inside it
      } else if (left <= 1 || block + 1 >= kAttempts) {
        phase = Phase::plain, now = block_end;  // the spans inside it from here
      } else {
        std::swap(before, after);
        start_recording();
      }
    } else if (run_at != recorded.runs().size()) {  // checking: the block stopped short
      give_up(block_end);
    } else {
      run_at = 0, in_run = 0;
      if (++checked == left) take_checked(), phase = Phase::plain, now = sp->end;
    }
    ++block, block_end += sp->block_time();
  };

  for (auto batch = next(); !batch.empty(); batch = next()) {
    const LineAccess* p = batch.data();
    const LineAccess* const end = p + batch.size();
    while (p != end) {
      // The blocks that end before this access are over.
      while (phase != Phase::plain && p->timestep >= block_end) end_block();
      if (phase == Phase::plain) {
        while (it != spans.end() && it->begin < now) ++it;
        const std::int64_t begin = it != spans.end() ? it->begin : kEndOfTime;
        const LineAccess* q = p;
        while (q != end && q->timestep < begin) ++q;
        simulate({p, q}, false);
        if (q != p) now = std::max(now, q[-1].timestep + 1);
        p = q;
        if (p == end) break;
        // This access is at or after the span's begin, and none before it is: it starts,
        // unless it has no access or is known not to pay (then it is simulated plainly,
        // as are the spans inside it).
        sp = &*it++;
        now = sp->begin;
        if (p->timestep >= sp->end || !worth.may_pay(sp->loop, sp->blocks - 1)) {
          now = sp->end;
          continue;
        }
        model.snapshot(plan.owners, before);
        start_recording();
        phase = Phase::record, block = 0, block_end = sp->begin + sp->block_time();
        continue;
      }
      if (phase == Phase::record) {
        const LineAccess* q = p;
        while (q != end && q->timestep < block_end) ++q;
        simulate({p, q}, true);
        p = q;
        continue;
      }
      // Checking: this access must be the next recorded one, shifted.
      const auto& runs = recorded.runs();
      bool same = run_at < runs.size();
      if (same) {
        const BlockAccesses::Run& r = runs[run_at];
        const std::int64_t d = (block - recorded_block) * sp->loop->delta[r.tensor];
        same = p->tensor == r.tensor && p->trace == r.trace && p->write == r.write &&
               p->line == std::uint64_t(std::int64_t(r.line + in_run) + d);
      }
      if (!same) {
        give_up(p->timestep + 1);  // this access and the rest of its timestep are simulated
        continue;
      }
      if (++in_run == runs[run_at].length) ++run_at, in_run = 0;
      ++p;
    }
  }
  // The stream is over: the block being recorded or checked ends here.
  while (phase != Phase::plain) end_block();
  model.finish();
  return true;
}
}  // namespace looptrace
