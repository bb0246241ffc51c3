#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "helpers.hpp"
#include "looptrace/compile/time_odometer.hpp"

using looptrace::TimeLevel;
using looptrace::TimeOdometer;

namespace {

std::vector<std::int64_t> all_times(TimeOdometer o) {
  std::vector<std::int64_t> out;
  for (o.seek(o.first_time()); !o.done(); o.advance()) out.push_back(o.time());
  return out;
}

// seek(t) for every t around the odometer's span lands on the first time >= t that a
// linear scan of its times finds, or done() past the end.
void check_seek_everywhere(const TimeOdometer& proto, const std::vector<std::int64_t>& times) {
  for (std::int64_t t = times.front() - 3; t <= times.back() + 3; ++t) {
    CAPTURE(t);
    TimeOdometer o = proto;
    o.seek(t);
    std::int64_t expected = -1;
    for (std::int64_t x : times)
      if (x >= t) { expected = x; break; }
    if (expected < 0) {
      CHECK(o.done());
    } else {
      REQUIRE_FALSE(o.done());
      CHECK(o.time() == expected);
      // and advancing from there continues the scan
      std::vector<std::int64_t> rest;
      for (; !o.done(); o.advance()) rest.push_back(o.time());
      std::vector<std::int64_t> want;
      for (std::int64_t x : times)
        if (x >= t) want.push_back(x);
      CHECK(rest == want);
    }
  }
}

}  // namespace

TEST_CASE("odometer: two plain levels advance in row-major order") {
  // t = 10 + 4*j0 + j1, j0 < 3, j1 < 2
  TimeOdometer o(10, std::vector<looptrace::TimeLevel>{{3, 4, 0}, {2, 1, 0}});
  CHECK(o.size() == 6);
  CHECK(o.first_time() == 10);
  CHECK(o.last_time() == 19);
  CHECK(o.levels() == 2);
  REQUIRE_FALSE(o.done());
  CHECK(o.time() == 10);
  CHECK(o.innermost_remaining() == 2);
  CHECK(o.advance() == 1);  // j1: 0 -> 1
  CHECK(o.time() == 11);
  CHECK(o.innermost_remaining() == 1);
  CHECK(o.advance() == 0);  // carry into j0
  CHECK(o.time() == 14);
  CHECK(o.digit(0) == 1);
  CHECK(o.digit(1) == 0);
  CHECK(o.advance() == 1);
  CHECK(o.time() == 15);
  CHECK(o.advance() == 0);
  CHECK(o.time() == 18);
  CHECK(o.advance() == 1);
  CHECK(o.time() == 19);
  CHECK_FALSE(o.done());
  CHECK(o.advance() == 2);  // ran out: levels()
  CHECK(o.done());
  CHECK(all_times(o) == std::vector<std::int64_t>{10, 11, 14, 15, 18, 19});
}

TEST_CASE("odometer: no levels is one time at the base") {
  TimeOdometer o(7, std::vector<looptrace::TimeLevel>{});
  CHECK(o.size() == 1);
  CHECK(o.time() == 7);
  CHECK(o.first_time() == 7);
  CHECK(o.last_time() == 7);
  CHECK(o.advance() == 0);
  CHECK(o.done());
  o.seek(7);
  CHECK_FALSE(o.done());
  CHECK(o.time() == 7);
  o.seek(3);
  CHECK(o.time() == 7);
  o.seek(8);
  CHECK(o.done());
}

TEST_CASE("odometer: a Sequential branch's offset (branch 1 of a loop over [3 | 2])") {
  // An outer loop of 2 iterations, each a Sequential of a 3-step and a 2-step branch;
  // the leaf in branch 1 loops 2 times: t = 5*j0 + 3 + j1.
  TimeOdometer o(0, std::vector<looptrace::TimeLevel>{{2, 5, 3}, {2, 1, 0}});
  CHECK(o.first_time() == 3);
  CHECK(o.last_time() == 9);
  const std::vector<std::int64_t> times{3, 4, 8, 9};
  CHECK(all_times(o) == times);
  check_seek_everywhere(o, times);
}

TEST_CASE("odometer: offsets at two levels and a base") {
  // base 100; level 0: 2 x 10 (offset 2); level 1: 2 x 4 (offset 1); level 2: 3 x 1.
  // t = 100 + 10*j0 + 2 + 4*j1 + 1 + j2
  TimeOdometer o(100, std::vector<looptrace::TimeLevel>{{2, 10, 2}, {2, 4, 1}, {3, 1, 0}});
  const std::vector<std::int64_t> times{103, 104, 105, 107, 108, 109,
                                        113, 114, 115, 117, 118, 119};
  CHECK(o.size() == 12);
  CHECK(o.first_time() == 103);
  CHECK(o.last_time() == 119);
  CHECK(all_times(o) == times);
  check_seek_everywhere(o, times);
}

TEST_CASE("odometer: seek to every timestep of a small odometer, with gaps at every level") {
  // A leaf in the last branch of nested Sequentials: periods leave gaps before
  // (offsets) every level's iterations.
  TimeOdometer o(1, std::vector<looptrace::TimeLevel>{{3, 20, 4}, {2, 7, 1}, {2, 3, 2}, {1, 1, 0}});
  std::vector<std::int64_t> times;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) times.push_back(1 + 20 * a + 4 + 7 * b + 1 + 3 * c + 2);
  CHECK(all_times(o) == times);
  check_seek_everywhere(o, times);
}

TEST_CASE("odometer: seek backwards and past the end") {
  TimeOdometer o(0, std::vector<looptrace::TimeLevel>{{4, 3, 0}, {3, 1, 0}});
  o.seek(11);
  CHECK(o.time() == 11);
  o.seek(2);  // seeking back restarts the digits
  CHECK(o.time() == 2);
  CHECK(o.digit(0) == 0);
  CHECK(o.digit(1) == 2);
  o.seek(12);
  CHECK(o.done());
  o.seek(1000);
  CHECK(o.done());
  o.seek(-50);
  CHECK_FALSE(o.done());
  CHECK(o.time() == 0);
}

TEST_CASE("odometer: advance_innermost skips within the innermost digit") {
  TimeOdometer o(0, std::vector<looptrace::TimeLevel>{{3, 4, 0}, {3, 1, 0}});  // t = 4*j0 + j1
  CHECK(o.innermost_remaining() == 3);
  CHECK(o.advance_innermost(2) == 1);  // j1 0 -> 2
  CHECK(o.time() == 2);
  CHECK(o.innermost_remaining() == 1);
  CHECK(o.advance_innermost(1) == 0);  // carries
  CHECK(o.time() == 4);
  CHECK(o.advance_innermost(3) == 0);  // j1 0 -> 2 then carry
  CHECK(o.time() == 8);
  CHECK(o.advance_innermost(3) == 2);  // the last run: done
  CHECK(o.done());
}

TEST_CASE("odometer: the leaves of a compiled Sequential match their times") {
  // simple_fused: nA (4) x Sequential[EinsumA: nI (3), EinsumB: nB (2)] = 20 steps.
  const auto s = th::compile_corpus({"simple_fused.workload.yaml", "simple_fused.mapping.yaml"});
  CHECK(s.n_timesteps == 20);
  REQUIRE(s.leaves.size() == 2);
  std::vector<std::int64_t> a, b;
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 3; ++j) a.push_back(5 * k + j);
    for (int j = 0; j < 2; ++j) b.push_back(5 * k + 3 + j);
  }
  CHECK(all_times(s.leaves[0].odometer()) == a);
  CHECK(all_times(s.leaves[1].odometer()) == b);
  check_seek_everywhere(s.leaves[1].odometer(), b);
}
