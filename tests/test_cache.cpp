// Caches: the conv1d example at a 2-line cache with every miss named, each policy's
// victim by hand, the write policies, the three Cs, hierarchies, reuse distances
// against a plain LRU stack, and the shapes a cache refuses.
#include <doctest/doctest.h>

#include <random>

#include "helpers.hpp"
#include "looptrace/stages/cache.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/stages/reuse_distances.hpp"
#include "looptrace/stages/trace_pipeline.hpp"
#include "looptrace/stages/transfers.hpp"

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
