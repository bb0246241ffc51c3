// The one model (issue 26): the half-open interval (interval.hpp), the tile cut
// (compile/tiling.hpp) and the window walk (compile/window_walk.hpp), each against
// hand-worked values and a brute force written here from SEMANTICS.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "compile/tiling.hpp"
#include "looptrace/compile/window_walk.hpp"
#include "looptrace/interval.hpp"

using looptrace::Interval;
using looptrace::TimeRange;

TEST_CASE("interval: emptiness, size, containment, intersection, overlap") {
  const Interval a{2, 7};
  CHECK_FALSE(a.empty());
  CHECK(a.size() == 5);
  CHECK(Interval{4, 4}.empty());
  CHECK(Interval{5, 3}.empty());
  CHECK(Interval{5, 3}.size() == 0);  // never negative
  CHECK(a.contains(2));
  CHECK_FALSE(a.contains(7));  // half-open
  CHECK(a.contains(Interval{2, 7}));
  CHECK(a.contains(Interval{3, 5}));
  CHECK_FALSE(a.contains(Interval{1, 5}));
  CHECK_FALSE(a.contains(Interval{6, 8}));
  CHECK(intersect(a, Interval{5, 10}) == Interval{5, 7});
  CHECK(intersect(a, Interval{0, 3}) == Interval{2, 3});
  CHECK(intersect(a, Interval{7, 9}).empty());  // touching: nothing in common
  CHECK(overlaps(a, Interval{6, 9}));
  CHECK_FALSE(overlaps(a, Interval{7, 9}));
  CHECK_FALSE(overlaps(Interval{0, 2}, a));
  CHECK(Interval::point(4) == Interval{4, 5});
  CHECK(a.shifted(-2) == Interval{0, 5});
}

TEST_CASE("interval: ordered by start, then end; a time range is not a coordinate range") {
  std::vector<TimeRange> w{{4, 9}, {0, 8}, {4, 6}, {0, 8}, {2, 3}};
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  CHECK(w == std::vector<TimeRange>{{0, 8}, {2, 3}, {4, 6}, {4, 9}});
  static_assert(!std::is_same_v<TimeRange, Interval>);
  static_assert(!std::is_convertible_v<TimeRange, Interval>);
  static_assert(std::is_trivially_copyable_v<Interval> && sizeof(Interval) == 16);
}

TEST_CASE("interval: append_merged keeps a sorted set disjoint and non-adjacent") {
  std::vector<Interval> s;
  append_merged(s, Interval{0, 2});
  append_merged(s, Interval{2, 4});  // touches: merged
  append_merged(s, Interval{3, 3});  // empty: nothing
  append_merged(s, Interval{6, 8});  // a gap: a new interval
  append_merged(s, Interval{7, 8});  // inside the last: nothing changes
  append_merged(s, Interval{7, 11});  // overlaps: extended
  CHECK(s == std::vector<Interval>{{0, 4}, {6, 11}});
  CHECK(looptrace::cardinality(s) == 9);
}

namespace {

looptrace::LoopLevel loop(std::int64_t count, std::int64_t initial, std::int64_t stride) {
  looptrace::LoopLevel l;
  l.count = count, l.initial_tile_shape = initial, l.tile_shape = stride;
  return l;
}

// Sub-tile j of [lo, hi) written out from SEMANTICS "Time": [0, initial), then strides.
Interval brute_sub_tile(Interval given, const looptrace::LoopLevel& l, std::int64_t j) {
  const std::int64_t start = j == 0 ? 0 : l.initial_tile_shape + (j - 1) * l.tile_shape;
  const std::int64_t end = l.initial_tile_shape + j * l.tile_shape;
  Interval t{given.from + start, std::min(given.to, given.from + end)};
  return t.empty() ? Interval{given.to, given.to} : t;
}

}  // namespace

TEST_CASE("tiling: sub-tiles, their unions and the runs of whole strides, against a brute force") {
  namespace tiling = looptrace::tiling;
  for (std::int64_t initial : {1, 2, 3, 5})
    for (std::int64_t stride : {1, 2, 3})
      for (std::int64_t width : {0, 1, 4, 7, 12}) {
        const auto l = loop(6, initial, stride);
        const Interval given{10, 10 + width};
        CAPTURE(initial);
        CAPTURE(stride);
        CAPTURE(width);
        for (std::int64_t j = 0; j < l.count; ++j) CHECK(tiling::sub_tile(given, l, j) == brute_sub_tile(given, l, j));
        // A union of consecutive sub-tiles is the hull of the non-empty ones.
        for (std::int64_t a = 0; a < l.count; ++a)
          for (std::int64_t b = a + 1; b <= l.count; ++b) {
            std::vector<Interval> u;
            for (std::int64_t j = a; j < b; ++j) append_merged(u, brute_sub_tile(given, l, j));
            const Interval want = u.empty() ? Interval{given.to, given.to} : u.front();
            CHECK(u.size() <= 1);
            CHECK(tiling::sub_tiles(given, l, {a, b}) == want);
          }
        // Non-empty sub-tiles the loop reaches.
        std::int64_t reached = 0;
        for (std::int64_t j = 0; j < l.count; ++j) reached += !brute_sub_tile(given, l, j).empty();
        CHECK(tiling::tiles_within(width, l) == std::max<std::int64_t>(reached, 1));
        // From a whole stride on, how many sub-tiles are the one before translated.
        for (std::int64_t j = 0; j < l.count; ++j) {
          const Interval t = brute_sub_tile(given, l, j);
          const bool whole = t.size() == stride && (j >= 1 || initial == stride);
          CHECK(tiling::whole_stride(l, j, t.size()) == whole);
          if (!whole) continue;
          std::int64_t run = 1;
          while (j + run < l.count && brute_sub_tile(given, l, j + run) == t.shifted(run * stride)) ++run;
          CHECK(tiling::whole_strides_from(width, l, j) == run);
        }
      }
}

TEST_CASE("window walk: the windows a clip sees, clipped, against every start of the odometer") {
  // Starts 3 + 10 a + 4 b (a < 3, b < 2): 3 7 13 17 23 27, each window 4 or 6 long.
  const std::vector<looptrace::TimeLevel> levels{{3, 10, 0}, {2, 4, 0}};
  const looptrace::TimeOdometer starts(3, levels);
  for (std::int64_t duration : {0, 4, 6})
    for (std::int64_t from = 0; from <= 32; from += 3)
      for (std::int64_t to = from - 1; to <= 34; to += 4) {
        const TimeRange clip{from, to};
        CAPTURE(duration);
        CAPTURE(from);
        CAPTURE(to);
        std::vector<TimeRange> want, got;
        std::vector<bool> want_whole, got_whole;
        for (std::int64_t a = 0; a < 3; ++a)
          for (std::int64_t b = 0; b < 2; ++b) {
            const std::int64_t s = 3 + 10 * a + 4 * b;
            if (duration <= 0 || clip.empty() || s + duration <= from || s >= to) continue;
            want.push_back({std::max(s, from), std::min(s + duration, to)});
            want_whole.push_back(s >= from && s + duration <= to);
          }
        for (looptrace::WindowWalk w(starts, duration, clip); !w.done(); w.advance()) {
          got.push_back(w.window());
          got_whole.push_back(w.whole());
        }
        CHECK(got == want);
        CHECK(got_whole == want_whole);
      }
  // Seeking to the first window that ends at or after t: the one at 7 ends at 11.
  looptrace::WindowWalk w(starts, 4, {10, 30});
  w.seek_ending_from(11);
  REQUIRE_FALSE(w.done());
  CHECK(w.start() == 7);
  CHECK(w.window() == TimeRange{10, 11});
  CHECK_FALSE(w.whole());
  w.advance();
  CHECK(w.window() == TimeRange{13, 17});
  CHECK(w.whole());
  CHECK(w.starts().digit(0) == 1);
  w.advance_innermost(2);  // 17, then 23: a carry on the last step
  CHECK(w.start() == 23);
  CHECK(looptrace::WindowWalk().done());
}
