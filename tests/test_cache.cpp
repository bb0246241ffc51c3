// Caches: the conv1d example at a 2-line cache with every miss named, each policy's
// victim by hand, the write policies, the three Cs, hierarchies, reuse distances
// against a plain LRU stack, and the shapes a cache refuses.
#include <doctest/doctest.h>

#include <array>
#include <list>
#include <map>
#include <optional>
#include <cstdlib>
#include <random>
#include <set>
#include <unordered_map>

#include "helpers.hpp"
#include "looptrace/stages/cache.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/stages/reuse_distances.hpp"
#include "looptrace/stages/trace_pipeline.hpp"
#include "looptrace/stages/transfers.hpp"
#include "stages/cache_warp.hpp"
#include "stages/seen_lines.hpp"

using namespace looptrace;

namespace {

CacheConfig shape(std::uint64_t size, std::uint64_t ways, std::uint64_t line = 64,
                  CachePolicy policy = CachePolicy::lru) {
  CacheConfig c;
  c.size = size, c.ways = ways, c.line_bytes = line, c.policy = policy;
  return c;
}

template <class S>
std::vector<CacheAccess> drain(S& stage) {
  std::vector<CacheAccess> out;
  for (auto b = stage.next_batch(); !b.empty(); b = stage.next_batch()) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Line accesses by hand: lines of tensor 0, reads unless `writes` marks them.
std::vector<LineAccess> lines_of(std::vector<std::uint64_t> lines, std::vector<bool> writes = {}) {
  std::vector<LineAccess> out;
  for (std::size_t i = 0; i < lines.size(); ++i)
    out.push_back({std::int64_t(i), lines[i], kNoTrace, 0, i < writes.size() && writes[i]});
  return out;
}

// fn(at, to) for consecutive batches [at, to) of a stream of `size` accesses: at most
// `most` each, cut at a timestep's end (`ends`, ascending) three times in four, else
// anywhere inside a timestep.
template <class Fn>
void cut_batches(std::size_t size, const std::vector<std::size_t>& ends, std::size_t most, std::mt19937_64& rng, Fn fn) {
  for (std::size_t at = 0, e = 0; at < size;) {
    std::size_t to = std::min(size, at + 1 + rng() % most);
    while (e < ends.size() && ends[e] < to) ++e;
    if (rng() % 4 != 0 && e < ends.size()) to = ends[e];
    fn(at, to);
    at = to;
  }
}

// Every count of two reports' tensors, traces or totals equal.
void check_same(const CacheCounts& a, const CacheCounts& b) {
  CHECK(a.accesses == b.accesses);
  CHECK(a.hits == b.hits);
  CHECK(a.misses == b.misses);
  CHECK(a.cold == b.cold);
  CHECK(a.capacity == b.capacity);
  CHECK(a.writebacks == b.writebacks);
  CHECK(a.write_throughs == b.write_throughs);
}

// `c` with the three Cs and write mode 0 (write-back, allocate), 1 (write-through) or 2
// (write-back, no allocation on a write miss).
CacheConfig with_three_cs(CacheConfig c, int write_mode) {
  c.write_back = write_mode != 1, c.write_allocate = write_mode != 2, c.three_cs = true;
  return c;
}

// One batch run() through two models: each access's outcome and victim the same.
void run_both(CacheModel& a, CacheModel& b, std::span<const LineAccess> batch) {
  std::vector<CacheAccess> out_a, out_b;
  a.run(batch, out_a), b.run(batch, out_b);
  REQUIRE(out_a.size() == out_b.size());
  for (std::size_t i = 0; i < out_a.size(); ++i) {
    CHECK(out_a[i].flags == out_b[i].flags);
    CHECK(out_a[i].victim == out_b[i].victim);
  }
}

// Every count of two reports, per tensor and in total.
void check_reports(const CacheReport& x, const CacheReport& y) {
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (std::size_t t = 0; t < x.tensors.size(); ++t) {
    CAPTURE(t);
    check_same(x.tensors[t], y.tensors[t]);
  }
  check_same(x.total, y.total);
}

// Which lines hit, as a string of h / m.
std::string outcomes(CacheConfig c, const std::vector<LineAccess>& in, CacheReport* report = nullptr) {
  CacheModel m(c, 1, 0);
  std::vector<CacheAccess> out;
  m.run(in, out);
  m.finish();
  if (report) *report = m.report();
  std::string s;
  for (const CacheAccess& a : out) s += a.is(CacheAccess::hit) ? 'h' : 'm';
  return s;
}

}  // namespace

TEST_CASE("cache: conv1d at a 2-line direct-mapped cache, each miss named") {
  // --align 64, 64-byte lines: I, W, O are lines 0, 1, 2 (0x0, 0x40, 0x80); 2 sets of
  // 1 way: I and O share set 0, W has set 1. Each timestep reads I, W, writes O.
  const Schedule s = th::compile_text(th::kConv1d);
  CacheConfig c = shape(128, 1);
  auto stage = trace_pipeline(s, {}) | cache(c, default_address_map(s, StreamContext{&s, {}, {}}, 64));
  const std::vector<CacheAccess> a = drain(stage);
  REQUIRE(a.size() == 72);
  // t = 0: three cold misses; O's fill evicts I from set 0.
  CHECK((a[0].address == 0x0 && !a[0].is(CacheAccess::hit) && !a[0].is(CacheAccess::evicted)));
  CHECK((a[1].address == 0x40 && !a[1].is(CacheAccess::hit)));
  CHECK((a[2].address == 0x80 && a[2].is(CacheAccess::write) && a[2].victim == 0x0 && !a[2].is(CacheAccess::dirty)));
  // t = 1: I misses and evicts dirty O (a write-back of 0x80); W hits; O evicts I.
  CHECK((a[3].timestep == 1 && a[3].address == 0x0 && a[3].victim == 0x80 && a[3].is(CacheAccess::dirty)));
  CHECK(a[4].is(CacheAccess::hit));
  CHECK((a[5].address == 0x80 && !a[5].is(CacheAccess::hit) && a[5].victim == 0x0));
  const CacheReport r = stage.counts().front();
  // Every later timestep as t = 1: 3 + 23 x 2 misses; W hits 23 times. A fully
  // associative LRU cache of 2 lines misses all 72 (three lines in turn through two),
  // so conflict is negative: direct mapping keeps W, which LRU evicts.
  CHECK(r.total.accesses == 72);
  CHECK(r.total.hits == 23);
  CHECK(r.total.misses == 49);
  CHECK(r.total.cold == 3);
  CHECK(r.total.capacity == 69);
  CHECK(r.total.conflict() == -23);
  CHECK(r.total.writebacks == 24);  // O evicted at t = 1..23, and dirty at the end
  CHECK(r.tensors[2].writebacks == 24);
  CHECK(r.traces[1].hits == 23);  // W's trace
}

TEST_CASE("cache: conv1d at a 2-line fully associative LRU cache misses everything") {
  const Schedule s = th::compile_text(th::kConv1d);
  auto stage = trace_pipeline(s, {}) | cache(shape(128, 0));
  drain(stage);
  const CacheReport r = stage.counts().front();
  CHECK(r.total.misses == 72);
  CHECK(r.total.cold == 3);
  CHECK(r.total.capacity == 69);
  CHECK(r.total.conflict() == 0);
  CHECK(r.total.writebacks == 24);
}

TEST_CASE("cache: in front of MainMemory, over its transfer trace") {
  // Requests at 3q: READ 0x0 (I), READ 0x1000 (W); at 3q + 3: WRITE 0x2000 (O). Three
  // lines through two: every request misses; O's 8 writes are all written back.
  const Schedule s = th::compile_text(th::kConv1d);
  TransferOptions t;
  t.level = "MainMemory";
  auto stage = transfer_pipeline(s, {}, t) | cache(shape(128, 0));
  const std::vector<CacheAccess> a = drain(stage);
  const CacheReport r = stage.counts().front();
  CHECK(r.total.accesses == 24);
  CHECK(r.total.misses == 24);
  CHECK(r.total.cold == 3);
  CHECK(r.total.writebacks == 8);
  CHECK(a[0].trace == kNoTrace);
  // The misses as a transfer trace: the first write-back follows the O write at t = 3.
  auto down = transfer_pipeline(s, {}, t) | cache(shape(128, 0)) | cache_traffic();
  std::vector<TransferRequest> reqs;
  for (auto b = down.next_batch(); !b.empty(); b = down.next_batch()) reqs.insert(reqs.end(), b.begin(), b.end());
  REQUIRE(reqs.size() == 24 + 7);  // every fetch, and the 7 write-backs before the end
  CHECK((reqs[0].address == 0x0 && !reqs[0].write));
  CHECK((reqs[2].timestep == 3 && reqs[2].address == 0x2000 && !reqs[2].write));  // O's fetch (write-allocate)
}

TEST_CASE("cache: each policy's victim") {
  // One set of 4 ways. A B C D fill it; then C, A; then E.
  // LRU evicts B; FIFO evicts A (filled first); PLRU follows its tree: touching A last
  // points the root right, where touching C pointed that node at D.
  const auto in = lines_of({0, 1, 2, 3, 2, 0, 4, 1, 0, 3});
  CHECK(outcomes(shape(4, 4, 1, CachePolicy::lru), in) == "mmmmhhmmhm");   // E evicts B; B evicts D; D evicts C
  CHECK(outcomes(shape(4, 4, 1, CachePolicy::fifo), in) == "mmmmhhmhmh");  // E evicts A; then A evicts B
  CHECK(outcomes(shape(4, 4, 1, CachePolicy::plru), in) == "mmmmhhmhhm");  // E evicts D
  // Empty ways fill first, the lowest first: a direct-mapped cache of 2 sets.
  CHECK(outcomes(shape(2, 1, 1), lines_of({0, 1, 2, 1, 0})) == "mmmhm");
  // Sets that are not a power of two: line mod 3.
  CHECK(outcomes(shape(3, 1, 1), lines_of({0, 3, 1, 4, 0})) == "mmmmm");
  CHECK(outcomes(shape(3, 1, 1), lines_of({0, 1, 2, 0, 1, 2})) == "mmmhhh");
}

TEST_CASE("cache: write policies") {
  // Lines 0 (write), 1, 2 (reads) through a 2-line fully associative LRU cache; then 0 again.
  const auto in = lines_of({0, 1, 2, 0}, {true, false, false, true});
  CacheReport r;
  CHECK(outcomes(shape(2, 0, 1), in, &r) == "mmmm");
  CHECK(r.total.writebacks == 2);  // 0 evicted dirty by 2; 0 written again, dirty at the end
  CHECK(r.total.write_throughs == 0);
  CacheConfig wt = shape(2, 0, 1);
  wt.write_back = false;
  CHECK(outcomes(wt, in, &r) == "mmmm");
  CHECK(r.total.writebacks == 0);
  CHECK(r.total.write_throughs == 2);
  CacheConfig nwa = shape(2, 0, 1);
  nwa.write_allocate = false;
  // The write miss of 0 fills nothing, so 1 and 2 both fit, and 0 misses again.
  CHECK(outcomes(nwa, lines_of({0, 1, 2, 1, 0}, {true, false, false, false, true}), &r) == "mmmhm");
  CHECK(r.total.writebacks == 0);
  CHECK(r.total.cold == 3);
  CHECK(r.total.capacity == 1);  // the shadow does not allocate the write either: 0 misses there too
  // What goes down, in order: the victim's write-back, then the fetch, then the write.
  CacheModel m(shape(1, 0, 1), 1, 0);
  std::vector<CacheAccess> out;
  m.run(lines_of({5, 6}, {true, false}), out);
  std::vector<TransferRequest> down;
  traffic_of(out[1], down);
  REQUIRE(down.size() == 2);
  CHECK((down[0].address == 5 && down[0].write));
  CHECK((down[1].address == 6 && !down[1].write));
}

TEST_CASE("cache: a hierarchy sends each cache's traffic to the next") {
  // L1: 1 line; L2: 2 lines. Reads 0 1 0 1: L1 misses all four, L2 hits the last two.
  auto lines = lines_of({0, 1, 0, 1});
  CacheModel l1(shape(1, 0, 1), 1, 0), l2(shape(2, 0, 1), 1, 0);
  std::vector<CacheAccess> a, b;
  std::vector<LineAccess> between;
  l1.run(lines, a);
  lower_lines(a, 1, 1, between);
  l2.run(between, b);
  CHECK(l1.report().total.misses == 4);
  CHECK(l2.report().total.accesses == 4);
  CHECK(l2.report().total.hits == 2);
  // A larger line below: two upper lines are one lower line.
  lower_lines(a, 1, 2, between);
  CHECK((between.size() == 4 && between[1].line == 0));
}

TEST_CASE("cache: the three Cs add up to the misses") {
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> ls;
  for (int i = 0; i < 5000; ++i) ls.push_back(rng() % 40);
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru}) {
    CacheReport r;
    outcomes(shape(16, 4, 1, p), lines_of(ls), &r);
    CHECK(r.total.cold == 40);
    CHECK(std::int64_t(r.total.misses) == std::int64_t(r.total.cold + r.total.capacity) + r.total.conflict());
    CacheReport full;
    outcomes(shape(16, 0, 1, CachePolicy::lru), lines_of(ls), &full);
    CHECK(full.total.conflict() == 0);  // fully associative LRU is its own shadow
  }
}

TEST_CASE("reuse distances: by hand, and against a plain LRU stack") {
  ReuseDistances d(1);
  d.run(lines_of({0, 1, 2, 0, 1, 1}));
  // 0 and 1 come back after two other lines; 1 again after none.
  CHECK(d.histogram() == std::vector<std::uint64_t>{1, 0, 2});
  CHECK(d.misses_at_powers() == std::vector<std::uint64_t>{5, 5, 3});  // 1, 2, 4 lines
  // Many times the tree's first size (its times are renumbered): a stack by hand.
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> ls;
  for (int i = 0; i < 30000; ++i) ls.push_back(rng() % (i < 15000 ? 300 : 3000));
  ReuseDistances big(1);
  big.run(lines_of(ls));
  std::vector<std::uint64_t> stack, hist;
  for (std::uint64_t l : ls) {
    const auto it = std::find(stack.begin(), stack.end(), l);
    if (it != stack.end()) {
      const std::size_t dist = std::size_t(stack.end() - it) - 1;
      if (dist >= hist.size()) hist.resize(dist + 1);
      ++hist[dist];
      stack.erase(it);
    }
    stack.push_back(l);
  }
  hist.resize(big.histogram().size());
  CHECK(big.histogram() == hist);
  CHECK(big.lines() == stack.size());
  // The curve at C lines is a fully associative LRU cache of C lines.
  const auto curve = big.misses_at_powers();
  for (std::size_t k : {3u, 6u, 9u}) {
    CacheReport r;
    outcomes(shape(std::uint64_t(1) << k, 0, 1), lines_of(ls), &r);
    CHECK(curve[k] == r.total.misses);
  }
}

TEST_CASE("reuse distances: random streams against an O(n^2) stack, in uneven batches") {
  // Uniform lines, sweeps with jumps, and a stream of new lines among recent ones (the
  // cold accesses' bits wait outside the levels until time leaves their block); up to
  // 8000 lines, so the times are renumbered many times and span three levels of
  // counts. The histogram, the cold accesses, the lines, and the curve in total and
  // per tensor (tensor = line % 3) against a plain LRU stack.
  std::mt19937_64 rng(41);
  for (int kind = 0; kind < 3; ++kind)
    for (std::uint64_t lines : {50u, 700u, 8000u}) {
      std::vector<LineAccess> in;
      std::uint64_t fresh = 0, start = 0;
      for (int i = 0; i < 20000; ++i) {
        std::uint64_t l;
        if (kind == 0) {
          l = rng() % lines;
        } else if (kind == 1) {
          if (i % 1500 == 0) start = rng() % lines;
          l = (start + rng() % 256) % lines;
        } else {
          // A new line a tenth of the time, else one of the last `lines` new ones, the
          // recent ones more often.
          const std::uint64_t back = std::min<std::uint64_t>(fresh, lines);
          l = fresh == 0 || rng() % 10 == 0 ? fresh++ : fresh - 1 - rng() % (rng() % back + 1);
        }
        in.push_back({i, l, kNoTrace, std::uint32_t(l % 3), false});
      }
      ReuseDistances d(3);
      for (std::size_t at = 0; at < in.size();) {
        const std::size_t n = std::min<std::size_t>(in.size() - at, rng() % 3000);
        d.run(std::span(in).subspan(at, n));
        at += n;
      }
      std::vector<std::uint64_t> stack, hist;
      std::vector<std::int64_t> dist;  // per access; -1 cold
      for (const LineAccess& a : in) {
        const auto it = std::find(stack.begin(), stack.end(), a.line);
        std::int64_t dd = -1;
        if (it != stack.end()) {
          dd = std::int64_t(stack.end() - it) - 1;
          if (std::size_t(dd) >= hist.size()) hist.resize(std::size_t(dd) + 1);
          ++hist[std::size_t(dd)];
          stack.erase(it);
        }
        dist.push_back(dd);
        stack.push_back(a.line);
      }
      CAPTURE(kind);
      CAPTURE(lines);
      std::vector<std::uint64_t> got = d.histogram();
      while (!got.empty() && got.back() == 0) got.pop_back();
      CHECK(got == hist);
      CHECK(d.lines() == stack.size());
      CHECK(d.cold() == std::uint64_t(std::count(dist.begin(), dist.end(), -1)));
      CHECK(d.accesses() == in.size());
      // Misses at 2^k lines: cold, or a distance >= 2^k.
      const auto misses = [&](std::uint64_t c, int tensor) {
        std::uint64_t m = 0;
        for (std::size_t i = 0; i < in.size(); ++i)
          if (tensor < 0 || in[i].tensor == std::uint32_t(tensor)) m += dist[i] < 0 || std::uint64_t(dist[i]) >= c;
        return m;
      };
      const auto total = d.misses_at_powers();
      for (std::size_t k = 0; k < total.size(); ++k) CHECK(total[k] == misses(std::uint64_t(1) << k, -1));
      for (std::uint32_t t = 0; t < 3; ++t) {
        const auto mine = d.misses_at_powers(t);
        for (std::size_t k = 0; k < mine.size(); ++k) CHECK(mine[k] == misses(std::uint64_t(1) << k, int(t)));
      }
    }
}

TEST_CASE("cache: shapes it refuses") {
  CHECK_THROWS_WITH_AS(check_cache_config(shape(1000, 16)), doctest::Contains("not a whole number of 64 bytes lines"),
                       SpecError);
  CHECK_THROWS_WITH_AS(check_cache_config(shape(64 * 24, 16)), doctest::Contains("multiple of line x ways"), SpecError);
  CHECK_THROWS_WITH_AS(check_cache_config(shape(128, 4)), doctest::Contains("more than its 2 lines"), SpecError);
  CHECK_THROWS_WITH_AS(check_cache_config(shape(96, 1, 48)), doctest::Contains("power of two"), SpecError);
  CHECK_THROWS_WITH_AS(check_cache_config(shape(64 * 12, 3, 64, CachePolicy::plru)),
                       doctest::Contains("plru"), SpecError);
  CHECK(parse_bytes("1MiB", "--size") == 1 << 20);
  CHECK(parse_bytes("64KiB", "--size") == 65536);
  CHECK_THROWS_AS(parse_bytes("1.5MiB", "--size"), SpecError);
  CHECK(parse_cache_spec("LLC=2MiB/full", {}).ways == 0);
  CHECK_THROWS_AS(parse_cache_spec("L1=32KiB", {}), SpecError);
}

TEST_CASE("cache: a set of 16 or 32 ways is a fully associative cache of its lines") {
  // The signature compare (ways in eights) against the list engine, set by set.
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> ls;
  for (int i = 0; i < 20000; ++i) ls.push_back(rng() % 300);
  for (std::uint64_t ways : {8u, 16u, 32u})
    for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo}) {
      const std::uint64_t sets = 3;
      CacheReport whole;
      const std::string got = outcomes(shape(sets * ways, ways, 1, p), lines_of(ls), &whole);
      std::string want(ls.size(), '?');
      for (std::uint64_t s = 0; s < sets; ++s) {
        std::vector<std::uint64_t> mine;
        std::vector<std::size_t> where;
        for (std::size_t i = 0; i < ls.size(); ++i)
          if (ls[i] % sets == s) mine.push_back(ls[i]), where.push_back(i);
        const std::string one = outcomes(shape(ways, 0, 1, p), lines_of(mine));
        for (std::size_t k = 0; k < where.size(); ++k) want[where[k]] = one[k];
      }
      CHECK(got == want);
    }
}

TEST_CASE("cache: the engines made for a shape are the generic engine, access for access") {
  // The block engines (LRU, FIFO, PLRU up to 16 ways) against a stamp or tree
  // per way: random lines of three tensors over 1 to 64 sets, a third writes, under
  // each write policy; every outcome (hit, victim, its owner, dirty, fetched, through)
  // and every count, write-backs at the end included.
  std::mt19937_64 rng(29);
  int runs = 0;
  for (CachePolicy p : {CachePolicy::plru, CachePolicy::lru, CachePolicy::fifo})
    for (std::uint64_t ways : {1u, 2u, 4u, 8u, 16u})
      for (std::uint64_t sets : {1u, 3u, 4u, 64u})
        for (int write_mode = 0; write_mode < 3; ++write_mode) {
          CacheConfig c = shape(sets * ways, ways, 1, p);
          c.write_back = write_mode != 1, c.write_allocate = write_mode != 2;
          // Lines over about twice the cache, so that sets fill, evict and come back.
          const std::uint64_t span = 2 * sets * ways + 1;
          std::vector<LineAccess> in;
          for (int i = 0; i < 4000; ++i) {
            const std::uint64_t line = rng() % span;
            in.push_back({i / 4, line, kNoTrace, std::uint32_t(line % 3), rng() % 3 == 0});
          }
          CacheModel fast(c, 3, 0), generic(c, 3, 0, CacheEngine::generic);
          std::vector<CacheAccess> a, b;
          // In uneven batches: an engine keeps nothing per batch.
          for (std::size_t at = 0; at < in.size();) {
            const std::size_t n = std::min<std::size_t>(in.size() - at, 1 + rng() % 700);
            fast.run(std::span(in).subspan(at, n), a);
            generic.run(std::span(in).subspan(at, n), b);
            at += n;
          }
          fast.finish(), generic.finish();
          CAPTURE(policy_name(p));
          CAPTURE(ways);
          CAPTURE(sets);
          CAPTURE(write_mode);
          REQUIRE(a.size() == b.size());
          std::size_t differ = 0;
          for (std::size_t i = 0; i < a.size(); ++i)
            differ += a[i].flags != b[i].flags || a[i].victim != b[i].victim ||
                      a[i].victim_tensor != b[i].victim_tensor || a[i].address != b[i].address;
          CHECK(differ == 0);
          const CacheReport x = fast.report(), y = generic.report();
          CHECK(x.total.hits == y.total.hits);
          CHECK(x.total.misses == y.total.misses);
          CHECK(x.total.writebacks == y.total.writebacks);
          CHECK(x.total.write_throughs == y.total.write_throughs);
          CHECK(x.total.capacity == y.total.capacity);
          for (std::size_t t = 0; t < 3; ++t) {
            CHECK(x.tensors[t].hits == y.tensors[t].hits);
            CHECK(x.tensors[t].writebacks == y.tensors[t].writebacks);
          }
          // Neither all hits nor all misses: the sets were exercised.
          CHECK(x.total.hits > 0);
          CHECK(x.total.misses > x.total.cold);
          ++runs;
        }
  CHECK(runs == 3 * 5 * 4 * 3);
}

TEST_CASE("cache: timesteps that repeat the one before count as plain simulation does") {
  // A weight held under a loop of tokens: each timestep reads the same lines (a tile
  // that changes every few timesteps), beside lines that change every timestep (at a
  // place of the tile's, some the same line read then written); now and then an access
  // is dropped, added or its direction flipped. count() (which counts the sets that
  // repeat without a lookup) against the generic engine's run(), batches cut anywhere,
  // some of them run() with each outcome written (nothing recorded then may be repeated)
  // and reports taken in between, under each policy and write policy, with and without
  // the three Cs, the weight's lines counted per trace (two traces, one a tensor) or
  // per tensor.
  std::mt19937_64 rng(47);
  int runs = 0;
  std::uint64_t repeats = 0, accesses = 0;  // in caches the tiles fit
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (std::uint64_t ways : {1u, 2u, 4u, 16u})
      for (std::uint64_t sets : {1u, 8u, 64u})
        for (int write_mode = 0; write_mode < 3; ++write_mode) {
          CacheConfig c = shape(sets * ways * 64, ways, 64, p);
          c.write_back = write_mode != 1, c.write_allocate = write_mode != 2, c.three_cs = rng() % 3 != 0;
          const bool traced = rng() % 2 == 0;  // the tile's lines of traces 0 and 1 (tensors 0 and 1)
          std::vector<LineAccess> in;
          std::vector<std::size_t> ends;  // where each timestep ends in `in`
          std::vector<LineAccess> tile;
          std::size_t place = 0, fresh = 0;
          bool rewrite = false;
          for (std::int64_t t = 0; t < 160; ++t) {
            if (t % (6 + std::int64_t(rng() % 18)) == 0 || tile.empty()) {  // a new tile
              tile.clear();
              const std::uint64_t base = rng() % (4 * sets * ways);
              const std::size_t n = 64 + rng() % 64;
              for (std::size_t k = 0; k < n; ++k)
                tile.push_back({0, base + (rng() % 8 == 0 ? rng() % (2 * sets * ways) : k),
                                traced ? std::uint32_t(k % 2) : kNoTrace, std::uint32_t(k % 2), rng() % 8 == 0});
              place = rng() % (n + 1), fresh = rng() % 5, rewrite = rng() % 2;
            }
            std::vector<LineAccess> step(tile.begin(), tile.begin() + std::ptrdiff_t(place));
            for (std::size_t k = 0; k < fresh; ++k) {  // lines of a tensor that moves
              const std::uint64_t line = 1000000 + std::uint64_t(t) * 7 + k;
              step.push_back({0, line, kNoTrace, 2, false});
              if (rewrite) step.push_back({0, line, kNoTrace, 2, true});
            }
            step.insert(step.end(), tile.begin() + std::ptrdiff_t(place), tile.end());
            switch (rng() % 12) {
              case 0: step.erase(step.begin() + std::ptrdiff_t(rng() % step.size())); break;
              case 1: step.push_back({0, rng() % (4 * sets * ways), kNoTrace, 1, false}); break;
              case 2: step[rng() % step.size()].write ^= true; break;
              default: break;
            }
            for (LineAccess& a : step) a.timestep = t, in.push_back(a);
            ends.push_back(in.size());
          }
          CacheModel fast(c, 3, 2), generic(c, 3, 2, CacheEngine::generic);
          std::vector<CacheAccess> out, scratch;
          cut_batches(in.size(), ends, 900, rng, [&](std::size_t at, std::size_t to) {
            if (rng() % 16 == 0) fast.run(std::span(in).subspan(at, to - at), scratch);
            else fast.count(std::span(in).subspan(at, to - at));
            if (rng() % 16 == 0) (void)fast.report();
          });
          generic.run(in, out);
          fast.finish(), generic.finish();
          CAPTURE(policy_name(p));
          CAPTURE(ways);
          CAPTURE(sets);
          CAPTURE(write_mode);
          CAPTURE(c.three_cs);
          const CacheReport x = fast.report(), y = generic.report();
          for (std::size_t t = 0; t < 3; ++t) {
            CAPTURE(t);
            check_same(x.tensors[t], y.tensors[t]);
            if (t < 2) check_same(x.traces[t], y.traces[t]);
          }
          if (sets * ways >= 256) {
            repeats += fast.repeats(), accesses += x.total.accesses;
            CHECK(fast.repeats() > 0);  // under each policy, write policy and shadow
          }
          ++runs;
        }
  CHECK(runs == 3 * 4 * 3 * 3);
  // Where the tiles fit, a third of the accesses or more were counted as repeats (a
  // tile's first timestep misses; its second one's sets are marked, as the first
  // missed; repeats start with the third): the test exercises them.
  CHECK(3 * repeats > accesses);
}

TEST_CASE("cache: a set that differs elsewhere in its timestep repeats its hits, as plain simulation does") {
  // A weight tile read at every timestep, and beside it lines that move at each one
  // (an output row), written or read, in the tile's own sets: those sets differ from
  // the previous timestep's, and the tile's hits in them are taken with the repeats
  // (with the three Cs, on the engine's stamps), their sets' ages moved as a lookup's
  // hit moves them. Now and then the tile changes, a line of it is dropped or flipped
  // to a write, or a moving line lands on a tile line: the hits there stop being
  // repeats. count() against the generic engine's run(), cut anywhere.
  std::mt19937_64 rng(61);
  int runs = 0;
  std::uint64_t in_differing = 0, repeats = 0;
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (std::uint64_t ways : {8u, 16u})
      for (std::uint64_t sets : {32u, 64u})
        for (int write_mode = 0; write_mode < 3; ++write_mode) {
          CacheConfig c = shape(sets * ways * 64, ways, 64, p);
          c.write_back = write_mode != 1, c.write_allocate = write_mode != 2, c.three_cs = rng() % 4 != 0;
          std::vector<LineAccess> in;
          std::vector<std::size_t> ends;
          std::vector<LineAccess> tile;
          std::int64_t hold = 1;  // timesteps a moving line stays (two: a set that missed repeats)
          for (std::int64_t t = 0; t < 400; ++t) {
            if (t % 80 == 0) {  // a new tile: consecutive lines, some written
              tile.clear(), hold = 1 + std::int64_t(rng() % 2);
              const std::uint64_t base = rng() % (8 * sets * ways), n = 64 + rng() % 48;
              for (std::uint64_t k = 0; k < n; ++k) tile.push_back({0, base + k, kNoTrace, 0, rng() % 6 == 0});
            }
            std::vector<LineAccess> step = tile;
            // One to three moving lines, each at a place of the tile, in the set of a
            // line of the tile (now and then that line itself).
            for (std::uint64_t k = 0, m = 1 + rng() % 3; k < m; ++k) {
              const LineAccess& near = tile[rng() % tile.size()];
              const std::uint64_t line =
                  rng() % 16 == 0 ? near.line : (1u << 20) + std::uint64_t(t / hold) * 8 * sets + near.line % sets + k * sets;
              step.insert(step.begin() + std::ptrdiff_t(rng() % (step.size() + 1)),
                          LineAccess{0, line, kNoTrace, 1, rng() % 2 == 0});
            }
            switch (rng() % 16) {
              case 0: step.erase(step.begin() + std::ptrdiff_t(rng() % step.size())); break;
              case 1: step[rng() % step.size()].write ^= true; break;
              default: break;
            }
            for (LineAccess& a : step) a.timestep = t, in.push_back(a);
            ends.push_back(in.size());
          }
          CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
          std::vector<CacheAccess> out;
          cut_batches(in.size(), ends, 700, rng,
                      [&](std::size_t at, std::size_t to) { fast.count(std::span(in).subspan(at, to - at)); });
          generic.run(in, out);
          fast.finish(), generic.finish();
          CAPTURE(policy_name(p));
          CAPTURE(ways);
          CAPTURE(sets);
          CAPTURE(write_mode);
          CAPTURE(c.three_cs);
          const CacheReport x = fast.report(), y = generic.report();
          check_same(x.total, y.total);
          for (std::size_t t = 0; t < 2; ++t) {
            CAPTURE(t);
            check_same(x.tensors[t], y.tensors[t]);
          }
          in_differing += fast.differing_set_repeats(), repeats += fast.repeats();
          ++runs;
        }
  CHECK(runs == 3 * 2 * 2 * 3);
  // The path is exercised: a good part of the repeats were in sets that differed.
  CHECK(in_differing > 0);
  CHECK(10 * in_differing > repeats);
}

TEST_CASE("cache: sets that miss and come back as they were repeat their misses as plain simulation does") {
  // A tile's rows folded into 16 of 64 sets, `per_set` lines a set read in turn at every
  // timestep (a set of W ways thrashes: under LRU and FIFO each fill evicts the line the
  // next one brings back, and with 2W or 4W lines the set ends each timestep as it
  // began it); beside them, lines that change every timestep in sets of their own and
  // some in the tile's; a fifth of the tile's lines written (dirty victims), some lines
  // read as two tensors. count(), batches cut anywhere, against the generic engine:
  // every count per tensor and trace, under each policy and write policy, with and
  // without the three Cs; per_set = 2W + 1 (the ways' lines rotate: the blocks are not
  // the same way for way, so nothing repeats) as the check that a set is compared.
  std::mt19937_64 rng(61);
  std::uint64_t thrash_repeats = 0, thrash_accesses = 0;  // LRU and FIFO, per_set a multiple of W
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (std::uint64_t ways : {2u, 4u, 16u})
      for (int per_set_kind = 0; per_set_kind < 3; ++per_set_kind)
        for (int write_mode = 0; write_mode < 3; ++write_mode)
          for (const bool three_cs : {true, false}) {
            const std::uint64_t sets = 64;
            const std::uint64_t per_set = per_set_kind == 0 ? 2 * ways : per_set_kind == 1 ? 4 * ways : 2 * ways + 1;
            CacheConfig c = shape(sets * ways * 64, ways, 64, p);
            c.write_back = write_mode != 1, c.write_allocate = write_mode != 2, c.three_cs = three_cs;
            std::vector<LineAccess> in;
            std::vector<std::size_t> ends;
            std::vector<LineAccess> tile;
            for (std::int64_t t = 0; t < 120; ++t) {
              if (t % 40 == 0) {  // a new tile: rows at a stride of the sets, in sets 0..15 (or 8..23)
                tile.clear();
                const std::uint64_t base = 4096 * std::uint64_t(1 + t / 40) + (t / 40 % 2) * 8;
                for (std::uint64_t m = 0; m < per_set; ++m)
                  for (std::uint64_t set = 0; set < 16; ++set) {
                    const std::uint32_t tensor = rng() % 16 == 0 ? 1 : 0;
                    tile.push_back({0, base + set + m * sets, tensor == 0 ? 0 : kNoTrace, tensor, rng() % 5 == 0});
                  }
              }
              std::vector<LineAccess> step;
              for (std::size_t k = 0; k < tile.size(); ++k) {
                step.push_back(tile[k]);
                if (k % 97 == 5)  // in sets 32..63
                  step.push_back({0, 64 * (100000 + std::uint64_t(t) * 8 + k % 8) + 32 + k % 32, kNoTrace, 2, k % 2 == 0});
              }
              for (int rep = 0; rep < 6; ++rep)  // lines that stay, read six times (the hit rate that keeps the shadow on the stamps)
                for (std::uint64_t m = 0; m < ways / 2; ++m)
                  for (std::uint64_t set = 32; set < 64; ++set) step.push_back({0, 500000 * sets + set + m * sets, kNoTrace, 2, false});
              if (t % 9 == 4) step.push_back({0, 4096 + 3 + sets * 7 * std::uint64_t(t), kNoTrace, 2, false});  // in one of the tile's sets
              for (LineAccess& a : step) a.timestep = t, in.push_back(a);
              ends.push_back(in.size());
            }
            CacheModel fast(c, 3, 1), generic(c, 3, 1, CacheEngine::generic);
            // Batches of four timesteps; under write-back with allocation, cut anywhere too.
            const auto count = [&](std::size_t at, std::size_t to) { fast.count(std::span(in).subspan(at, to - at)); };
            if (write_mode == 0)
              cut_batches(in.size(), ends, 3000, rng, count);
            else
              for (std::size_t e = 3, at = 0; at < in.size(); at = ends[std::min(ends.size() - 1, e)], e += 4)
                count(at, ends[std::min(ends.size() - 1, e)]);
            std::vector<CacheAccess> out;
            generic.run(in, out);
            fast.finish(), generic.finish();
            CAPTURE(policy_name(p));
            CAPTURE(ways);
            CAPTURE(per_set);
            CAPTURE(write_mode);
            CAPTURE(three_cs);
            const CacheReport x = fast.report(), y = generic.report();
            for (std::size_t t = 0; t < 3; ++t) {
              CAPTURE(t);
              check_same(x.tensors[t], y.tensors[t]);
            }
            check_same(x.traces[0], y.traces[0]);
            check_same(x.total, y.total);
            CHECK(y.tensors[0].hits < y.tensors[0].accesses / 2);  // (the tile thrashes)
            // Repeats beyond the hits are misses repeated (LRU and FIFO, whose sets come
            // back as they were; write-through, so the batches are whole timesteps). With
            // the three Cs and 4W lines a set, the hit rate (60%) takes the shadow off the
            // stamps, and the repeats with it.
            if (p != CachePolicy::plru && per_set_kind != 2 && write_mode == 1 && !(three_cs && per_set_kind == 1)) {
              CHECK(fast.repeats() > x.total.hits);
              thrash_repeats += fast.repeats(), thrash_accesses += x.total.accesses;
            }
          }
  // Where the sets come back as they were, most accesses were counted as repeats.
  CHECK(4 * thrash_repeats > 3 * thrash_accesses);
}

TEST_CASE("cache: the three Cs' shadow pins the lines a timestep repeats, and counts as plain simulation does") {
  // A tile folded into 8 of 64 sets (3W lines a set: they thrash, so the shadow is off
  // the engine's stamps) read at every timestep: a fully associative LRU of N lines
  // holds them, and pins them. Beside them, lines of a pool of 2N drawn at random (cold
  // misses, capacity misses and hits of the shadow, whose other lines are now fewer),
  // some written, in other sets. Now and then a tile's access is dropped or two are swapped (a pinned
  // place that misses its line: the pins are released), the tile's last third is cut
  // (a timestep that ends before pinned places), or 5N/4 lines of the pool come at once
  // (more than the bound allows: a plain LRU of N loses the tile's lines); every 50
  // timesteps a new tile. count(), batches
  // cut anywhere, against the generic engine: every count, each policy and write policy.
  std::mt19937_64 rng(71);
  std::uint64_t pinned = 0, capacity = 0, accesses = 0;
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (std::uint64_t ways : {2u, 4u, 8u, 16u})
      for (int write_mode = 0; write_mode < 3; ++write_mode) {
        const std::uint64_t sets = 64, lines = sets * ways;
        const CacheConfig c = with_three_cs(shape(lines * 64, ways, 64, p), write_mode);
        std::vector<LineAccess> in, tile;
        std::vector<std::size_t> ends;
        // 2N lines in sets 32..63 (in the tile's sets, they would make it differ from
        // timestep to timestep: nothing would repeat).
        const auto pool = [&] { return sets * (100000 + rng() % (lines / 16)) + 32 + rng() % 32; };
        for (std::int64_t t = 0; t < 400; ++t) {
          if (t % 50 == 0) {
            tile.clear();
            const std::uint64_t base = 8192 * std::uint64_t(1 + t / 50);
            for (std::uint64_t m = 0; m < 3 * ways; ++m)
              for (std::uint64_t set = 0; set < 8; ++set)
                tile.push_back({0, base + set * 4 + m * sets, kNoTrace, 0, rng() % 5 == 0});
          }
          std::vector<LineAccess> step = tile;
          switch (rng() % 40) {
            case 0: step.erase(step.begin() + std::ptrdiff_t(rng() % step.size())); break;
            case 1: std::swap(step[rng() % step.size()], step[rng() % step.size()]); break;
            case 2: step.resize(2 * step.size() / 3); break;
            case 3:
              for (std::uint64_t k = 0; k < lines + lines / 4; ++k) step.push_back({0, pool(), kNoTrace, 1, false});
              break;
            default: break;
          }
          // Two lines of the pool before the tile and a few after it (places are compared
          // one for one: what comes before the tile must not move it).
          for (int k = 0; k < 2; ++k) step.insert(step.begin(), {0, pool(), kNoTrace, 1, rng() % 4 == 0});
          for (std::uint64_t k = 0, extra = 1 + rng() % (lines / 8); k < extra; ++k)
            step.push_back({0, pool(), kNoTrace, 1, rng() % 4 == 0});
          for (LineAccess& a : step) a.timestep = t, in.push_back(a);
          ends.push_back(in.size());
        }
        CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
        cut_batches(in.size(), ends, 5000, rng, [&](std::size_t at, std::size_t to) { fast.count(std::span(in).subspan(at, to - at)); });
        std::vector<CacheAccess> out;
        generic.run(in, out);
        fast.finish(), generic.finish();
        CAPTURE(policy_name(p));
        CAPTURE(ways);
        CAPTURE(write_mode);
        const CacheReport x = fast.report(), y = generic.report();
        check_reports(x, y);
        // (Where the tile's sets seldom come back as they were, the replays, and the pins
        // with them, are turned off for a while: fewer pins at 2 and 4 ways, or where
        // writes do not allocate.)
        if (ways >= 8 && write_mode != 2) CHECK(fast.pinned_hits() > 0);
        accesses += x.total.accesses;
        pinned += fast.pinned_hits(), capacity += y.total.capacity;
      }
  MESSAGE("pinned hits: " << pinned << " of " << accesses << " accesses; capacity misses: " << capacity);
  CHECK(10 * pinned > accesses);
  CHECK(capacity > 0);
}

TEST_CASE("cache: with the replays off, the shadow stays pinned where no set repeats, and counts as plain simulation does") {
  // Mixtral 8x22B's feed-forward tiles: 3W lines in each of 8 sets (or 1.5W in 16) read
  // at every timestep (they thrash), then an output row of 4 lines that alternates between two
  // halves of those sets and moves on every timestep: every tile set differs from the previous
  // timestep, nothing repeats, and the replays turn off; the tile's lines are still the
  // previous timestep's at their places, so the shadow pins them (pins_loop). Now and
  // then a place drops its line or the timestep is cut (the pins are released and taken
  // again), and every 60 timesteps a new tile. Batches cut anywhere, against the generic
  // engine: every count, with writes allocated or not.
  std::mt19937_64 rng(83);
  for (std::uint64_t ways : {8u, 16u})
    for (int write_mode = 0; write_mode < 3; ++write_mode) {
      const std::uint64_t sets = 64, lines = sets * ways;
      const CacheConfig c = with_three_cs(shape(lines * 64, ways, 64, CachePolicy::lru), write_mode);
      std::vector<LineAccess> in, tile;
      std::vector<std::size_t> ends;
      for (std::int64_t t = 0; t < 2000; ++t) {
        if (t % 60 == 0) {
          tile.clear();
          // Rows of 8 lines `sets` apart (8 sets, each a line a row), or every other tile
          // sets / 2 apart (16 sets, a line every other row); every third tile written
          // (its own lines dirty as they go, or written through, or not allocated).
          const std::uint64_t base = 8192 * std::uint64_t(1 + t / 60), stride = t / 60 % 2 ? sets / 2 : sets;
          const bool write = t / 60 % 3 == 2;
          for (std::uint64_t m = 0; m < 3 * ways; ++m)
            for (std::uint64_t set = 0; set < 8; ++set) tile.push_back({0, base + set + m * stride, kNoTrace, 0, write});
        }
        std::vector<LineAccess> step = tile;
        switch (rng() % 50) {
          case 0: step.erase(step.begin() + std::ptrdiff_t(rng() % step.size())); break;
          case 1: step.resize(step.size() / 2); break;
          default: break;
        }
        for (std::uint64_t k = 0; k < 4; ++k)
          step.push_back({0, 1000000 + std::uint64_t(t) * sets + std::uint64_t(t % 2) * 4 + k, kNoTrace, 1, true});
        // Now and then a line of the tile read again last: a hit where its set still holds
        // it, and the next timestep's tile finds it in its set, the newest (where it is
        // among a set's first W lines of the tile, that streak is simulated).
        if (rng() % 8 == 0) step.push_back(tile[rng() % tile.size()]);
        for (LineAccess& a : step) a.timestep = t, in.push_back(a);
        ends.push_back(in.size());
      }
      CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
      cut_batches(in.size(), ends, 2000, rng, [&](std::size_t at, std::size_t to) { fast.count(std::span(in).subspan(at, to - at)); });
      std::vector<CacheAccess> out;
      generic.run(in, out);
      fast.finish(), generic.finish();
      CAPTURE(ways);
      CAPTURE(write_mode);
      const CacheReport x = fast.report(), y = generic.report();
      check_reports(x, y);
      CHECK(y.total.hits < y.total.accesses / 10);  // (the tile thrashes)
      CHECK(fast.repeats() < x.total.accesses / 10);  // (no set repeats)
      // Pinned most of the time, not only in the replays' batches (one in 64); where
      // writes are not allocated, a written tile's lines never come in, so less.
      MESSAGE("pinned " << fast.pinned_hits() << " of " << x.total.accesses);
      CHECK((write_mode == 2 ? 8 : 2) * fast.pinned_hits() > x.total.accesses);
      // Most of them a streak at a time (rows of 8 lines: every set of the tile once a
      // row, or every other row).
      MESSAGE("in streaks " << fast.pinned_streak_lines());
      CHECK(2 * fast.pinned_streak_lines() > fast.pinned_hits());
    }
}

TEST_CASE("cache: the pins are released by whatever else reads or moves the shadow, and the state is plain simulation's") {
  // In phases of 40, 60 and 80 timesteps: the pins test's tile (3W lines in each of 8
  // sets, read at every timestep: the engine misses, the shadow is on its own and pins
  // them) beside lines of a pool drawn at random; a tile that fits its sets (W/2 lines in
  // each of 24, read twice: the engine hits, pinned at first, until the shadow moves onto
  // the engine's stamps, which releases the pins, and back in the next phase); the first
  // tile again, beside a streak in other sets at every timestep (rows of 32 lines: N/8 to
  // N/4 lines, too few to be counted at once; one in 20 more than N, held back and
  // settled, which releases the pins). Batches cut anywhere; at random a batch goes
  // through run() (each outcome against the generic engine's; it releases them), and the
  // state is read (snapshot(), which releases them too): each set's lines, newest first,
  // and the shadow's, least recent first, against a plain simulation written here (a
  // list per set, a list of the N most recent lines). Keeping the pins on any of these
  // four ways fails it.
  std::mt19937_64 rng(113);
  std::uint64_t snapshots_pinned = 0, runs_pinned = 0, streak_pinned = 0;
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo})
    for (std::uint64_t ways : {8u, 16u})
      for (int write_mode = 0; write_mode < 3; ++write_mode) {
        const std::uint64_t sets = 64, lines = sets * ways;
        const CacheConfig c = with_three_cs(shape(lines * 64, ways, 64, p), write_mode);
        std::vector<LineAccess> in, tile;
        std::vector<std::size_t> ends;
        std::vector<char> streak_step;  // per timestep: a streak came after the tile
        const auto pool = [&] { return sets * (100000 + rng() % (lines / 16)) + 32 + rng() % 32; };
        std::uint64_t fresh = sets << 24;  // the streaks' lines, never seen before
        for (std::int64_t t = 0; t < 360; ++t) {
          if (t % 50 == 0) {
            tile.clear();
            const std::uint64_t base = 8192 * std::uint64_t(1 + t / 50);
            for (std::uint64_t m = 0; m < 3 * ways; ++m)
              for (std::uint64_t set = 0; set < 8; ++set)
                tile.push_back({0, base + set + m * sets, kNoTrace, 0, false});
          }
          const int phase = t % 180 < 40 ? 0 : t % 180 < 100 ? 1 : 2;
          std::vector<LineAccess> step;
          for (int k = 0; k < 2; ++k) step.push_back({0, pool(), kNoTrace, 1, rng() % 4 == 0});
          if (phase == 1) {
            for (int pass = 0; pass < 2; ++pass)
              for (std::uint64_t m = 0; m < ways / 2; ++m)
                for (std::uint64_t set = 1; set < 32; ++set)
                  if (set % 4 != 0) step.push_back({0, set + sets * (50000 + m), kNoTrace, 0, m == 0 && set % 3 == 0});
          } else {
            step.insert(step.end(), tile.begin(), tile.end());
            if (rng() % 30 == 0) std::swap(step[2 + rng() % tile.size()], step[2 + rng() % tile.size()]);
          }
          bool streak = false;
          if (phase == 2) {
            streak = true;
            const std::uint64_t n = rng() % 20 == 0 ? lines + 2 * sets + rng() % lines : lines / 8 + rng() % (lines / 8);
            // Rows of 32 lines in sets 32..63 (in the tile's sets, they would make it differ).
            for (std::uint64_t k = 0; k < n; ++k) step.push_back({0, fresh + k / 32 * sets + 32 + k % 32, kNoTrace, 1, false});
            fresh += (n / 32 + 1) * sets;
          }
          for (std::uint64_t k = 0, extra = 1 + rng() % (lines / (phase == 2 ? 32 : 8)); k < extra; ++k)
            step.push_back({0, pool(), kNoTrace, 1, rng() % 4 == 0});
          for (LineAccess& a : step) a.timestep = t, in.push_back(a);
          ends.push_back(in.size());
          streak_step.push_back(streak);
        }
        // The plain simulation, a batch behind the models.
        std::vector<std::list<std::uint64_t>> ways_of(sets);  // newest first
        std::list<std::uint64_t> recent;                      // the shadow, newest first
        std::size_t simulated = 0;
        const auto simulate_to = [&](std::size_t to) {
          for (; simulated < to; ++simulated) {
            const LineAccess& x = in[simulated];
            const bool allocate = !x.write || c.write_allocate;
            std::list<std::uint64_t>& s = ways_of[x.line % sets];
            const auto it = std::find(s.begin(), s.end(), x.line);
            if (it != s.end()) {
              if (p == CachePolicy::lru) s.splice(s.begin(), s, it);
            } else if (allocate) {
              s.push_front(x.line);
              if (s.size() > ways) s.pop_back();
            }
            const auto r = std::find(recent.begin(), recent.end(), x.line);
            const bool held = r != recent.end();
            if (held) recent.erase(r);
            if (held || allocate) recent.push_front(x.line);
            if (recent.size() > lines) recent.pop_back();
          }
        };
        CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
        const LineOwners owners;
        CacheSnapshot snap;
        std::uint64_t pinned_before = 0;
        cut_batches(in.size(), ends, 3000, rng, [&](std::size_t at, std::size_t to) {
          const auto batch = std::span(in).subspan(at, to - at);
          // Pinned hits in the batch before: the shadow most likely holds pins now.
          const bool pinned = fast.pinned_hits() > pinned_before;
          pinned_before = fast.pinned_hits();
          if (rng() % 8 == 0) {
            runs_pinned += pinned;
            run_both(fast, generic, batch);
          } else {
            const std::size_t step = std::size_t(batch.front().timestep);
            streak_pinned += pinned && streak_step[step];
            fast.count(batch), generic.count(batch);
          }
          if (rng() % 5 == 0) {
            snapshots_pinned += fast.pinned_hits() > pinned_before;
            fast.snapshot(owners, snap);
            simulate_to(to);
            std::vector<std::uint64_t> expect_lines;
            for (const std::list<std::uint64_t>& s : ways_of) {
              expect_lines.insert(expect_lines.end(), s.begin(), s.end());
              expect_lines.resize(expect_lines.size() + ways - s.size(), ~std::uint64_t(0));
            }
            CAPTURE(to);
            CHECK(snap.lines == expect_lines);
            CHECK(snap.shadow == std::vector<std::uint64_t>(recent.rbegin(), recent.rend()));
          }
        });
        fast.finish(), generic.finish();
        CAPTURE(policy_name(p));
        CAPTURE(ways);
        CAPTURE(write_mode);
        const CacheReport x = fast.report(), y = generic.report();
        check_reports(x, y);
      }
  // Each way out was taken with pins held (pinned hits in the batch just before).
  MESSAGE("with pins held: " << snapshots_pinned << " snapshots, " << runs_pinned << " runs, " << streak_pinned
                             << " batches with a streak");
  CHECK(snapshots_pinned > 5);
  CHECK(runs_pinned > 5);
  CHECK(streak_pinned > 0);
}

TEST_CASE("cache: a timestep longer than the records may grow is simulated unrecorded, and repeats resume after it") {
  // A tile of 300 lines read at every timestep, and at three timesteps 70,000 more lines
  // (more than 2^16 and 4N: the fill of a whole tile at one timestep, as --source
  // transfers gives it), cut into batches anywhere: every count the generic engine's,
  // with and without the three Cs, and the tile's timesteps after the long ones repeat.
  std::mt19937_64 rng(17);
  for (const bool three_cs : {false, true}) {
    CacheConfig c = shape(64 * 8 * 64, 8, 64);
    c.three_cs = three_cs;
    std::vector<LineAccess> in;
    std::vector<std::size_t> ends;
    std::size_t after_long = 0;  // where the last long timestep ends
    for (std::int64_t t = 0; t < 160; ++t) {
      for (std::uint64_t k = 0; k < 300; ++k) in.push_back({t, 5000 + k * 3, kNoTrace, 0, k % 7 == 0});
      if (t == 40 || t == 41 || t == 100) {
        for (std::uint64_t k = 0; k < 70000; ++k) in.push_back({t, 100000 + rng() % 200000, kNoTrace, 1, rng() % 3 == 0});
        after_long = in.size();
      }
      ends.push_back(in.size());
    }
    CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
    std::uint64_t repeats_before = 0;
    cut_batches(in.size(), ends, 9000, rng, [&](std::size_t at, std::size_t to) {
      if (at < after_long && to >= after_long) repeats_before = fast.repeats();
      fast.count(std::span(in).subspan(at, to - at));
    });
    std::vector<CacheAccess> out;
    generic.run(in, out);
    fast.finish(), generic.finish();
    CAPTURE(three_cs);
    check_reports(fast.report(), generic.report());
    CHECK(fast.repeats() - repeats_before > 300 * 40);
  }
}

TEST_CASE("cache: repeats are looked for again after a stretch that repeated nothing") {
  // 120 timesteps of 64 random lines, a batch each (nothing repeats: the records are
  // turned off for 63 batches), then a tile of 96 lines re-read for 200 timesteps: the
  // repeats come back, and every count is the generic engine's.
  std::mt19937_64 rng(5);
  CacheConfig c = shape(64 * 16 * 64, 16, 64);
  std::vector<LineAccess> in;
  std::vector<std::size_t> ends;
  for (std::int64_t t = 0; t < 120; ++t) {
    for (int k = 0; k < 64; ++k) in.push_back({t, rng() % 100000, kNoTrace, 0, rng() % 4 == 0});
    ends.push_back(in.size());
  }
  const std::size_t random_part = in.size();
  for (std::int64_t t = 120; t < 320; ++t) {
    for (std::uint64_t k = 0; k < 96; ++k) in.push_back({t, 200000 + k * 3, kNoTrace, 1, k % 5 == 0});
    ends.push_back(in.size());
  }
  CacheModel fast(c, 2, 0), generic(c, 2, 0, CacheEngine::generic);
  std::uint64_t repeats_in_random = 0;
  for (std::size_t e = 0, at = 0; e < ends.size(); at = ends[e++]) {
    fast.count(std::span(in).subspan(at, ends[e] - at));
    if (ends[e] == random_part) repeats_in_random = fast.repeats();
  }
  std::vector<CacheAccess> out;
  generic.run(in, out);
  fast.finish(), generic.finish();
  const CacheReport x = fast.report(), y = generic.report();
  for (std::size_t t = 0; t < 2; ++t) {
    CAPTURE(t);
    check_same(x.tensors[t], y.tensors[t]);
  }
  CHECK(repeats_in_random == 0);
  // Back on within 64 batches of the tile: most of its 200 timesteps repeat.
  CHECK(fast.repeats() - repeats_in_random > 96 * 100);
}

TEST_CASE("cache: the three Cs' shadow is a fully associative LRU cache, over long streams") {
  // The shadow of the block engines lives on their ways' stamps (StampShadow):
  // against a plain list, over streams that keep its tail still while time runs on (a
  // loop over half the lines: the times are renumbered many times), that move it every
  // access (a scan), that evict from sets what the shadow still holds (conflicts: its
  // lines aside), writes that do not allocate, and misses right after times were
  // renumbered; and, where the engine mostly misses (the shadow of its own, LruShadow),
  // runs of consecutive lines, scans with gaps, and lines beside recent ones (of the
  // same 8, some evicted) touched again; 60,000 accesses each.
  std::mt19937_64 rng(41);
  int runs = 0;
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (std::uint64_t ways : {1u, 4u, 16u})
      for (std::uint64_t sets : {1u, 8u, 64u})
        for (int pattern = 0; pattern < 8; ++pattern) {
          CacheConfig c = shape(sets * ways, ways, 1, p);
          c.write_allocate = pattern != 3;
          const std::uint64_t n = sets * ways;
          std::vector<LineAccess> in;
          std::uint64_t run_at = 0;
          for (int i = 0; i < 60000; ++i) {
            std::uint64_t line;
            switch (pattern) {
              case 0: line = rng() % (n / 2 + 1); break;                              // a loop within the cache
              case 1: line = std::uint64_t(i) % (2 * n + 3); break;                    // a scan past it
              case 2: line = (rng() % (n + 1)) * sets + (rng() % 2) * 7; break;        // few sets, many lines
              case 3: line = i % 5 == 0 ? rng() % (4 * n) : rng() % (n / 2 + 1); break;  // and writes
              case 4:  // a loop long enough that the times are renumbered, then misses
                line = std::uint64_t(i) % (20 * n + 7) < 18 * n ? rng() % (n / 2 + 1) : rng() % (3 * n);
                break;
              case 5:  // runs of consecutive lines from random starts (12 long on average)
                if (i == 0 || rng() % 12 == 0) run_at = rng() % (3 * n + 40);
                line = run_at++;
                break;
              case 6: {  // interleaved scans with gaps (3 lines of 5, 1 of 2): groups partly resident
                const std::uint64_t k = std::uint64_t(i) / 2;
                line = i % 2 == 0 ? (k / 3 * 5 + k % 3) % (3 * n + 5) : 100000 + (2 * k) % (2 * n + 9);
                break;
              }
              default:  // a scan past the cache, and lines beside recent ones (of their 8) again, some evicted
                if (i > 0 && rng() % 4 == 0) {
                  const std::uint64_t back = 1 + rng() % std::min<std::uint64_t>(std::uint64_t(i), 2 * n + 2);
                  line = in[std::size_t(std::uint64_t(i) - back)].line ^ (rng() % 8);
                } else {
                  line = std::uint64_t(i) % (2 * n + 3);
                }
            }
            in.push_back({i, line, kNoTrace, std::uint32_t(line % 3), pattern == 3 && rng() % 3 == 0});
          }
          // The shadow by its definition: a list, most recent first, of at most n lines.
          std::list<std::uint64_t> order;
          std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
          std::set<std::uint64_t> seen;
          std::uint64_t capacity = 0;
          for (const LineAccess& a : in) {
            const bool cold = seen.insert(a.line).second, allocate = !a.write || c.write_allocate;
            const auto it = where.find(a.line);
            if (it != where.end()) {
              order.erase(it->second);
            } else {
              capacity += !cold;
              if (!allocate) continue;
              if (order.size() == n) where.erase(order.back()), order.pop_back();
            }
            order.push_front(a.line), where[a.line] = order.begin();
          }
          CacheModel m(c, 3, 0);
          for (std::size_t at = 0; at < in.size(); at += 1000) m.count(std::span(in).subspan(at, 1000));
          m.finish();
          CAPTURE(policy_name(p));
          CAPTURE(ways);
          CAPTURE(sets);
          CAPTURE(pattern);
          CHECK(m.report().total.cold == seen.size());
          CHECK(m.report().total.capacity == capacity);
          ++runs;
        }
  CHECK(runs == 3 * 3 * 3 * 8);
}

TEST_CASE("cache: PLRU over 8 ways by hand, the lowest empty way first") {
  // One set of 8 ways; nodes 0 (ways 0-7), 1 (0-3), 2 (4-7), 3 (0-1), 4 (2-3), 5 (4-5),
  // 6 (6-7); a hit or fill points each node on its way's path away from it. Lines 0..7
  // fill ways 0..7, the lowest empty way first (after ways 0 and 1 the root points
  // right, yet line 2 takes way 2); way 7's fill leaves every node pointing left: line 8 evicts way 0
  // (line 0) and points 0, 1, 3 right; line 9 follows 0 right, 2 left, 5 left: way 4
  // (line 4), pointing 0 left, 2 and 5 right. Line 3 hits and points 0 right, 1 and 4
  // left; line 10 follows 0 right, 2 right, 6 left: way 6 (line 6), where LRU would
  // evict line 2.
  CacheModel m(shape(8, 8, 1, CachePolicy::plru), 1, 0);
  std::vector<CacheAccess> out;
  m.run(lines_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 10}), out);
  REQUIRE(out.size() == 12);
  for (std::size_t i = 0; i < 8; ++i) CHECK((!out[i].is(CacheAccess::hit) && !out[i].is(CacheAccess::evicted)));
  CHECK((out[8].is(CacheAccess::evicted) && out[8].victim == 0));
  CHECK((out[9].is(CacheAccess::evicted) && out[9].victim == 4));
  CHECK(out[10].is(CacheAccess::hit));
  CHECK((out[11].is(CacheAccess::evicted) && out[11].victim == 6));
  CacheModel g(shape(8, 8, 1, CachePolicy::plru), 1, 0, CacheEngine::generic);
  std::vector<CacheAccess> same;
  g.run(lines_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 10}), same);
  CHECK(same[11].victim == 6);
}

TEST_CASE("cache lines: the trace as runs gives the lines the elements give") {
  // trace_runs_pipeline hands on a record per run of elements; cache_lines(B, map,
  // true) must make of it exactly the line accesses of the element trace.
  const Schedule s = th::compile_text(th::kConv1d);
  for (std::uint64_t line : {1u, 2u, 64u}) {
    const AddressMap map = default_address_map(s, StreamContext{&s, {}, {}}, 64);
    auto elements = trace_pipeline(s, {}) | cache_lines(line, map);
    auto runs = trace_runs_pipeline(s, {}) | cache_lines(line, map, true);
    std::vector<std::tuple<std::int64_t, std::uint64_t, std::uint32_t, bool>> a, b;
    for (auto batch = elements.next_batch(); !batch.empty(); batch = elements.next_batch())
      for (const LineAccess& x : batch) a.emplace_back(x.timestep, x.line, x.trace, x.write);
    for (auto batch = runs.next_batch(); !batch.empty(); batch = runs.next_batch())
      for (const LineAccess& x : batch) b.emplace_back(x.timestep, x.line, x.trace, x.write);
    CHECK(a.size() > 0);
    CHECK(a == b);
  }
}

TEST_CASE("cache lines: one pipeline sought forward window by window gives each window's lines") {
  // warp_trace keeps one pipeline and seeks it to each window it simulates: each window
  // must give what a pipeline made for it alone gives, with or without windows skipped.
  const Schedule s = th::compile_text(th::kConv1d);
  const AddressMap map = default_address_map(s, StreamContext{&s, {}, {}}, 64);
  const std::int64_t n = s.n_timesteps;
  REQUIRE(n >= 6);
  using Line = std::tuple<std::int64_t, std::uint64_t, std::uint32_t, bool>;
  const auto drain = [](auto& p, std::int64_t until, std::vector<Line>& to) {
    for (auto batch = p.next_batch(until); !batch.empty(); batch = p.next_batch(until))
      for (const LineAccess& x : batch) to.emplace_back(x.timestep, x.line, x.trace, x.write);
  };
  // Windows [a, b) in time order, some back to back, some with time skipped between.
  const std::vector<std::pair<std::int64_t, std::int64_t>> windows = {
      {0, 1}, {1, 3}, {4, 5}, {5, 5}, {n / 2, n / 2 + 2}, {n - 2, n}};
  auto sought = trace_runs_pipeline(s, {}) | cache_lines(8, map, true);
  std::size_t lines = 0;
  for (const auto& [a, b] : windows) {
    CAPTURE(a);
    CAPTURE(b);
    TraceOptions o;
    o.from = a, o.to = b;
    auto alone = trace_runs_pipeline(s, o) | cache_lines(8, map, true);
    std::vector<Line> want, got;
    drain(alone, kEndOfTime, want);
    sought.seek(a);
    drain(sought, b, got);
    CHECK(got == want);
    for (const Line& l : got) CHECK((std::get<0>(l) >= a && std::get<0>(l) < b));
    lines += got.size();
  }
  CHECK(lines > 10);
}

namespace {

// Z[m, n] += A[m, k] * W[k, n] with 4-byte values: W stays while m streams, the shape
// of a projection. m's 42 rows in tiles of 4 leave the last tile partial.
const std::string kWarpWorkload = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 42, k: 0 <= k < 4, n: 0 <= n < 8}
  bits_per_value: {All: 32}
  einsums:
  - name: Z
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: W, projection: [k, n]}
    - {name: Z, projection: [m, n], output: True}
  - name: Y
    tensor_accesses:
    - {name: Z, projection: [m, n]}
    - {name: Y, projection: [m, n], output: True}
)";
const std::string kWarpMapping = R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, W, Z, Y]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 4}
      - !Temporal {rank_variable: n, tile_shape: 4}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: Z, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Compute {einsum: Y, component: MAC}
)";

}  // namespace

TEST_CASE("cache lines: a group that repeats the previous one's records, its lines at its own timestep") {
  // TimestepLines remembers each trace's last group: W's tile, read again while m
  // streams, is copied, not made again; A's and Z's rows move on (and are not
  // remembered for a while). One pipeline over the whole trace must give, timestep by
  // timestep, what a pipeline made for that timestep alone (nothing remembered) gives.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpMapping);
  using Line = std::tuple<std::int64_t, std::uint64_t, std::uint32_t, std::uint32_t, bool>;
  const auto drain = [](auto&& p, std::vector<Line>& to) {
    for (auto batch = p.next_batch(); !batch.empty(); batch = p.next_batch())
      for (const LineAccess& x : batch) to.emplace_back(x.timestep, x.line, x.trace, x.tensor, x.write);
  };
  for (std::uint64_t line : {4u, 16u, 64u}) {
    CAPTURE(line);
    const AddressMap map = default_address_map(s, StreamContext{&s, {}, {}}, 64);
    std::vector<Line> whole, alone;
    drain(trace_runs_pipeline(s, {}) | cache_lines(line, map, true), whole);
    for (std::int64_t t = 0; t < s.n_timesteps; ++t) {
      TraceOptions o;
      o.from = t, o.to = t + 1;
      drain(trace_runs_pipeline(s, o) | cache_lines(line, map, true), alone);
    }
    CHECK(whole.size() > 100);
    CHECK(whole == alone);
  }
}

TEST_CASE("cache lines: the groups that repeat their trace's previous group are named, and only those") {
  // Each group (a trace's lines at a timestep) that CacheLines::repeated() names must be
  // one whole group whose lines are, one for one, its trace's previous group's, at the
  // timestep named; each such group whose previous one is in the same batch, of as many
  // lines, must be named (Z's row, copied from the memo while k goes round, and at
  // 64-byte lines A's row, met again at a new element), except for the 64 groups of a
  // trace after two such compares in a row that differed (a row that moves on is not
  // compared for a while). Small batches, by cutting at `until`, put previous groups
  // in the batch before too.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpMapping);
  for (std::uint64_t line : {4u, 16u, 64u})
    for (const std::int64_t step : {std::int64_t(1), std::int64_t(3), std::int64_t(1000)}) {
      CAPTURE(line);
      CAPTURE(step);
      const AddressMap map = default_address_map(s, StreamContext{&s, {}, {}}, 64);
      auto p = trace_runs_pipeline(s, {}) | cache_lines(line, map, true);
      struct Group {
        std::int64_t timestep = -1;
        std::vector<std::pair<std::uint64_t, bool>> lines;
      };
      std::map<std::uint32_t, Group> last;  // per trace, its previous group
      std::map<std::uint32_t, std::pair<unsigned, unsigned>> backoff;  // per trace: compares that differed in a row, groups left uncompared
      std::size_t named = 0, in_batch = 0, quiet = 0;
      for (std::int64_t until = step;; until += step) {
        const auto batch = p.next_batch(until);
        if (batch.empty() && until >= s.n_timesteps) break;
        const auto repeated = p.repeated();
        std::size_t r = 0;
        std::map<std::uint32_t, bool> seen_in_batch;
        for (std::size_t b = 0; b < batch.size();) {
          std::size_t e = b + 1;
          while (e < batch.size() && batch[e].trace == batch[b].trace && batch[e].timestep == batch[b].timestep &&
                 batch[e].write == batch[b].write)
            ++e;
          Group g{batch[b].timestep, {}};
          for (std::size_t i = b; i < e; ++i) g.lines.emplace_back(batch[i].line, batch[i].write);
          const std::uint32_t trace = batch[b].trace;
          const auto prev = last.find(trace);
          const bool repeats = prev != last.end() && prev->second.lines == g.lines;
          const bool is_named = r < repeated.size() && repeated[r].begin == b;
          if (is_named) {
            CHECK(repeated[r].end == e);
            CHECK(repeats);
            if (prev != last.end()) CHECK(repeated[r].previous == prev->second.timestep);
            ++r, ++named;
          }
          auto& [differed, left] = backoff[trace];
          if (left != 0) {
            --left, ++quiet;
          } else if (seen_in_batch[trace] && prev->second.lines.size() == g.lines.size()) {
            if (repeats) {
              CHECK(is_named);
              ++in_batch, differed = 0;
            } else if (++differed == 2) {
              left = 64, differed = 0;
            }
          }
          seen_in_batch[trace] = true;
          last[trace] = std::move(g);
          b = e;
        }
        CHECK(r == repeated.size());  // each names a group, in order
      }
      // One timestep a batch: only the memo's copies (Z's row) are named.
      CHECK(named >= in_batch);
      CHECK((step == 1 ? named : in_batch) > 10);
      if (step != 1 && line == 4) CHECK(quiet > 0);  // (W's rows and A's elements move on)
    }
}

TEST_CASE("warp block: a group that repeats one added since reset() is skipped, and the runs are the same") {
  // Two blocks fed the same batches, one told which groups repeat, reset together at
  // random batches: the same runs, keys and touched lines at each reset.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpMapping);
  CacheConfig c;
  c.size = 1024, c.ways = 4, c.line_bytes = 16;
  const CacheModel model(c, s.tensors.size(), s.traces.size());
  std::mt19937_64 rng(2053);
  const AddressMap map = default_address_map(s, StreamContext{&s, {}, {}}, 64);
  for (int round = 0; round < 8; ++round) {
    auto p = trace_runs_pipeline(s, {}) | cache_lines(c.line_bytes, map, true);
    std::vector<std::int64_t> delta(s.tensors.size());
    for (auto& d : delta) d = std::int64_t(rng() % 3);
    WarpBlock told, plain;
    const auto reset = [&] {
      const bool still = rng() % 2;
      told.reset(delta, std::size_t(1) << 20), plain.reset(delta, std::size_t(1) << 20);
      told.mark_still(still), plain.mark_still(still);
    };
    const auto same = [&] {
      const WarpBlock::Runs a = told.runs(), b = plain.runs();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i].first == b[i].first);
        CHECK(a[i].second.last == b[i].second.last);
        CHECK(a[i].second.key == b[i].second.key);
      }
      for (std::uint64_t l = 0; l < 4096; ++l) CHECK(told.touched(l) == plain.touched(l));
    };
    reset();
    std::size_t skipped = 0;
    for (std::int64_t until = 1;; until += 1 + std::int64_t(rng() % 4)) {
      const auto batch = p.next_batch(until);
      if (batch.empty() && until >= s.n_timesteps) break;
      told.add(batch, model, p.repeated()), plain.add(batch, model);
      skipped += p.repeated().size();
      if (rng() % 5 == 0) same(), reset();
    }
    same();
    CHECK(skipped > 0);
  }
}

TEST_CASE("cache: streaks (rows of lines at a stride) counted at once are the plain simulation's") {
  // A set-associative LRU cache holds back the lines of a streak once its rows are known
  // (on the shadow's stamps, past its N-th) and counts them at once (CacheModel::Impl::settle). Against the generic engine, which
  // simulates every access: streams of streaks of every length around N, 2N and 3N,
  // rows of 1, 2, 3 or 8 lines at strides that share factors with the sets, reads and
  // writes (dirty lines before the streak, written back as it evicts them), write-back
  // or -through, allocating writes or not, the three Cs or not, sets that are not a
  // power of two, two traces, cut into batches of random sizes (a streak goes on from
  // batch to batch), some streaks twice in a row, with snapshots taken between batches
  // and some batches run with each access's outcome (both settle a streak in the middle).
  std::mt19937_64 rng(1028);
  int streaks = 0;
  for (int round = 0; round < 300; ++round) {
    const std::uint64_t odd_sets[] = {3, 5, 6, 12};  // a line's set is then line % sets
    const std::uint64_t ways = std::uint64_t(1) << (rng() % 5);
    const std::uint64_t sets = round % 4 == 3 ? odd_sets[rng() % 4] : std::uint64_t(1) << (rng() % 5);
    CacheConfig c = shape(sets * ways, ways, 1);
    c.write_back = rng() % 3 != 0, c.write_allocate = rng() % 3 != 0, c.three_cs = rng() % 4 != 0;
    const std::uint64_t n = sets * ways;
    std::vector<LineAccess> in;
    while (in.size() < 6000) {
      if (rng() % 3 == 0) {  // a few scattered accesses, some of lines a streak will take
        for (int k = 0; k < 5; ++k)
          in.push_back({0, rng() % (8 * n + 40), kNoTrace, std::uint32_t(rng() % 3), rng() % 2 == 0});
        continue;
      }
      if (rng() % 4 == 0) {  // mostly hits (the shadow goes on the stamps), with lines of one
        // set in turn, more than its ways: the set evicts lines the shadow still holds
        const std::uint64_t base = rng() % (4 * n + 8);
        for (int k = 0; k < 1500; ++k)
          in.push_back({0, rng() % 5 == 0 ? base + (rng() % (ways + 2)) * sets : 7 * n + rng() % (n / 2 + 1),
                        kNoTrace, 0, false});
      }
      // Rows of `row` lines, `stride` apart (row 1: lines at a stride).
      const std::uint64_t rows[] = {1, 1, 1, 2, 3, 8};
      const std::uint64_t row = rows[rng() % 6];
      const std::uint64_t strides[] = {1, 2, 3, 4, sets, sets + 1, 2 * sets, 5, sets / 2 + 1, 3 * sets / 2};
      const std::uint64_t stride = row + (row == 1 ? strides[rng() % 10] - 1 : strides[rng() % 10]);
      const std::uint64_t lengths[] = {n - 1, n, n + 1, 2 * n, 3 * n - 1, 3 * n + 5, 5 * n + rng() % (2 * n),
                                       12 * n + rng() % (4 * n)};
      const std::uint64_t length = std::max<std::uint64_t>(1, lengths[rng() % 8]);
      const std::uint64_t first = rng() % (6 * n + 20);
      const std::uint32_t tensor = std::uint32_t(rng() % 3), trace = rng() % 3 == 0 ? kNoTrace : tensor % 2;
      const bool write = rng() % 3 == 0;
      if (rng() % 2 == 0)  // some of its first lines written just before: dirty hits
        for (std::uint64_t k = 0; k < n; k += 1 + rng() % 3)
          in.push_back({0, first + k / row * stride + k % row, trace, tensor, true});
      // Some streaks come twice in a row: the second starts with the first one's last
      // lines still held, far into its own lines (they hit only if reached in time).
      for (int pass = rng() % 4 == 0 ? 2 : 1; pass > 0; --pass)
        for (std::uint64_t k = 0; k < length; ++k)
          in.push_back({0, first + k / row * stride + k % row, trace, tensor, write});
      streaks += length > n;
    }
    if (round % 5 == 4)  // lines past 2^36: the bitmaps' pages past their table
      for (LineAccess& a : in) a.line += std::uint64_t(1) << 37;
    CacheModel fast(c, 3, 2), plain(c, 3, 2, CacheEngine::generic);
    const LineOwners owners;
    CacheSnapshot snap;
    for (std::size_t at = 0; at < in.size();) {
      const std::size_t k = std::min<std::size_t>(in.size() - at, 1 + rng() % 700);
      const auto batch = std::span(in).subspan(at, k);
      if (rng() % 8 == 0) {  // each access's outcome: the lines held back are settled first
        run_both(fast, plain, batch);
      } else {
        fast.count(batch), plain.count(batch);
      }
      if (rng() % 4 == 0) fast.snapshot(owners, snap);
      if (rng() % 8 == 0) (void)fast.report();  // settles a streak in the middle, which goes on
      at += k;
    }
    fast.finish(), plain.finish();
    CAPTURE(round);
    CAPTURE(ways);
    CAPTURE(sets);
    const CacheReport a = fast.report(), b = plain.report();
    check_same(a.total, b.total);
    if (c.three_cs) {
      // Cold and capacity misses from a shadow written here, apart from the engine's: a
      // list of the N most recent lines (allocating accesses only), searched line by line.
      std::list<std::uint64_t> recent;
      std::set<std::uint64_t> seen;
      std::uint64_t cold = 0, capacity = 0;
      for (const LineAccess& x : in) {
        const bool fresh = seen.insert(x.line).second;
        const auto it = std::find(recent.begin(), recent.end(), x.line);
        const bool held = it != recent.end(), allocate = !x.write || c.write_allocate;
        cold += fresh, capacity += !held && !fresh;
        if (held) recent.erase(it);
        if (held || allocate) recent.push_front(x.line);
        if (recent.size() > n) recent.pop_back();
      }
      CHECK(a.total.cold == cold);
      CHECK(a.total.capacity == capacity);
    }
    for (std::size_t t = 0; t < 3; ++t) check_same(a.tensors[t], b.tensors[t]);
    for (std::size_t t = 0; t < 2; ++t) check_same(a.traces[t], b.traces[t]);
  }
  CHECK(streaks > 500);
}

// A random cache for the warp doctests: lines of 2^smallest .. 16 bytes, 1 .. 8 ways
// (or fully associative), 1 .. 8 sets, LRU or FIFO, any write policy.
CacheConfig random_warp_cache(std::mt19937_64& rng, unsigned smallest) {
  CacheConfig c;
  c.line_bytes = std::uint64_t(1) << (smallest + rng() % (5 - smallest));
  const std::uint64_t ways = std::uint64_t(1) << (rng() % 4), sets = std::uint64_t(1) << (rng() % 4);
  c.ways = rng() % 5 == 0 ? 0 : ways;
  c.size = c.line_bytes * ways * (c.ways == 0 ? 1 : sets);
  c.policy = rng() % 2 ? CachePolicy::lru : CachePolicy::fifo;
  c.write_back = rng() % 4 != 0;
  c.write_allocate = rng() % 4 != 0;
  return c;
}

// Cache `c` over `source` of `s` (the selection `o`), run warped and plainly: every
// figure must be the plain one, per tensor (write-backs included), per trace and in
// total. Returns the warped run's WarpStats (none where it did not warp).
std::optional<WarpStats> warped_against_plain(const Schedule& s, const std::string& source, const CacheConfig& c,
                                              const TraceOptions& o = {}) {
  CacheRunOptions plain, warped;
  plain.caches = warped.caches = {c};
  plain.source = warped.source = source;
  plain.warp = false;
  const CacheRun a = simulate_caches(s, o, plain), b = simulate_caches(s, o, warped);
  CAPTURE(c.size);
  CAPTURE(c.ways);
  CAPTURE(c.line_bytes);
  const std::string policy = policy_name(c.policy);
  CAPTURE(policy);
  CAPTURE(c.write_back);
  CAPTURE(c.write_allocate);
  CAPTURE(c.three_cs);
  CHECK(!a.warp);
  check_same(a.caches[0].total, b.caches[0].total);
  for (std::size_t t = 0; t < a.caches[0].tensors.size(); ++t) {
    const std::string tensor = t < s.tensors.size() ? s.tensors[t].name : std::to_string(t);
    CAPTURE(tensor);
    check_same(a.caches[0].tensors[t], b.caches[0].tensors[t]);
  }
  for (std::size_t t = 0; t < a.caches[0].traces.size(); ++t) {
    CAPTURE(t);
    check_same(a.caches[0].traces[t], b.caches[0].traces[t]);
  }
  if (b.warp) CHECK(b.warp->simulated + b.warp->skipped == b.caches[0].total.accesses);
  return b.warp;
}

// 120 random caches over `source` of `s`, a third of them over a --from/--to window,
// each run warped and plainly: every figure must be the plain one. Returns the warps.
std::uint64_t warps_against_plain(const Schedule& s, const std::string& source, std::uint64_t seed,
                                  unsigned smallest_line, std::uint64_t* phases = nullptr,
                                  std::uint64_t* partial_shadows = nullptr, std::uint64_t* idle_places = nullptr,
                                  bool three_cs = true, std::uint64_t* probes = nullptr) {
  std::mt19937_64 rng(seed);
  std::uint64_t warps = 0, phase_warps = 0, partial_shadow_warps = 0, idle_place_warps = 0, probe_warps = 0;
  for (int round = 0; round < 120; ++round) {
    CacheConfig c = random_warp_cache(rng, smallest_line);
    c.three_cs = three_cs;
    TraceOptions o;
    if (round % 3 == 1) o.from = std::int64_t(rng() % 20), o.to = std::int64_t(100 + rng() % 400);
    CAPTURE(round);
    if (const std::optional<WarpStats> w = warped_against_plain(s, source, c, o)) {
      warps += w->warps;
      phase_warps += w->phase_warps;
      partial_shadow_warps += w->partial_shadow_warps;
      idle_place_warps += w->idle_place_warps;
      probe_warps += w->probe_warps;
      CHECK(w->probe_warps <= w->phase_warps);
    }
  }
  if (phases) *phases = phase_warps;
  if (probes) *probes = probe_warps;
  if (partial_shadows) *partial_shadows = partial_shadow_warps;
  if (idle_places) *idle_places = idle_place_warps;
  return warps;
}

TEST_CASE("cache warp: the counts of plain simulation, over random cache shapes") {
  // Warps are taken only after comparing states; whatever they skip, every figure must
  // be the one access-by-access simulation gives.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpMapping);
  std::uint64_t phases = 0;
  CHECK(warps_against_plain(s, "trace", 2026, 0, &phases) > 10);  // it must exercise warps, not only plain simulation
  CHECK(phases > 10);  // ... and warps at a phase into a block
}

TEST_CASE("cache warp: a probe early in a block, inside a span of it, warps the outer span from there") {
  // Mixtral 8x22B's experts in small: the span of x (experts) holds c tiles, which do
  // not translate, each holding a span of 4 token tiles whose first block is simulated
  // whole. The phases of x's second block move on to the end of its first span of token
  // tiles; a probe does not: where the state there matches the first expert's at the
  // same time, the experts warp from the probe and the span of token tiles is left.
  const Schedule s = th::compile_text2(R"(
workload:
  iteration_space_shape: {x: 0 <= x < 6, c: 0 <= c < 16, t: 0 <= t < 64, g: 0 <= g < 4}
  bits_per_value: {All: 32}
  einsums:
  - name: F
    tensor_accesses:
    - {name: Z, projection: [x, t, g]}
    - {name: W, projection: [x, c, g]}
    - {name: O, projection: [x, t, c], output: True}
)",
                                       R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [Z, W, O]}
  - !Temporal {rank_variable: x, tile_shape: 1}
  - !Temporal {rank_variable: c, tile_shape: 4}
  - !Temporal {rank_variable: t, tile_shape: 16}
  - !Temporal {rank_variable: g, tile_shape: 1}
  - !Temporal {rank_variable: t, tile_shape: 1}
  - !Compute {einsum: F, component: MAC}
)");
  std::uint64_t phases = 0, probes = 0;
  CHECK(warps_against_plain(s, "trace", 31, 0, &phases, nullptr, nullptr, true, &probes) > 10);
  MESSAGE("phase warps " << phases << ", at a probe " << probes);
  CHECK(probes > 5);
}

TEST_CASE("cache warp: the cold lines of skipped blocks, marked a group of rows at a stride at a time") {
  // Each block of h reads a new slab of X half a row at a time (p tile outside m): its
  // first touches are rows of lines at a stride of whole rows, which the blocks a warp
  // skips mark in the seen bitmap a group at a time (add_repeats). Y stays, so only
  // X's runs are recorded, one after the other. Cold and capacity: plain simulation's.
  const Schedule s = th::compile_text2(R"(
workload:
  iteration_space_shape: {h: 0 <= h < 24, m: 0 <= m < 8, p: 0 <= p < 64}
  bits_per_value: {All: 32}
  einsums:
  - name: S
    tensor_accesses:
    - {name: X, projection: [h, m, p]}
    - {name: Y, projection: [m, p], output: True}
)",
                                       R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [X, Y]}
  - !Temporal {rank_variable: h, tile_shape: 1}
  - !Temporal {rank_variable: p, tile_shape: 32}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: S, component: MAC}
)");
  CHECK(warps_against_plain(s, "trace", 7, 0) > 10);
}

// A scatter like DeepSeek-V3's to its experts: at each timestep a row of Z (which the
// loop over x reads again in every iteration) is copied to a row of Y that moves on
// with x, then Y is read back. Each block of x leaves its rows of Y below the rows of
// Z in the three Cs' shadow, where the rows of the blocks before the loop lie too: the
// shadow never repeats whole, only in its newest places.
const std::string kScatterWorkload = R"(
workload:
  iteration_space_shape: {x: 0 <= x < 40, m: 0 <= m < 6, g: 0 <= g < 8}
  bits_per_value: {All: 32}
  einsums:
  - name: S
    tensor_accesses:
    - {name: Z, projection: [m, g]}
    - {name: Y, projection: [x, m, g], output: True}
  - name: B
    tensor_accesses:
    - {name: Y, projection: [x, m, g]}
    - {name: Q, projection: [m, g], output: True}
)";
// The scatter's mapping; `buffered` puts buffers below MainMemory (a row of Z fetched
// at each timestep, the rows of Y drained at the end of each x), so that the
// memory-side cache sees the trace's pattern in its requests.
std::string scatter_mapping(bool buffered) {
  const std::string y = buffered ? "      - !Storage {component: GlobalBuffer, tensors: [Y]}\n" : "";
  const std::string z = buffered ? "      - !Storage {component: LocalBuffer, tensors: [Z]}\n" : "";
  return R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [Z, Y, Q]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: g, tile_shape: 4}
      - !Temporal {rank_variable: x, tile_shape: 1}
)" + y + "      - !Temporal {rank_variable: m, tile_shape: 1}\n" +
         z + R"(      - !Compute {einsum: S, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: x, tile_shape: 1}
      - !Compute {einsum: B, component: MAC}
)";
}

TEST_CASE("cache warp: a shadow compared in its newest places only, then read again") {
  // Where the lines below the newest places are ones no block touches, the blocks'
  // outcomes follow from the newest places alone, and the state after the warp is
  // built: the newest places shifted, then the lines each skipped block pushed below
  // them, then the lines from before. The read-back Einsum after the scatter misses
  // or hits its shadow as that state says: every figure must be the plain one. Over
  // the trace (warp_trace), and over the requests to MainMemory (warp_stream: each
  // block checked access by access, then counted as the recorded one).
  for (const bool buffered : {false, true}) {
    CAPTURE(buffered);
    const Schedule s = th::compile_text2(kScatterWorkload, scatter_mapping(buffered));
    std::uint64_t partial = 0;
    CHECK(warps_against_plain(s, buffered ? "transfers:MainMemory" : "trace", buffered ? 43 : 77, 2, nullptr,
                              &partial) > 10);
    CHECK(partial > 10);
  }
}

// Scores like DeepSeek-V3's QK: for each head h, S[h, p] = Q[h, e] . K[p, e] over the
// context p, a row of K and Q's row for the head at each timestep. The loop over p
// translates (K and S move with it, Q does not); each head's span of it starts with the
// lines of the head before in the sets (Q's row, K's last rows), which are touched by no
// block of the span, or only by its last, and age out of their places over its first
// blocks, while the lines that take those places are idle too. With rows of one
// element, a block brings few lines into a set, and the lines of the head before stay
// for several blocks. `reread`: each step also reads the row of K 16 steps on (a window:
// a line the next block leaves alone, the one after reads again).
std::string scores_workload(int e, bool reread) {
  return R"(
workload:
  iteration_space_shape: {h: 0 <= h < 6, p: 0 <= p < 48, e: 0 <= e < )" + std::to_string(e) +
         (reread ? ", r: 0 <= r < 2" : "") + R"(}
  bits_per_value: {All: 32}
  einsums:
  - name: S
    tensor_accesses:
    - {name: Q, projection: [h, e]}
    - {name: K, projection: )" + (reread ? "{P: p + 16 * r, E: e}" : "[p, e]") + R"(}
    - {name: S, projection: [h, p], output: True}
  - name: B
    tensor_accesses:
    - {name: K, projection: {P: 47 - p, E: e}}
    - {name: S, projection: {H: 5 - h, P: 47 - p}}
    - {name: B, projection: [h, p, e], output: True}
)";
}
// The scores, then a read back of K and S, the newest first (B): its hits are the lines
// the scores' last span left in the cache, so a warp that left other lines there shows
// in its counts. `buffered` puts a buffer below MainMemory under each step of p (in the
// scores: Q's row, K's row and S's element filled or drained at each step; in the read
// back: K's row and S's element filled, B's row drained), so that the memory-side cache
// (--source transfers:MainMemory) sees the trace's pattern in its requests, the read
// back's included (an Einsum with no buffer below MainMemory sends it none).
std::string scores_mapping(bool reread, bool buffered = false) {
  const std::string r = reread ? "      - !Temporal {rank_variable: r, tile_shape: 1}\n" : "";
  const std::string scores = buffered ? "      - !Storage {component: LocalBuffer, tensors: [Q, K, S]}\n" : "";
  const std::string back = buffered ? "      - !Storage {component: LocalBuffer, tensors: [K, S, B]}\n" : "";
  return R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [Q, K, S, B]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: h, tile_shape: 1}
      - !Temporal {rank_variable: p, tile_shape: 1}
)" + scores + r + R"(      - !Compute {einsum: S, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: h, tile_shape: 1}
      - !Temporal {rank_variable: p, tile_shape: 1}
)" + back + R"(      - !Compute {einsum: B, component: MAC}
)";
}

// The three scores workloads (buffered: each step of p under a buffer, so that the
// requests to MainMemory repeat the trace's pattern) over `source`, with and without
// the three Cs, 4 seeds each, every figure the plain one (warps_against_plain): the
// idle-place warps without the three Cs, and with them.
std::pair<std::uint64_t, std::uint64_t> idle_over_scores(const std::string& source, bool buffered) {
  std::pair<std::uint64_t, std::uint64_t> idle_warps{0, 0};
  for (const auto& [e, reread] : {std::pair{4, false}, std::pair{1, false}, std::pair{1, true}}) {
    const Schedule s = th::compile_text2(scores_workload(e, reread), scores_mapping(reread, buffered));
    for (const bool three_cs : {false, true}) {
      CAPTURE(e);
      CAPTURE(reread);
      CAPTURE(three_cs);
      for (const std::uint64_t seed : {5, 6, 7, 8}) {
        std::uint64_t idle = 0;
        CHECK(warps_against_plain(s, source, seed, 2, nullptr, nullptr, &idle, three_cs) > 10);
        (three_cs ? idle_warps.second : idle_warps.first) += idle;
      }
    }
  }
  return idle_warps;
}

TEST_CASE("cache warp: states that differ where they hold idle lines, the old one aged out") {
  // A place where the state before a block holds a line the block did not touch, and
  // the state after it a line the next block does not touch (both clean, or dirty lines
  // of one tensor), holds a line that does nothing in the next block either way. Under
  // FIFO the old line must be gone after the block; under LRU each line is followed
  // until it leaves its set (the previous heads' rows of K that age in place are the
  // keys of the span's last blocks) and the state after the warp built place by place:
  // the read back after the scores counts the lines left. Every figure must be the plain
  // one, with such places taken.
  const auto [without, with] = idle_over_scores("trace", false);
  CHECK(without > 30);
  CHECK(with > 0);  // (fewer: the shadow of these small caches differs there too)
}

// Caches for the idle-place doctests: for each line size and shape (ways, sets; ways 0:
// fully associative, of `sets` lines), LRU and FIFO in each write mode given
// (with_three_cs's), the three Cs on or off.
std::vector<CacheConfig> cache_grid(std::initializer_list<std::uint64_t> line_bytes,
                                    std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> shapes,
                                    bool three_cs, std::initializer_list<int> write_modes = {0, 1, 2}) {
  std::vector<CacheConfig> out;
  for (const std::uint64_t line : line_bytes)
    for (const auto& [ways, sets] : shapes)
      for (const CachePolicy policy : {CachePolicy::lru, CachePolicy::fifo})
        for (const int mode : write_modes) {
          CacheConfig c = with_three_cs(shape(line * (ways == 0 ? 1 : ways) * sets, ways, line, policy), mode);
          c.three_cs = three_cs;
          out.push_back(c);
        }
  return out;
}

// Each of `caches` over `source` of `s` against plain simulation (warped_against_plain):
// the warps taken, and those with idle places, by policy.
struct IdleWarps {
  std::uint64_t warps = 0, idle_lru = 0, idle_fifo = 0;
};
IdleWarps idle_against_plain(const Schedule& s, const std::string& source, const std::vector<CacheConfig>& caches) {
  IdleWarps n;
  for (const CacheConfig& c : caches)
    if (const std::optional<WarpStats> w = warped_against_plain(s, source, c)) {
      n.warps += w->warps;
      (c.policy == CachePolicy::lru ? n.idle_lru : n.idle_fifo) += w->idle_place_warps;
    }
  return n;
}

TEST_CASE("cache warp: idle places with the three Cs on, the shadow repeating too") {
  // With the three Cs a warp also needs the shadow (a fully associative LRU cache of as
  // many lines) to repeat, whole or in its newest places, in the same block as the
  // engine's places do, idle ones aside. Every shape up to 16 ways and 16 sets (256
  // lines), each line size, policy and write mode: warps with idle places must be
  // taken, under FIFO and under LRU, and every figure be the plain one.
  IdleWarps n;
  for (const auto& [e, reread] : {std::pair{4, false}, std::pair{1, false}, std::pair{1, true}}) {
    CAPTURE(e);
    CAPTURE(reread);
    const Schedule s = th::compile_text2(scores_workload(e, reread), scores_mapping(reread));
    const IdleWarps k = idle_against_plain(s, "trace",
                                           cache_grid({4, 8, 16, 32, 64},
                                                      {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}, {1, 2}, {2, 2}, {4, 2},
                                                       {8, 2}, {16, 2}, {2, 4}, {4, 4}, {8, 4}, {16, 4}, {4, 8},
                                                       {8, 8}, {16, 8}, {8, 16}, {16, 16}, {0, 8}, {0, 16}},
                                                      true));
    n.warps += k.warps, n.idle_lru += k.idle_lru, n.idle_fifo += k.idle_fifo;
  }
  CHECK(n.warps > 1000);
  CHECK(n.idle_fifo > 50);
  CHECK(n.idle_lru > 0);
}

TEST_CASE("cache warp: idle places in the ordered engine (fully associative, more than 16 lines)") {
  // A fully associative LRU or FIFO cache of more than 16 lines is the `ordered` engine
  // (a hash and a list), whose one set is all its lines: an idle place is a recency rank
  // of the whole cache. It is the only engine for more than 16 ways that can warp (the
  // engines in ways hold up to 16): 2 sets of more than 16 ways each are a stamp per
  // way, which cannot.
  const auto caches = [](bool three_cs) {
    return cache_grid({4, 8, 16, 32}, {{0, 24}, {0, 32}, {0, 48}, {0, 64}, {0, 96}, {0, 128}}, three_cs);
  };
  for (const CacheConfig& c : caches(true)) {
    CAPTURE(c.size);
    CAPTURE(c.line_bytes);
    REQUIRE(c.sets() == 1);
    REQUIRE(c.associativity() > 16);
    CHECK(CacheModel(c, 1, 0).can_warp());
    if (c.lines() / 2 > 16) {
      CacheConfig two_sets = c;
      two_sets.ways = c.lines() / 2;
      CHECK_FALSE(CacheModel(two_sets, 1, 0).can_warp());
    }
  }
  // The scores' heads as above: every figure the plain one, idle places taken under
  // LRU and FIFO, and with the three Cs too.
  for (const bool three_cs : {false, true}) {
    CAPTURE(three_cs);
    IdleWarps n;
    for (const int e : {4, 2}) {
      const Schedule s = th::compile_text2(scores_workload(e, false), scores_mapping(false));
      const IdleWarps k = idle_against_plain(s, "trace", caches(three_cs));
      n.warps += k.warps, n.idle_lru += k.idle_lru, n.idle_fifo += k.idle_fifo;
    }
    CHECK(n.warps > 100);
    CHECK(n.idle_fifo > (three_cs ? 0 : 10));
    if (!three_cs) CHECK(n.idle_lru > 10);  // (with them, under FIFO only)
  }
}

TEST_CASE("cache warp over a stream: idle places in the requests of the buffered scores") {
  // The scores with a buffer under each step of p (scores_mapping(..., true)): the
  // requests to MainMemory (warp_stream) repeat the trace's pattern, each head's span
  // starting with the head before's lines in the sets, and the read back's fills after
  // them. A block is checked access by access against the recorded one, then counted;
  // idle places must be taken there too, with every figure the plain one.
  const auto [without, with] = idle_over_scores("transfers:MainMemory", true);
  CHECK(without > 300);
  CHECK(with > 0);  // (fewer: the shadow of these small caches differs too)
}

// Two outputs in one span: for each head, the scores S, then T from them (each step reads
// S's element and writes T's). T's span starts with S's dirty lines in the sets: where
// a block ages out a dirty line of S it did not touch, and the state after it holds a
// dirty line of T at that place, the place is not idle: the next block would write back
// T's line there, not S's shifted, and a warp that took it would count S's write-backs
// where plain simulation writes back T's lines (the totals alike).
const std::string kTwoOutputsWorkload = R"(
workload:
  iteration_space_shape: {h: 0 <= h < 6, p: 0 <= p < 48}
  bits_per_value: {All: 32}
  einsums:
  - name: S
    tensor_accesses:
    - {name: Q, projection: [h]}
    - {name: K, projection: [p]}
    - {name: S, projection: [h, p], output: True}
  - name: T
    tensor_accesses:
    - {name: Q, projection: [h]}
    - {name: K, projection: [p]}
    - {name: S, projection: [h, p]}
    - {name: T, projection: [h, p], output: True}
  - name: B
    tensor_accesses:
    - {name: K, projection: {P: 47 - p}}
    - {name: S, projection: {H: 5 - h, P: 47 - p}}
    - {name: T, projection: {H: 5 - h, P: 47 - p}}
    - {name: B, projection: [h, p], output: True}
)";
const std::string kTwoOutputsMapping = R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [Q, K, S, T, B]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: h, tile_shape: 1}
      - !Sequential
        nodes:
        - !Nested
          nodes:
          - !Temporal {rank_variable: p, tile_shape: 1}
          - !Compute {einsum: S, component: MAC}
        - !Nested
          nodes:
          - !Temporal {rank_variable: p, tile_shape: 1}
          - !Compute {einsum: T, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: h, tile_shape: 1}
      - !Temporal {rank_variable: p, tile_shape: 1}
      - !Compute {einsum: B, component: MAC}
)";

TEST_CASE("cache warp: dirty lines of two tensors at one place are not idle") {
  // Write-back caches (allocating on a write miss or not), with and without the three
  // Cs: every figure the plain one, each tensor's write-backs included, while idle
  // places (clean lines, or dirty lines of one tensor) are taken.
  const Schedule s = th::compile_text2(kTwoOutputsWorkload, kTwoOutputsMapping);
  for (const bool three_cs : {false, true}) {
    CAPTURE(three_cs);
    const IdleWarps n = idle_against_plain(
        s, "trace",
        cache_grid({4, 8, 16, 32}, {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {1, 2}, {2, 2}, {4, 2}, {1, 4}, {2, 4}, {4, 4},
                                    {1, 8}, {2, 8}, {4, 8}, {8, 8}, {1, 16}, {2, 16}, {0, 8}, {0, 24}},
                   three_cs, {0, 2}));
    CHECK(n.warps > 100);
    CHECK(n.idle_lru + n.idle_fifo > 10);
  }
}

// The state a warp leaves is plain simulation's, place by place: random caches over
// the trace of `s` cut at a random timestep (the warps before it taken), the engine's
// lines, dirty bits and tensors per set newest first, and the three Cs' shadow, against
// a model that simulated every access. (Counts can agree while a warp left other lines
// in places no later access reads.) Returns the warps whose state was built place by
// place (idle places under LRU: WarpBlock::rebuilds).
// The engine's lines, dirty bits and tensors per set, and the three Cs' shadow, of two
// models: the same.
void check_same_state(const CacheModel& plain, const CacheModel& warped) {
  const LineOwners owners;
  CacheSnapshot x, y;
  plain.snapshot(owners, x), warped.snapshot(owners, y);
  CHECK(x.lines == y.lines);
  CHECK(x.dirty == y.dirty);
  CHECK(x.owner == y.owner);
  CHECK(x.shadow == y.shadow);
}

std::uint64_t states_against_plain(const Schedule& s, std::uint64_t seed, unsigned smallest_line, int rounds = 120) {
  std::int64_t end = 0;  // the trace's last timestep
  {
    auto lines = trace_runs_pipeline(s, TraceOptions{}) | cache_lines(4);
    for (auto b = lines.next_batch(); !b.empty(); b = lines.next_batch()) end = std::max(end, b.back().timestep);
  }
  std::mt19937_64 rng(seed);
  std::uint64_t warps = 0, rebuilt = 0;
  for (int round = 0; round < rounds; ++round) {
    CacheConfig c = random_warp_cache(rng, smallest_line);
    c.three_cs = round % 2 == 0;
    if (round % 3 == 2) {  // 16-way sets, or the ordered engine (fully associative, past 16 lines)
      if (rng() % 2) c.ways = 0, c.size = c.line_bytes * (24 + rng() % 105);
      else c.ways = 16, c.size = c.line_bytes * 16 * (std::uint64_t(1) << (rng() % 3));
    }
    TraceOptions o;
    o.to = 1 + std::int64_t(rng() % std::uint64_t(end + 1));
    auto trace = trace_runs_pipeline(s, o);
    const AddressMap map = default_address_map(s, trace.context());
    CacheModel plain(c, s.tensors.size(), s.traces.size()), warped(c, s.tensors.size(), s.traces.size());
    WarpStats stats;
    if (!warp_trace(s, o, map, c.line_bytes, warped, stats)) continue;
    auto lines = std::move(trace) | cache_lines(c.line_bytes, map, true);
    for (auto b = lines.next_batch(); !b.empty(); b = lines.next_batch()) plain.count(b);
    plain.finish();
    CAPTURE(round);
    CAPTURE(o.to);
    CAPTURE(c.size);
    CAPTURE(c.ways);
    CAPTURE(c.line_bytes);
    CAPTURE(c.policy == CachePolicy::lru);
    check_same_state(plain, warped);
    warps += stats.warps;
    if (c.policy == CachePolicy::lru) rebuilt += stats.idle_place_warps;  // (under LRU, those built)
  }
  CHECK(warps > 10);
  return rebuilt;
}

// The requests `s` makes of MainMemory as 8-byte lines, all of them, and the addresses
// they were made with (what warp_stream reads).
struct MainMemoryStream {
  AddressMap map;
  std::vector<LineAccess> lines;
};
MainMemoryStream main_memory_stream(const Schedule& s) {
  TransferOptions t;
  t.level = "MainMemory";
  t.line_bytes = 8;
  auto requests = transfer_pipeline(s, TraceOptions{}, t);
  MainMemoryStream out{requests.addresses(), {}};
  auto lines = std::move(requests) | cache_lines(8);
  for (auto b = lines.next_batch(); !b.empty(); b = lines.next_batch()) out.lines.insert(out.lines.end(), b.begin(), b.end());
  return out;
}

// The same over the requests to MainMemory (warp_stream, 8-byte lines): the state after
// the whole stream, warped, against plain simulation's. Returns the warps built place by
// place.
std::uint64_t stream_states_against_plain(const Schedule& s, std::uint64_t seed, int rounds) {
  const auto [map, stream] = main_memory_stream(s);
  std::mt19937_64 rng(seed);
  std::uint64_t warps = 0, rebuilt = 0;
  for (int round = 0; round < rounds; ++round) {
    CacheConfig c = random_warp_cache(rng, 3);
    c.size = c.size / c.line_bytes * 8, c.line_bytes = 8;
    c.three_cs = round % 2 == 0;
    CacheModel plain(c, s.tensors.size(), s.traces.size()), warped(c, s.tensors.size(), s.traces.size());
    const std::size_t cut = stream.size() / 2 + rng() % (stream.size() / 2);  // (a stream cut short, too)
    const std::span<const LineAccess> in(stream.data(), cut);
    for (std::size_t i = 0; i < in.size(); i += 7) plain.count(in.subspan(i, std::min<std::size_t>(7, in.size() - i)));
    plain.finish();
    std::size_t next = 0;
    WarpStats stats;
    if (!warp_stream(s, TraceOptions{}, map, 8, [&] {
          const std::size_t n = std::min<std::size_t>(7, in.size() - next);
          next += n;
          return in.subspan(next - n, n);
        }, warped, stats))
      continue;
    CAPTURE(round);
    CAPTURE(c.size);
    CAPTURE(c.ways);
    CAPTURE(c.policy == CachePolicy::lru);
    check_same_state(plain, warped);
    check_same(plain.report().total, warped.report().total);
    warps += stats.warps;
    if (c.policy == CachePolicy::lru) rebuilt += stats.idle_place_warps;
  }
  CHECK(warps > 10);
  return rebuilt;
}

TEST_CASE("cache warp: the state a warp leaves is plain simulation's, place by place") {
  // Where idle lines differed (the scores), the state after the blocks is built place
  // by place, not `later` shifted: the lines of the heads before the span that age out
  // of their places are there until they do.
  for (const auto& [e, reread] : {std::pair{4, false}, std::pair{1, false}, std::pair{1, true}}) {
    CAPTURE(e);
    CAPTURE(reread);
    const Schedule s = th::compile_text2(scores_workload(e, reread), scores_mapping(reread));
    CHECK(states_against_plain(s, 11 + std::uint64_t(e), 2, 600) > 20);
  }
  states_against_plain(th::compile_text2(kWarpWorkload, kWarpMapping), 12, 0);
  states_against_plain(th::compile_text2(kScatterWorkload, scatter_mapping(false)), 13, 2);
  // Over the requests of the buffered scores (warp_stream): each block checked access by
  // access, then counted, and the state built where idle places differed.
  std::uint64_t rebuilt = 0;
  for (const auto& [e, reread] : {std::pair{1, false}, std::pair{1, true}})
    rebuilt += stream_states_against_plain(th::compile_text2(scores_workload(e, reread), scores_mapping(reread, true)),
                                           21 + std::uint64_t(reread), 300);
  CHECK(rebuilt > 10);
}

// The same Einsums with buffers below MainMemory, so that --source transfers:MainMemory
// has requests at each iteration of the loops (fills of A, W and Z's tiles, drains of Z
// and Y), and a partial last tile of m.
const std::string kWarpBufferedMapping = R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, W, Z, Y]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 4}
      - !Storage {component: GlobalBuffer, tensors: [A, Z]}
      - !Temporal {rank_variable: n, tile_shape: 4}
      - !Storage {component: LocalBuffer, tensors: [W]}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: Z, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Storage {component: GlobalBuffer, tensors: [Z, Y]}
      - !Compute {einsum: Y, component: MAC}
)";

TEST_CASE("cache warp over the transfers: the counts of plain simulation, over random cache shapes") {
  // The requests cannot be cut at a timestep: the stream is read once and each block a
  // warp counts was checked, access by access, to repeat the recorded one.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpBufferedMapping);
  CHECK(warps_against_plain(s, "transfers:MainMemory", 28, 2) > 10);
}

TEST_CASE("cache warp over a stream: a block that does not repeat the recorded one is simulated from there") {
  // The requests of the buffered mapping with one access changed late in the stream (a
  // line moved, a read made a write or the reverse, or the access dropped): the blocks
  // checked before it are counted, the changed block is simulated from its start, and
  // every count is the plain model's on the same stream.
  const Schedule s = th::compile_text2(kWarpWorkload, kWarpBufferedMapping);
  const auto [map, stream] = main_memory_stream(s);
  REQUIRE(stream.size() > 100);
  std::mt19937_64 rng(5);
  std::uint64_t gave_up = 0;
  for (int round = 0; round < 300; ++round) {
    CacheConfig c = random_warp_cache(rng, 2);
    if (c.line_bytes != 8) c.size = c.size / c.line_bytes * 8, c.line_bytes = 8;
    std::vector<LineAccess> doctored = stream;
    const std::size_t at = doctored.size() / 3 + rng() % (2 * doctored.size() / 3);
    if (round % 3 == 0) doctored.erase(doctored.begin() + std::ptrdiff_t(at));
    else if (round % 3 == 1) doctored[at].line += 1 + rng() % 3;
    else doctored[at].write = !doctored[at].write;
    CacheModel plain(c, s.tensors.size(), s.traces.size()), warped(c, s.tensors.size(), s.traces.size());
    for (std::size_t i = 0; i < doctored.size(); i += 7)  // batches of 7
      plain.count(std::span<const LineAccess>(doctored).subspan(i, std::min<std::size_t>(7, doctored.size() - i)));
    plain.finish();
    std::size_t next = 0;
    WarpStats stats;
    const bool ran = warp_stream(s, TraceOptions{}, map, 8, [&] {
      const std::size_t n = std::min<std::size_t>(7, doctored.size() - next);
      next += n;
      return std::span<const LineAccess>(doctored).subspan(next - n, n);
    }, warped, stats);
    if (!ran) continue;
    CAPTURE(round);
    CAPTURE(c.size);
    CAPTURE(c.ways);
    const CacheReport x = plain.report(), y = warped.report();
    check_same(x.total, y.total);
    for (std::size_t k = 0; k < x.tensors.size(); ++k) check_same(x.tensors[k], y.tensors[k]);
    CHECK(stats.simulated + stats.skipped == x.total.accesses);
    gave_up += stats.abandoned;
  }
  CHECK(gave_up > 20);
}

TEST_CASE("seen lines: lines at a stride, against a set") {
  // Strides below a word, of a word and beyond a page, from starts that straddle words
  // and pages, over lines partly seen before: each count is a plain set's.
  std::mt19937_64 rng(64);
  SeenLines seen;
  std::set<std::uint64_t> want;
  for (int round = 0; round < 400; ++round) {
    const std::uint64_t strides[] = {1, 2, 3, 4, 7, 63, 64, 65, 1000, 70000};
    const std::uint64_t stride = strides[rng() % 10], first = rng() % 300000, count = 1 + rng() % 300;
    std::uint64_t fresh = 0;
    for (std::uint64_t k = 0; k < count; ++k) fresh += want.insert(first + k * stride).second;
    CAPTURE(round);
    CHECK(seen.test_and_set_strided(first, stride, count) == fresh);
  }
  for (std::uint64_t l : {0ull, 5ull, 65535ull, 65536ull, 299999ull}) CHECK(seen.test_and_set(l) == (want.count(l) > 0));
}

TEST_CASE("seen lines: rows of lines at a stride, against a set") {
  // Rows inside a word, across words and longer than a word, at strides below a row's
  // end and beyond a page, over lines partly seen before.
  std::mt19937_64 rng(65);
  SeenLines seen;
  std::set<std::uint64_t> want;
  for (int round = 0; round < 400; ++round) {
    const std::uint64_t rows_of[] = {1, 2, 3, 8, 63, 64, 65, 130};
    const std::uint64_t row = rows_of[rng() % 8], stride = row + rng() % (rng() % 2 ? 100 : 70000);
    const std::uint64_t first = rng() % 300000, rows = 1 + rng() % 50;
    std::uint64_t fresh = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t i = 0; i < row; ++i) fresh += want.insert(first + r * stride + i).second;
    CAPTURE(round);
    CHECK(seen.test_and_set_rows(first, row, stride, rows) == fresh);
  }
  // Every line marked, and no other: what is left of 0 .. 400000 is fresh.
  CHECK(seen.test_and_set_range(0, 400000) ==
        400001 - std::uint64_t(std::distance(want.begin(), want.upper_bound(400000))));
}

TEST_CASE("line bits: set, clear and ranges, against a set") {
  // Lines near 0, across words and pages, and past the page table (2^36 lines on);
  // `any` over ranges that start and end inside words and span pages.
  std::mt19937_64 rng(36);
  LineBits bits;
  std::set<std::uint64_t> want;
  const std::uint64_t bases[] = {0, 65536 - 40, std::uint64_t(1) << 36, (std::uint64_t(1) << 40) + 7};
  for (int round = 0; round < 20000; ++round) {
    const std::uint64_t line = bases[rng() % 4] + rng() % 140000;
    CAPTURE(line);
    CHECK(bits.test(line) == (want.count(line) > 0));
    if (want.count(line)) bits.clear(line), want.erase(line);
    else bits.set(line), want.insert(line);
    const std::uint64_t first = bases[rng() % 4] + rng() % 140000, last = first + rng() % (rng() % 2 ? 70 : 70000);
    CAPTURE(first);
    CAPTURE(last);
    const auto it = want.lower_bound(first);
    CHECK(bits.any(first, last) == (it != want.end() && *it <= last));
  }
  for (std::uint64_t l : want) bits.clear(l);
  CHECK(!bits.any(0, 200000));
  CHECK(!bits.any(std::uint64_t(1) << 36, (std::uint64_t(1) << 36) + 200000));
}

TEST_CASE("seen lines: a range marks its lines and counts those not seen before") {
  SeenLines seen;
  CHECK(!seen.test_and_set(5));
  CHECK(!seen.test_and_set(63));
  CHECK(!seen.test_and_set(64));
  CHECK(!seen.test_and_set(65536 + 3));
  CHECK(seen.test_and_set_range(0, 130) == 131 - 3);          // 5, 63, 64 seen
  CHECK(seen.test_and_set_range(0, 130) == 0);
  CHECK(seen.test_and_set_range(60, 70) == 0);
  CHECK(seen.test_and_set_range(65530, 65540) == 11 - 1);     // across a page; 65539 seen
  CHECK(!seen.test_and_set(131));
  CHECK(seen.test_and_set(130));
  CHECK(seen.test_and_set_range(100000, 300000) == 200001);   // four pages, none seen
  // Seen: 0 .. 131 (132), 65530 .. 65540 (11), 100000 .. 300000 (200001).
  CHECK(seen.test_and_set_range(0, 300000) == 300001 - 132 - 11 - 200001);
  CHECK(seen.test_and_set_range(300000, 300000) == 0);
  CHECK(seen.test_and_set_range(300001, 300001) == 1);
  CHECK(seen.test_and_set_range(127, 128) == 0);

  // Against marking line by line.
  std::mt19937_64 rng(28);
  SeenLines by_range, by_line;
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t first = rng() % 300000, last = first + (rng() % 4 == 0 ? rng() % 140000 : rng() % 200);
    std::uint64_t fresh = 0;
    for (std::uint64_t l = first; l <= last; ++l) fresh += !by_line.test_and_set(l);
    CHECK(by_range.test_and_set_range(first, last) == fresh);
  }
}

TEST_CASE("seen lines: pages in the table and past it, cleared and made again") {
  // Pages below 2^20 (lines below 2^36) are found through a table, those past it through
  // the last few found and a map; clear() forgets both, and its pages come back zeroed.
  // Against a set, over lines near 0, across pages, and far past the table, several
  // pages of each in turn (more than the last few kept at hand).
  std::mt19937_64 rng(36);
  const std::uint64_t bases[] = {0, 65536 * 7 - 50, (std::uint64_t(1) << 36) - 1000, std::uint64_t(1) << 36,
                                 (std::uint64_t(1) << 40) + 7, (std::uint64_t(1) << 40) + 65536 * 9};
  SeenLines seen;
  for (int round = 0; round < 3; ++round) {
    std::set<std::uint64_t> want;
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t l = bases[rng() % std::size(bases)] + rng() % 200000;
      CHECK(seen.test(l) == (want.count(l) > 0));
      CHECK(seen.test_and_set(l) == !want.insert(l).second);
    }
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t first = bases[rng() % std::size(bases)] + rng() % 200000, last = first + rng() % 300;
      std::uint64_t fresh = 0;
      for (std::uint64_t l = first; l <= last; ++l) fresh += want.insert(l).second;
      CHECK(seen.test_and_set_range(first, last) == fresh);
    }
    seen.clear();
    for (const std::uint64_t b : bases) CHECK(!seen.test(b + 1));
  }
}

TEST_CASE("warp block: runs of lines, each line with its first access's key; memory follows the cache") {
  CacheConfig c;
  c.size = 1024, c.ways = 4, c.line_bytes = 64;  // 16 lines; a shadow of 16
  const CacheModel model(c, 2, 2);
  const std::size_t cap = WarpBlock::max_runs(model);
  CHECK(cap == 4096);  // 4 x 32 lines is less than the floor
  const std::vector<std::int64_t> delta = {8, 0};  // tensor 1 stays: not recorded
  WarpBlock block;
  block.reset(delta, cap);
  std::vector<LineAccess> batch;
  const auto lines = [&](std::uint64_t first, std::uint64_t last, std::uint32_t trace, std::uint32_t tensor = 0) {
    batch.clear();
    for (std::uint64_t l = first; l <= last; ++l) batch.push_back({0, l, trace, tensor, false});
    block.add(batch, model);
  };
  const auto runs = [&] {
    std::vector<std::array<std::uint64_t, 3>> out;
    for (const auto& [first, r] : block.runs()) out.push_back({first, r.last, r.key});
    return out;
  };
  using R = std::vector<std::array<std::uint64_t, 3>>;
  lines(10, 19, 0);
  lines(15, 24, 1);  // 15 .. 19 were trace 0's first
  CHECK(runs() == R{{10, 19, 0}, {20, 24, 1}});
  lines(25, 30, 0);
  lines(5, 9, 0);    // joins the run of its key after it
  CHECK(runs() == R{{5, 19, 0}, {20, 24, 1}, {25, 30, 0}});
  lines(0, 3, 0);
  lines(100, 200, 0, 1);  // a tensor that stays
  lines(0, 40, 0);   // fills 4 and 31 .. 40: the runs of trace 0 on either side join
  CHECK(runs() == R{{0, 19, 0}, {20, 24, 1}, {25, 40, 0}});
  CHECK(block.touched(0));
  CHECK(block.touched(22));
  CHECK(block.touched(40));
  CHECK(!block.touched(41));
  CHECK(!block.touched(150));
  batch = {{0, 45, 0, 0, false}, {0, 44, 0, 0, false}, {0, 46, 0, 0, false}, {0, 47, kNoTrace, 0, false}};
  block.add(batch, model);  // one at a time, not in order; a key of its own (tensor 0's)
  CHECK(runs() == R{{0, 19, 0}, {20, 24, 1}, {25, 40, 0}, {44, 46, 0}, {47, 47, 2}});

  // A block of many more lines than the cache's, in runs: a run each, whatever their length.
  block.reset(delta, cap);
  for (std::uint64_t r = 0; r < 64; ++r) lines(r << 20, (r << 20) + (1 << 16) - 1, 0);
  CHECK(block.runs().size() == 64);
  CHECK(!block.overflow());
  CHECK(block.touched((5 << 20) + 65535));
  CHECK(!block.touched((5 << 20) + 65536));
  // Lines at a stride: one group, however many (runs() gives each line its run).
  block.reset(delta, cap);
  batch.clear();
  for (std::uint64_t l = 0; l < 4 * cap; l += 2) batch.push_back({0, l, 0, 0, false});
  block.add(batch, model);
  CHECK(block.group_count() == 1);
  CHECK(block.runs().size() == 2 * cap);
  CHECK(!block.overflow());
  CHECK(block.touched(4 * cap - 2));
  CHECK(!block.touched(4 * cap - 3));
  // Scattered lines (gaps of 2, 3, 4, 2, 3, 4, ...: groups of two lines at most, about
  // 4/3 x cap entries): past the cap, the block overflows and lets its runs go.
  block.reset(delta, cap);
  batch.clear();
  for (std::uint64_t l = 0, k = 0; l < 8 * cap; l += 2 + k++ % 3) batch.push_back({0, l, 0, 0, false});
  for (std::size_t i = 0; i < batch.size(); i += 100) {
    block.add(std::span(batch).subspan(i, std::min<std::size_t>(100, batch.size() - i)), model);
    CHECK(block.group_count() <= cap);
  }
  CHECK(block.overflow());
  CHECK(block.runs().empty());
  block.reset(delta, cap);
  CHECK(!block.overflow());
}

TEST_CASE("warp block: its runs are the block's lines with their first keys, against a map of lines") {
  CacheConfig c;
  c.size = 1024, c.ways = 4, c.line_bytes = 64;
  const CacheModel model(c, 2, 3);
  std::mt19937_64 rng(2028);
  for (int round = 0; round < 40; ++round) {
    WarpBlock block;
    block.reset(std::vector<std::int64_t>{4, -8}, std::size_t(1) << 20);
    std::map<std::uint64_t, std::uint64_t> first;  // line -> key of its first access
    std::vector<LineAccess> batch;
    for (int b = 0; b < 30; ++b) {
      batch.clear();
      // Runs, strided walks and single lines, of two tensors and three traces or none.
      for (int r = 0; r < 20; ++r) {
        const std::uint64_t start = rng() % 600, length = 1 + rng() % (rng() % 3 ? 8 : 40), stride = 1 + rng() % 5;
        const std::uint32_t trace = rng() % 4 == 0 ? kNoTrace : std::uint32_t(rng() % 3), tensor = std::uint32_t(rng() % 2);
        for (std::uint64_t i = 0; i < length; ++i) batch.push_back({0, start + i * stride, trace, tensor, false});
      }
      block.add(batch, model);
      for (const LineAccess& a : batch) first.try_emplace(a.line, model.key_of(a));
    }
    std::map<std::uint64_t, std::uint64_t> got;
    std::uint64_t end = 0;
    std::uint32_t key = 0, tensor = 0;
    for (const auto& [f, r] : block.runs()) {
      CHECK(f <= r.last);
      if (!got.empty()) {
        CHECK(f > end);                                              // disjoint, in order
        CHECK((f > end + 1 || r.key != key || r.tensor != tensor));  // no two that could join
      }
      for (std::uint64_t l = f; l <= r.last; ++l) got[l] = r.key;
      end = r.last, key = r.key, tensor = r.tensor;
    }
    CHECK(got == first);
    for (std::uint64_t l = 0; l < 800; ++l) CHECK(block.touched(l) == first.contains(l));
  }
}

TEST_CASE("warp block: the blocks a warp skipped, shifted in as groups, are the lines one by one") {
  // add_shifted() takes an inner block's groups (strided walks) whole where none of
  // their lines was recorded; the runs and touched lines must be those of each line of
  // each skipped block added in order, first key first.
  const CacheModel model(shape(1024, 4, 64, CachePolicy::lru), 3, 3);
  std::mt19937_64 rng(2054);
  for (int round = 0; round < 60; ++round) {
    const std::vector<std::int64_t> inner_delta = {std::int64_t(rng() % 200), -std::int64_t(rng() % 50), 0};
    const std::vector<std::int64_t> outer_delta = {3, rng() % 2 ? 0 : 5, 0};  // tensor 1 may stay outside
    WarpBlock inner, outer;
    inner.reset(inner_delta, std::size_t(1) << 20), outer.reset(outer_delta, std::size_t(1) << 20);
    std::map<std::uint64_t, std::uint64_t> first;  // the outer block's line -> key
    std::vector<LineAccess> batch;
    const auto walks = [&](int n) {
      batch.clear();
      for (int r = 0; r < n; ++r) {
        // (a line is one tensor's: each tensor's lines 10,000 apart from the other's)
        const std::uint32_t trace = rng() % 4 == 0 ? kNoTrace : std::uint32_t(rng() % 3), tensor = std::uint32_t(rng() % 2);
        const std::uint64_t start = 3000 + 10000 * tensor + rng() % 600, length = 1 + rng() % 30, stride = 1 + rng() % 9;
        for (std::uint64_t i = 0; i < length; ++i) batch.push_back({0, start + i * stride, trace, tensor, false});
      }
    };
    walks(5);  // the outer block's own lines first
    outer.add(batch, model);
    for (const LineAccess& a : batch)
      if (outer_delta[a.tensor] != 0) first.try_emplace(a.line, model.key_of(a));
    walks(1 + int(rng() % 6));
    inner.add(batch, model);
    const std::int64_t blocks = 1 + std::int64_t(rng() % 12);
    outer.add_shifted(inner, blocks);
    for (std::int64_t i = 1; i <= blocks; ++i)
      for (const auto& [f, r] : inner.runs())
        for (std::uint64_t l = f; l <= r.last; ++l)
          if (outer_delta[r.tensor] != 0)
            first.try_emplace(std::uint64_t(std::int64_t(l) + i * inner_delta[r.tensor]), r.key);
    std::map<std::uint64_t, std::uint64_t> got;
    for (const auto& [f, r] : outer.runs())
      for (std::uint64_t l = f; l <= r.last; ++l) CHECK(got.emplace(l, r.key).second);  // disjoint
    CHECK(got == first);
    CHECK(outer.group_count() <= got.size());
    for (std::uint64_t l = 0; l < 20000; ++l) CHECK(outer.touched(l) == first.contains(l));
  }
}

TEST_CASE("cache: without the three Cs, a batch of more accesses than a stretch's packed counters hold") {
  // simulate() counts a stretch of one key in a register, 21 bits a count, so a batch of
  // 2^21 + 5000 accesses of one trace is counted in two stretches; run_replays() counts
  // its simulated accesses itself. Every count is the generic engine's, per trace and per
  // tensor, under write-through (write-throughs counted) and write-back, in each policy.
  for (const CachePolicy policy : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (const bool write_back : {true, false})
      for (const bool long_steps : {false, true}) {
        const int policy_index = int(policy);
        CAPTURE(policy_index);
        CAPTURE(write_back);
        CAPTURE(long_steps);
        CacheConfig c = shape(1 << 20, 16, 64, policy);
        c.three_cs = false, c.write_back = write_back;
        std::mt19937_64 rng(11);
        std::vector<LineAccess> in;
        const std::size_t n = (std::size_t(1) << 21) + 5000;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint32_t trace = i < n - 2000 ? 0 : std::uint32_t(1 + i % 2);
          const std::int64_t t = long_steps ? std::int64_t(i / 100000) : std::int64_t(i);
          // (A trace is one tensor's, as in a schedule.)
          const std::uint32_t tensor = trace == 2 ? std::uint32_t(i % 3) : trace;
          in.push_back({t, rng() % 40000, trace == 2 ? kNoTrace : trace, tensor, rng() % 4 == 0});
        }
        CacheModel fast(c, 3, 2), generic(c, 3, 2, CacheEngine::generic);
        // Short timesteps: a first batch turns the repeats' records off, so the long
        // one goes to simulate(); long ones: to run_replays().
        const std::size_t first = 1000;
        fast.count(std::span(in).first(first));
        fast.count(std::span(in).subspan(first));
        std::vector<CacheAccess> out;
        generic.run(in, out);
        fast.finish(), generic.finish();
        const CacheReport x = fast.report(), y = generic.report();
        for (std::size_t t = 0; t < 3; ++t) check_same(x.tensors[t], y.tensors[t]);
        for (std::size_t t = 0; t < 2; ++t) check_same(x.traces[t], y.traces[t]);
        check_same(x.total, y.total);
        // The counts tallied here from run()'s outcome of each access, apart from any
        // counter of the engines': accesses, hits and write-throughs per tensor and trace.
        std::array<std::uint64_t, 3> tensor_accesses{}, tensor_hits{}, tensor_throughs{};
        std::array<std::uint64_t, 2> trace_accesses{}, trace_hits{}, trace_throughs{};
        REQUIRE(out.size() == n);
        for (const CacheAccess& a : out) {
          ++tensor_accesses[a.tensor];
          tensor_hits[a.tensor] += a.is(CacheAccess::hit);
          tensor_throughs[a.tensor] += a.is(CacheAccess::through);
          if (a.trace == kNoTrace) continue;
          ++trace_accesses[a.trace];
          trace_hits[a.trace] += a.is(CacheAccess::hit);
          trace_throughs[a.trace] += a.is(CacheAccess::through);
        }
        for (std::size_t t = 0; t < 3; ++t) {
          CHECK(x.tensors[t].accesses == tensor_accesses[t]);
          CHECK(x.tensors[t].hits == tensor_hits[t]);
          CHECK(x.tensors[t].write_throughs == tensor_throughs[t]);
        }
        for (std::size_t t = 0; t < 2; ++t) {
          CHECK(x.traces[t].accesses == trace_accesses[t]);
          CHECK(x.traces[t].hits == trace_hits[t]);
          CHECK(x.traces[t].write_throughs == trace_throughs[t]);
        }
        CHECK(x.total.accesses == n);
        CHECK(x.traces[0].accesses == n - 2000);
        CHECK(x.total.hits > n / 4);
        CHECK((x.total.write_throughs > 0) == !write_back);
      }
}

TEST_CASE("cache: lines 2^32 apart, and lines about 2^32, are different lines") {
  // The set-associative engines find a line by a 32-bit key in its set's block: the line
  // itself below 2^32 - 2, one key for every line past it (then the tags decide). Lines
  // that agree in their low 32 bits share a set of 2^k sets; each is its own line.
  const std::uint64_t far = std::uint64_t(1) << 32;
  for (const CachePolicy policy : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru}) {
    const int policy_index = int(policy);
    CAPTURE(policy_index);
    // 4 sets of 4 ways: lines 8, 8 + 2^32, 8 + 2^33 and 8 + 3 * 2^32 fill set 0 (each
    // misses), then each hits; a fifth such line misses.
    CacheConfig c = shape(4 * 4 * 64, 4, 64, policy);
    const std::vector<std::uint64_t> same_set = {8, 8 + far, 8 + 2 * far, 8 + 3 * far};
    std::vector<std::uint64_t> lines = same_set;
    lines.insert(lines.end(), same_set.begin(), same_set.end());
    lines.push_back(8 + 4 * far);
    CHECK(outcomes(c, lines_of(lines)) == "mmmmhhhhm");
    // About the key's edge (2^32 - 2 on), mixed with lines below it, in a small cache
    // and in one set: every count is the generic engine's.
    std::mt19937_64 rng(3);
    const std::vector<std::uint64_t> pool = {4,       far - 4,     far - 3,     far - 2, far - 1, far,
                                             far + 4, 2 * far - 2, 2 * far + 4, 4 * far, 12,     far + 12};
    std::vector<LineAccess> in;
    for (int i = 0; i < 4000; ++i) in.push_back({i, pool[rng() % pool.size()], kNoTrace, 0, rng() % 3 == 0});
    for (const std::uint64_t sets : {1, 4}) {
      CAPTURE(sets);
      CacheConfig d = shape(sets * 4 * 64, 4, 64, policy);
      CacheModel fast(d, 1, 0), generic(d, 1, 0, CacheEngine::generic);
      std::vector<CacheAccess> a, b;
      fast.run(in, a), generic.run(in, b);
      REQUIRE(a.size() == b.size());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < a.size(); ++i) differ += a[i].flags != b[i].flags || a[i].victim != b[i].victim;
      CHECK(differ == 0);
      // The same through count(), without the three Cs (the loops that count a stretch
      // of a key in a register), and through run() without them: the generic engine's hits.
      std::uint64_t hits = 0;
      for (const CacheAccess& x : b) hits += x.is(CacheAccess::hit);
      CacheConfig e = d;
      e.three_cs = false;
      CacheModel counted(e, 1, 0), emitted(e, 1, 0);
      std::vector<CacheAccess> f;
      counted.count(in), emitted.run(in, f);
      counted.finish(), emitted.finish();
      CHECK(counted.report().total.hits == hits);
      CHECK(emitted.report().total.hits == hits);
      REQUIRE(f.size() == b.size());
      differ = 0;
      for (std::size_t i = 0; i < f.size(); ++i) differ += f[i].flags != b[i].flags || f[i].victim != b[i].victim;
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("cache: the baseline loops count as the wide ones do") {
  // The simulation loops are made for x86-64's baseline and for AVX2 and BMI; a model
  // made with LOOPTRACE_BASELINE_ISA set runs the baseline ones. On a CPU without AVX2
  // both models run the baseline: the test then checks them against the generic engine
  // alone. Timesteps re-read a tile (so the repeats' loop runs) beside random lines.
  std::mt19937_64 rng(17);
  std::vector<LineAccess> in;
  std::vector<std::size_t> ends;
  for (std::int64_t t = 0; t < 400; ++t) {
    for (std::uint64_t k = 0; k < 80; ++k) in.push_back({t, 5000 + k * 7, 0, 0, false});
    for (int k = 0; k < 40; ++k) in.push_back({t, rng() % 30000, kNoTrace, 1, rng() % 3 == 0});
    if (t % 7 == 6) ends.push_back(in.size());
  }
  ends.push_back(in.size());
  for (const CachePolicy policy : {CachePolicy::lru, CachePolicy::fifo, CachePolicy::plru})
    for (const bool three_cs : {true, false})
      for (const bool write_back : {true, false}) {
        const int policy_index = int(policy);
        CAPTURE(policy_index);
        CAPTURE(three_cs);
        CAPTURE(write_back);
        CacheConfig c = shape(64 * 16 * 64, 16, 64, policy);
        c.three_cs = three_cs, c.write_back = write_back;
        // (The user's own setting of the variable is put back after.)
        const char* user_setting = std::getenv("LOOPTRACE_BASELINE_ISA");
        const std::optional<std::string> kept = user_setting ? std::optional<std::string>(user_setting) : std::nullopt;
        setenv("LOOPTRACE_BASELINE_ISA", "1", 1);
        CacheModel baseline(c, 2, 1), baseline_run(c, 2, 1);
        unsetenv("LOOPTRACE_BASELINE_ISA");
        CacheModel wide(c, 2, 1), wide_run(c, 2, 1), generic(c, 2, 1, CacheEngine::generic);
        if (kept) setenv("LOOPTRACE_BASELINE_ISA", kept->c_str(), 1);
        CHECK(!baseline.wide_loops());
        CHECK(!baseline_run.wide_loops());
#if defined(__x86_64__)
        // Which loops ran: the wide ones wherever the CPU has what they were made for.
        __builtin_cpu_init();
        const bool cpu_wide = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
                              __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
        CHECK(wide.wide_loops() == cpu_wide);
        CHECK(wide_run.wide_loops() == cpu_wide);
#endif
        std::vector<CacheAccess> a, b, g;
        for (std::size_t e = 0, at = 0; e < ends.size(); at = ends[e++]) {
          const auto batch = std::span(in).subspan(at, ends[e] - at);
          baseline.count(batch), wide.count(batch);
          baseline_run.run(batch, a), wide_run.run(batch, b);
        }
        generic.run(in, g);
        REQUIRE(a.size() == g.size());
        REQUIRE(b.size() == g.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < g.size(); ++i)
          differ += a[i].flags != g[i].flags || b[i].flags != g[i].flags || a[i].victim != g[i].victim ||
                    b[i].victim != g[i].victim;
        CHECK(differ == 0);
        for (CacheModel* m : {&baseline, &wide, &baseline_run, &wide_run, &generic}) m->finish();
        const CacheReport y = generic.report();
        for (const CacheModel* m : {&baseline, &wide, &baseline_run, &wide_run}) {
          const CacheReport x = m->report();
          for (std::size_t t = 0; t < 2; ++t) check_same(x.tensors[t], y.tensors[t]);
          check_same(x.traces[0], y.traces[0]);
        }
        CHECK(y.total.hits > y.total.accesses / 2);
      }
}
