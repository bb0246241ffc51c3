// An exact cache simulator as a stage (SEMANTICS "Caches"):
//
//   trace_pipeline(s, o) | cache(config)                  the trace at the compute
//   transfer_pipeline(s, o, t) | cache(config)            a cache in front of level L
//   ... | cache({l1, l2})                                 a hierarchy, innermost first
//   ... | cache(config) | cache_traffic()                 what goes down: a transfer
//                                                         trace (issue_cycles, sinks)
//
// The stage yields one CacheAccess per line access (of the last cache of a hierarchy):
// hit or miss, the evicted line, what was sent down. Its counts (accesses, hits, misses
// split by the three Cs, write-backs) are read with counts() once the stream is done.
// Tags live in flat arrays per set; nothing is allocated per access.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/stages/cache_lines.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/transfer_request.hpp"

namespace looptrace {

enum class CachePolicy { lru, fifo, plru };

struct CacheConfig {
  std::string name = "cache";
  std::uint64_t size = 1 << 20;  // bytes
  std::uint64_t ways = 16;       // 0: fully associative
  std::uint64_t line_bytes = 64;
  CachePolicy policy = CachePolicy::lru;
  bool write_back = true;      // else write-through
  bool write_allocate = true;
  bool three_cs = true;        // classify misses (a shadow fully associative LRU cache)

  std::uint64_t lines() const { return size / line_bytes; }
  std::uint64_t associativity() const { return ways == 0 ? lines() : ways; }
  std::uint64_t sets() const { return lines() / associativity(); }
};

// Refuses (SpecError) a shape no cache has: a line that is not a power of two, a size
// that is not a whole number of sets, more ways than lines, plru over ways that are not
// a power of two.
void check_cache_config(const CacheConfig& config);
// "lru", "fifo", "plru"; SpecError otherwise.
CachePolicy parse_cache_policy(const std::string& text);
const char* policy_name(CachePolicy policy);

struct CacheCounts {
  std::uint64_t accesses = 0, hits = 0, misses = 0;
  std::uint64_t cold = 0;      // misses on the line's first access
  std::uint64_t capacity = 0;  // non-cold misses of the fully associative LRU shadow
  std::uint64_t writebacks = 0, write_throughs = 0;
  // What neither cold nor capacity explains; negative where the policy beats LRU.
  std::int64_t conflict() const { return std::int64_t(misses) - std::int64_t(cold) - std::int64_t(capacity); }
  CacheCounts& operator+=(const CacheCounts& o);
};

struct CacheReport {
  CacheConfig config;
  CacheCounts total;
  std::vector<CacheCounts> tensors;  // per Schedule::tensors
  std::vector<CacheCounts> traces;   // per Schedule::traces (no write-backs: a victim has no trace)
};

struct CacheAccess {
  enum Flags : std::uint8_t {
    write = 1,
    hit = 2,
    evicted = 4,   // a line left the cache (`victim`)
    dirty = 8,     // ... and was written back
    fetched = 16,  // the line was read from below (a miss that allocates)
    through = 32,  // the write went down at once (write-through, or a write miss without allocation)
  };
  std::int64_t timestep;
  std::uint64_t address;  // the line's first byte
  std::uint64_t victim;   // the evicted line's first byte (with `evicted`)
  std::uint32_t trace;    // Schedule::traces, or kNoTrace
  std::uint32_t tensor;
  std::uint32_t victim_tensor;
  std::uint8_t flags;

  bool is(Flags f) const { return (flags & f) != 0; }
};

// Which tensor a line belongs to, from the tensors' line ranges (a warp shifts each
// tensor's lines by its own amount, and the three-Cs shadow keeps no owner).
class LineOwners {
 public:
  // [first, last] lines of each tensor that has any (tensors may not share a line).
  void add(std::uint32_t tensor, std::uint64_t first, std::uint64_t last);
  // The tensor of `line`; UINT32_MAX when no range holds it.
  std::uint32_t operator()(std::uint64_t line) const;
  // out[i]: the tensor of lines[i] (the range of the line before tried first).
  void of(std::span<const std::uint64_t> lines, std::vector<std::uint32_t>& out) const;

 private:
  struct Range {
    std::uint64_t first, last;
    std::uint32_t tensor;
  };
  std::vector<Range> ranges_;  // sorted by first
};

// One key's counters in a cache (CacheModel counts per key: a trace, or a tensor for
// what no trace makes); misses are accesses - hits.
struct CacheTally {
  std::uint64_t accesses = 0, hits = 0, cold = 0, capacity = 0, write_throughs = 0;
};

// A cache's state and counts at one moment, to find and take a warp (Morelli and
// Reineke, "Warping cache simulation of polyhedral programs", PLDI 2022): the lines by
// set and recency, as the engine and its three-Cs shadow hold them.
struct CacheSnapshot {
  std::vector<std::uint64_t> lines;   // per set, its ways newest first (~0 where a way is empty)
  std::uint64_t ways = 0;             // per set in `lines`
  bool lru = false;                   // places are ranks of last use (else of fill)
  std::vector<std::uint8_t> dirty;    // per entry of `lines`
  std::vector<std::uint32_t> owner;   // per entry of `lines`: the tensor
  std::vector<std::uint64_t> shadow;  // the shadow's lines, oldest first
  std::vector<std::uint32_t> shadow_owner;
  std::vector<CacheTally> tallies;    // per key
  std::vector<std::uint64_t> writebacks;  // per tensor
};

// Consecutive lines `first` .. `last` that a block of a warp touched first in the block
// with one key (CacheModel::key_of of the first access of each) and tensor, for the
// cold misses of the blocks a warp skips.
struct FirstRun {
  std::uint64_t last;
  std::uint32_t key, tensor;
};

class CacheModel;
class SeenLines;  // (stages/seen_lines.hpp)

// The lines one block of a warp touched of the tensors that move (`delta` != 0), as
// runs of consecutive lines (runs of one length at a stride as one group), each line
// once with its first access's key, and per tensor the lowest and highest line. Memory
// follows the log: past max_runs() entries once joined (then overflow(): no warp), so
// at most about 2 x max_runs() are held between joins; max_runs() is tied to the
// cache's lines, not to the block's.
class WarpBlock {
 public:
  using Runs = std::vector<std::pair<std::uint64_t, FirstRun>>;  // by first line; disjoint

  WarpBlock();
  ~WarpBlock();
  WarpBlock(WarpBlock&&) noexcept;
  WarpBlock& operator=(WarpBlock&&) noexcept;

  // The cap on the log's entries (runs and groups) of a block for `model`: 32 x (its
  // lines + its shadow's), at least 4096. (A 1 MiB cache of 64-byte lines and its
  // shadow hold 2^15 lines; the prefill layers measured needed up to 2^19 + 1 runs a
  // block, single lines at a stride, before those were one group.)
  static std::size_t max_runs(const CacheModel& model);

  void reset(std::span<const std::int64_t> delta, std::size_t max_runs);
  // `repeated`: the batch's groups that repeat their trace's previous group (CacheLines::
  // repeated()); one whose previous group was added since reset() is marked already.
  void add(std::span<const LineAccess> batch, const CacheModel& model, std::span<const RepeatedGroup> repeated = {});
  // The lines the `blocks` blocks after `inner` touched, as add() would have recorded
  // them: `inner`'s runs shifted by its deltas 1 .. blocks times (a warp inside this
  // block counted those blocks instead of simulating them).
  void add_shifted(const WarpBlock& inner, std::int64_t blocks);
  bool overflow() const { return overflow_; }
  bool touched(std::uint64_t line) const;
  // The runs by first line, those that could join joined (sorted when asked: a warp
  // needs them in no order, each_group()).
  Runs runs() const;
  // fn(first, FirstRun, stride, count) for each group of `count` runs, first .. last,
  // then each `stride` lines on (count 1: one run), in no particular order (as
  // recorded, or sorted by a join). The runs of all of them are disjoint.
  template <class Fn>
  void each_group(Fn fn) const {
    for (const Logged& r : log_) fn(r.first, FirstRun{r.last, r.key, r.tensor}, r.stride, r.count);
  }
  std::size_t group_count() const { return log_.size(); }  // (those each_group gives)
  std::span<const std::int64_t> delta() const { return delta_; }
  // Whether the next `blocks` blocks, each this block shifted once more by delta[tensor]
  // lines (a multiple of the sets: lines keep their sets), repeat its outcomes. `later`
  // (the state after this block) must be `earlier` (before it) renamed, position by
  // position, with the same dirty bits and tensors: a line the block touched shifted by
  // its delta; another either shifted too (it moves with them: an earlier block's
  // line) or in its place, and then out of reach of the lines the next blocks touch.
  // The renaming keeps sets and tensors, and maps each block and its start state onto
  // the next. A place of the engine may instead hold lines that differ but are idle,
  // both clean or dirty lines of one tensor (idle_places()). Under LRU: each is
  // accessed by no block before it leaves its set, which the block shows (a line the
  // block did not touch goes where the block took it, each block after alike); the
  // state after the blocks is then built place by place (advance()). Under FIFO:
  // `earlier`'s, untouched by the block and gone from `later` (it aged out), and
  // `later`'s, untouched by the next block (the next block ages it out as this one did
  // `earlier`'s). Keeps the lines left in place for CacheModel::fast_forward.
  // `also` (if given) is a block recorded before this one: the lines either touched.
  // A phase into a block (CacheModel::fast_forward_phase) compares states one block
  // apart, across two blocks' records: the lines of both are more than the window
  // touched, which only makes the comparison stricter.
  bool matches(const CacheSnapshot& earlier, const CacheSnapshot& later, std::int64_t blocks,
               const WarpBlock* also = nullptr);
  // After matches(): whether `line` of `later` (the engine's, or the shadow's) stays.
  bool stays(std::uint64_t line, bool shadow) const;
  // After matches(): where `line` of `later` (the engine's, or the shadow's), of tensor
  // `owner`, is `blocks` blocks on: moved with its tensor unless it stays.
  std::uint64_t shifted(std::uint64_t line, std::uint32_t owner, std::int64_t blocks, bool shadow) const;
  // After matches(): the newest places of `later`'s shadow that it compared (the
  // others hold lines no block touches), and how many of them fell below those places
  // in the block (each block after pushes down as many, shifted once more).
  std::size_t shadow_top() const { return shadow_top_; }
  // After matches(): the places of the engine where `earlier` and `later` held idle
  // lines that differ (see matches()).
  std::size_t idle_places() const { return idle_places_; }
  // After matches() with idle places under LRU: the state the next `blocks` blocks
  // leave (blocks <= those matches() was asked for), from `earlier` and `later`, the
  // states before and after this block. Each place the block filled holds `later`'s
  // line shifted `blocks` times; each other holds, the way the block moved lines, the
  // line it holds one block before, back to a place the block filled, or to `later`.
  bool rebuilds() const { return rebuilds_; }
  void advance(const CacheSnapshot& earlier, const CacheSnapshot& later, std::int64_t blocks,
               CacheSnapshot& out) const;
  std::size_t shadow_fall() const { return shadow_fall_; }
  // Whether add() marks the lines of the tensors that do not move (on after reset()):
  // only a shadow compared in part, and idle places of such lines, need them, and a
  // block of GPT-3's feed-forward layer touches 10^5 weight lines a timestep. After
  // matches(): whether it compared the shadow in part, or found only such places in
  // the way, but could not tell, for want of them.
  void mark_still(bool on) { mark_still_ = on, still_marked_ = still_marked_ && on; }
  bool marks_still() const { return mark_still_; }
  bool wants_still() const { return wants_still_; }

 private:
  // `count` runs first .. last, + stride, ... (count 1: one run, stride 0). Lines that
  // a block touches at a stride (DeepSeek-V3's softmax: a score per line, 2^19 a block)
  // are one entry, and so are a warp's skipped blocks shifted (add_shifted()).
  struct Logged {
    std::uint64_t first, last;
    std::uint32_t key, tensor;
    std::uint64_t stride = 0, count = 1;
  };
  // Records the lines first .. last (of one key and tensor) not recorded before.
  void record(std::uint64_t first, std::uint64_t last, std::uint32_t key, std::uint32_t tensor);
  // The same for `count` runs `stride` apart (stride > last - first): at once where
  // none of their lines was recorded before, else run by run.
  void record_group(const Logged& g);
  // The lines first .. last, none recorded before, into the log.
  void log_fresh(std::uint64_t first, std::uint64_t last, std::uint32_t key, std::uint32_t tensor) {
    log_group({first, last, key, tensor});
  }
  // A group whose lines were none recorded before, into the log: it extends the last
  // entry where it continues it (a run by the next lines; a group by its next runs).
  void log_group(const Logged& g);
  // Past max_runs() entries in the log: joined where they can; past it still, overflow.
  void bound();
  // Sorted by first line, runs that follow each other with one key and tensor made one
  // (groups of more than one run left as they are).
  static void join(std::vector<Logged>& runs);
  std::vector<std::int64_t> delta_;
  // The runs as recorded: disjoint (each line once, with its first key), in time order
  // until a join sorts them (bound()), a run extended while the next lines follow it. Where DeepSeek-V3's softmax blocks
  // record 2^19 single lines, an ordered map's nodes (made, walked and freed each block)
  // were most of its time.
  std::vector<Logged> log_;
  std::size_t joined_ = 0;  // the log's size when last joined
  // A bit per line the block touched: which lines of a run are new, and touched().
  std::unique_ptr<SeenLines> touched_lines_;
  // A bit per line of the tensors that do not move that the block touched, where
  // still_marked_ (mark_still_ since reset()); wants_still_: matches() needed them and
  // had none.
  std::unique_ptr<SeenLines> still_lines_;
  // matches()'s: the untouched lines that move along with the touched ones, as bits (a
  // sorted copy, searched for each block of each line left in place, was a tenth of
  // DeepSeek-V3's AV_latent: 6,000 to 23,000 lines at each compare).
  std::unique_ptr<SeenLines> along_lines_;
  // Runs of two or more lines recently marked in the block (touched, or still), by a
  // hash of their first line, of generation gen_ (reset() makes a new one): a run that
  // one covers is marked already, so add() asks neither its key nor the bitmap's words
  // (a weight tile read at every timestep: 128 runs of 4 lines each, Mixtral 8x22B's
  // and DeepSeek-V3's, recorded again at each).
  struct MarkedRun {
    std::uint64_t first = 0, last = 0, gen = 0;
  };
  static constexpr unsigned kMarkedRunBits = 9;
  std::vector<MarkedRun> marked_runs_;
  std::uint64_t gen_ = 0;
  std::int64_t first_added_ = INT64_MAX;  // the first timestep add() saw since reset()
  bool still_marked_ = true, mark_still_ = true, wants_still_ = false;
  std::size_t max_runs_ = 0;
  std::vector<std::uint64_t> low_, high_;  // per tensor (low > high: none)
  std::vector<std::uint64_t> stay_, stay_shadow_;  // what matches() left in place
  // The same as bits, which stays() tests: shift_state() asks of every line of the cache
  // and its shadow at each warp (a binary search each, and the sorts before them, were
  // 4% of DeepSeek-V3's layer and 7% of Mixtral 8x22B's scores).
  std::unique_ptr<SeenLines> stay_lines_, stay_shadow_lines_;
  std::size_t shadow_top_ = 0, shadow_fall_ = 0;
  std::size_t idle_places_ = 0;
  bool rebuilds_ = false;
  std::vector<std::size_t> idle_sets_;  // under LRU: the first places of the sets with idle places, in order
  bool overflow_ = false;
  // Whether this block touched `line` (of `owner`): nullopt for a tensor that does not
  // move where its lines are not marked.
  std::optional<bool> touches(std::uint64_t line, std::uint32_t owner) const;
};

// Which engine simulates a cache. `fastest`: the one made for its shape (a 64-byte
// block per set up to 16 ways, a hash and a list when fully associative). `generic`: a
// stamp (LRU, FIFO) or tree (PLRU) per way whatever the shape, the plain reading of
// the contract, which tests run the fast engines against; the outcomes are the same.
enum class CacheEngine { fastest, generic };

// One cache: feed it line accesses in order, read its counts.
class CacheModel {
 public:
  // Checks config.
  CacheModel(const CacheConfig& config, std::size_t tensors, std::size_t traces,
             CacheEngine engine = CacheEngine::fastest);
  CacheModel(CacheModel&&) noexcept;
  CacheModel& operator=(CacheModel&&) noexcept;
  ~CacheModel();

  // Appends one CacheAccess per line access to `out`.
  void run(std::span<const LineAccess> in, std::vector<CacheAccess>& out);
  // The same, counting only (what `looptrace cache` reports needs no per-access outcome).
  void count(std::span<const LineAccess> in);
  // The stream is over: lines still dirty are write-backs. Once; later calls do nothing.
  void finish();
  CacheReport report() const;
  const CacheConfig& config() const;
  // How many of count()'s line accesses were counted as repeats of the previous
  // timestep's in their set (hits in the ways recorded, no lookup): a diagnostic.
  std::uint64_t repeats() const;
  // Whether the loops made for AVX2 and BMI run (the CPU has them and
  // LOOPTRACE_BASELINE_ISA was not set when the model was made): a diagnostic.
  bool wide_loops() const;
  // How many line accesses the three Cs' shadow (on its own) counted as hits of lines it
  // pinned (repeated at their places in each timestep, so certainly held; no update): a
  // diagnostic.
  std::uint64_t pinned_hits() const;
  // Of repeats(), how many were in a set that differed elsewhere in their timestep (hits
  // again in the way recorded, the set's ages moved as a lookup's hit moves them): a
  // diagnostic.
  std::uint64_t differing_set_repeats() const;
  // Of pinned_hits(), how many were counted a streak at a time (rows of pinned lines at a
  // stride that thrash their sets, LRU: every one a miss): a diagnostic.
  std::uint64_t pinned_streak_lines() const;

  // Warps (cache_warp.cpp). Whether the engine's state can be read and shifted: LRU and
  // FIFO, whose outcomes depend on the lines' recency alone, not on which way holds them.
  bool can_warp() const;
  std::uint64_t sets() const { return config().sets(); }
  // The counters an access goes to.
  std::size_t key_of(const LineAccess& a) const;
  void snapshot(const LineOwners& owners, CacheSnapshot& out) const;
  // After block.matches(earlier, later, blocks): the model is at `later`; the next
  // `blocks` blocks' counts are added (their cold misses found by marking the block's
  // first lines shifted, block by block) and the lines that move with the blocks are
  // shifted by blocks x delta.
  void fast_forward(const CacheSnapshot& earlier, const CacheSnapshot& later, const WarpBlock& block,
                    std::int64_t blocks);
  // The same from a phase into a block: `earlier` is the state a time into block b - 1,
  // `later` the state as far into block b (the model's now), and
  // window.matches(earlier, later, blocks) said so. Then the blocks from b on repeat
  // (the model is a function of its state and the accesses, both renamed alike), so
  // the model goes to the end of block b + blocks - 1: its state is `start` (the state
  // at block b's start) with each line that moves shifted blocks times; its counts add
  // the rest of block b (block b - 1's, from `earlier` to `start`) and blocks - 1
  // blocks more (the window's, from `earlier` to `later`), their cold misses found by
  // marking `previous` (block b - 1's record) shifted 1 .. blocks times.
  void fast_forward_phase(const CacheSnapshot& start, const CacheSnapshot& earlier, const CacheSnapshot& later,
                          const WarpBlock& window, const WarpBlock& previous, std::int64_t blocks);

 private:
  struct Impl;
  Impl* impl_ = nullptr;  // owned (opaque, so the header stays light)
};

// What one cache sends down for `a`, in the contract's order (the victim's write-back,
// then the fetch or the unallocated write, then the write-through), as requests.
inline void traffic_of(const CacheAccess& a, std::vector<TransferRequest>& out) {
  if (a.is(CacheAccess::dirty)) out.push_back({a.timestep, a.victim, true, 0, a.victim_tensor});
  if (a.is(CacheAccess::fetched)) out.push_back({a.timestep, a.address, false, 0, a.tensor});
  if (a.is(CacheAccess::through)) out.push_back({a.timestep, a.address, true, 0, a.tensor});
}

// The line accesses of the next cache down: `traffic_of` cut to its lines.
void lower_lines(std::span<const CacheAccess> in, std::uint64_t upper_line_bytes, std::uint64_t lower_line_bytes,
                 std::vector<LineAccess>& out);

template <LineSource Up>
class Cache : public Stage<Cache<Up>, CacheAccess> {
 public:
  Cache(Up up, const std::vector<CacheConfig>& levels) : up_(std::move(up)) {
    for (const CacheConfig& c : levels)
      levels_.emplace_back(c, this->schedule().tensors.size(), this->schedule().traces.size());
    between_.resize(levels.size());
  }

  // The next line accesses' outcomes at the last cache, in time order.
  std::span<const CacheAccess> next_batch(std::int64_t until = kEndOfTime) {
    for (;;) {
      const std::span<const LineAccess> in = up_.next_batch(until);
      if (in.empty()) {
        // Empty before the end of time: the stream is done (next_timestep() may stay a
        // lower bound, as a transfer trace cut at --to leaves it).
        if (until == kEndOfTime || up_.next_timestep() == kEndOfTime)
          for (CacheModel& m : levels_) m.finish();
        return {};
      }
      std::span<const LineAccess> lines = in;
      for (std::size_t i = 0; i < levels_.size(); ++i) {
        between_[i].clear();
        levels_[i].run(lines, between_[i]);
        if (i + 1 == levels_.size()) break;
        lower_lines(between_[i], levels_[i].config().line_bytes, levels_[i + 1].config().line_bytes, lower_);
        lines = lower_;
      }
      if (!between_.back().empty()) return between_.back();
    }
  }
  std::int64_t next_timestep() const { return up_.next_timestep(); }
  const StreamContext& context() const { return up_.context(); }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }
  // Each cache's counts, innermost first (complete once the stream is done).
  std::vector<CacheReport> counts() const {
    std::vector<CacheReport> out;
    for (const CacheModel& m : levels_) out.push_back(m.report());
    return out;
  }
  const CacheConfig& last_config() const { return levels_.back().config(); }

 private:
  Up up_;
  std::vector<CacheModel> levels_;
  std::vector<std::vector<CacheAccess>> between_;  // per level: its outcomes of this batch
  std::vector<LineAccess> lower_;
};

struct CacheAdaptor : StageAdaptor {
  std::vector<CacheConfig> levels;
  std::optional<AddressMap> map;  // the layout (none: the one `transfers` uses)

  template <Source Up>
  auto operator()(Up up) const {
    if constexpr (LineSource<Up>)
      return Cache<Up>(std::move(up), levels);
    else
      return std::move(up) | cache_lines(levels.front().line_bytes, map) | *this;
  }
};

// `... | cache(config)`: one cache; `cache({inner, ..., outer})`: a hierarchy, each
// cache's traffic going to the next. Over accesses or transfer requests, the lines are
// made first (cache_lines, with the first cache's line size).
inline CacheAdaptor cache(std::vector<CacheConfig> levels, std::optional<AddressMap> map = {}) {
  for (const CacheConfig& c : levels) check_cache_config(c);
  if (levels.empty()) throw SpecError("a cache stage needs at least one cache");
  CacheAdaptor a;
  a.levels = std::move(levels);
  a.map = std::move(map);
  return a;
}
inline CacheAdaptor cache(CacheConfig config, std::optional<AddressMap> map = {}) {
  return cache(std::vector<CacheConfig>{std::move(config)}, std::move(map));
}

// What the last cache sends down, as a transfer trace (child 0): misses as DRAMsim3 or
// Ramulator 2 input through issue_cycles and make_transfer_sink. Dirty lines left at the
// end go nowhere (they are counted as write-backs).
template <Source Up>
  requires std::same_as<ValueOf<Up>, CacheAccess>
class CacheTraffic : public ForwardingStage<CacheTraffic<Up>, Up, TransferRequest> {
 public:
  explicit CacheTraffic(Up up) : ForwardingStage<CacheTraffic<Up>, Up, TransferRequest>(std::move(up)) {}

  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime) {
    out_.clear();
    while (out_.empty()) {
      const auto in = this->up_.next_batch(until);
      if (in.empty()) break;
      for (const CacheAccess& a : in) traffic_of(a, out_);
    }
    return out_;
  }

 private:
  std::vector<TransferRequest> out_;
};

struct CacheTrafficAdaptor : StageAdaptor {
  template <Source Up>
  CacheTraffic<Up> operator()(Up up) const {
    return CacheTraffic<Up>(std::move(up));
  }
};
inline CacheTrafficAdaptor cache_traffic() { return {}; }

}  // namespace looptrace
