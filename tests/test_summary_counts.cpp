// Closed-form counts (looptrace/closed_form/counts.hpp) against a brute force that visits every
// timestep and every point, and against values worked out by hand.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "helpers.hpp"
#include "looptrace/closed_form/counts.hpp"

namespace {

using looptrace::LeafCounter;
using looptrace::LeafSchedule;
using looptrace::LeafTotals;
using looptrace::LoopLevel;
using looptrace::TimeRange;

struct Tile {
  std::int64_t lo, hi;
};

// Every timestep of `range`, every point: the tiles are cut as SEMANTICS.md says, the
// images projected into sets of coordinate tuples.
LeafTotals brute_force(const LeafSchedule& leaf, const TimeRange& range) {
  LeafTotals out;
  out.accesses.assign(leaf.tensors.size(), 0);
  looptrace::TimeOdometer odo = leaf.odometer();
  for (odo.seek(range.from); !odo.done() && odo.time() < range.to; odo.advance()) {
    std::vector<std::set<std::int64_t>> sets(leaf.variables.size());
    bool empty = false;
    for (std::size_t v = 0; v < leaf.variables.size(); ++v) {
      std::vector<Tile> tiles{{0, leaf.extent[v]}};
      for (const LoopLevel& l : leaf.loops) {
        if (l.variable != int(v)) continue;
        std::vector<Tile> next;
        const std::int64_t j0 = l.spatial ? 0 : odo.digit(std::size_t(l.time_level));
        const std::int64_t j1 = l.spatial ? l.count : j0 + 1;
        for (const Tile& t : tiles)
          for (std::int64_t j = j0; j < j1; ++j) {
            std::int64_t a = j == 0 ? 0 : l.initial_tile_shape + (j - 1) * l.tile_shape;
            std::int64_t b = j == 0 ? l.initial_tile_shape : a + l.tile_shape;
            Tile sub{t.lo + a, std::min(t.hi, t.lo + b)};
            if (sub.lo < sub.hi) next.push_back(sub);
          }
        tiles = next;
      }
      for (const Tile& t : tiles)
        for (std::int64_t x = t.lo; x < t.hi; ++x) sets[v].insert(x);
      empty = empty || sets[v].empty();
    }
    if (empty) continue;
    ++out.computing;
    if (out.first < 0) out.first = odo.time();
    out.last = odo.time();
    std::int64_t points = 1;
    for (const auto& s : sets) points *= std::int64_t(s.size());
    out.points += points;
    for (std::size_t k = 0; k < leaf.tensors.size(); ++k) {
      const auto& lt = leaf.tensors[k];
      std::set<std::vector<std::int64_t>> image;
      std::vector<std::int64_t> x(leaf.variables.size());
      auto visit = [&](auto&& self, std::size_t v) -> void {
        if (v == x.size()) {
          std::vector<std::int64_t> coords;
          for (std::size_t r = 0; r < lt.coefficients.size(); ++r) {
            std::int64_t c = lt.constants[r];
            for (std::size_t u = 0; u < x.size(); ++u) c += lt.coefficients[r][u] * x[u];
            coords.push_back(c);
          }
          image.insert(coords);
          return;
        }
        for (std::int64_t value : sets[v]) {
          x[v] = value;
          self(self, v + 1);
        }
      };
      visit(visit, 0);
      out.accesses[k] += std::int64_t(image.size());
    }
  }
  return out;
}

LeafTotals closed_form(const looptrace::Schedule& s, const LeafSchedule& leaf,
                       const std::vector<TimeRange>& ranges) {
  LeafCounter counter(s, leaf, std::vector<bool>(leaf.tensors.size(), true));
  LeafTotals out;
  for (const auto& r : ranges) counter.add(r, out);
  out.accesses.resize(leaf.tensors.size(), 0);
  return out;
}

void check_same(const LeafTotals& got, const LeafTotals& want, const std::string& what) {
  INFO(what);
  CHECK(got.accesses == want.accesses);
  CHECK(got.points == want.points);
  CHECK(got.computing == want.computing);
  CHECK(got.first == want.first);
  CHECK(got.last == want.last);
}

// The whole schedule, every prefix-like cut, random windows and single timesteps.
void check_against_brute_force(const looptrace::Schedule& s, std::uint64_t seed, int windows = 25) {
  std::mt19937_64 rng(seed);
  const std::int64_t n = s.n_timesteps;
  std::vector<TimeRange> ranges{{0, n}, {0, n / 2}, {n / 3, n}, {1, std::max<std::int64_t>(1, n - 1)}};
  for (int i = 0; i < windows; ++i) {
    std::int64_t a = std::int64_t(rng() % std::uint64_t(n + 1)), b = std::int64_t(rng() % std::uint64_t(n + 1));
    if (a > b) std::swap(a, b);
    ranges.push_back({a, b});
    ranges.push_back({a, a + 1});
  }
  for (const auto& leaf : s.leaves)
    for (const auto& r : ranges)
      check_same(closed_form(s, leaf, {r}), brute_force(leaf, r),
                 leaf.einsum + " over [" + std::to_string(r.from) + ", " + std::to_string(r.to) + ")");
}

}  // namespace

TEST_CASE("counts: corpus specs, closed form equals brute force over any window") {
  using V = th::Defines;
  const std::vector<std::pair<std::vector<std::string>, V>> specs = {
      {{"conv1d.workload.yaml", "conv1d.mapping.yaml"}, {}},
      {{"conv2d.workload.yaml", "conv2d.mapping.yaml"}, {}},
      {{"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"}, {{"N_EINSUMS", 2}, {"M", 8}, {"KN", 4}}},
      {{"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"}, {{"N_EINSUMS", 2}, {"M", 8}, {"KN", 4}}},
      {{"matmuls.yaml", "matmul_spatial.mapping.yaml"}, {{"N_EINSUMS", 1}, {"M", 8}, {"KN", 4}}},
      {{"matmuls.yaml", "matmul_imperfect.mapping.yaml"}, {{"N_EINSUMS", 1}, {"M", 8}, {"KN", 7}}},
      {{"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"}, {}},
      {{"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"}, {}},
      {{"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}, {}},
      {{"simple_fused.workload.yaml", "simple_fused.mapping.yaml"}, {}},
  };
  std::uint64_t seed = 1;
  for (const auto& [files, vars] : specs) {
    INFO(files[1]);
    check_against_brute_force(th::compile_corpus(files, vars), seed++);
  }
}

TEST_CASE("counts: imperfect tiles by hand (10 rows in tiles of 4: 12 timesteps, 10 compute)") {
  const auto s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 10, k: 0 <= k < 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: B, projection: [m], output: True}
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 4}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)");
  REQUIRE(s.n_timesteps == 12);
  // t = 4 * j0 + j1; the last outer tile is [8, 10), so t = 10, 11 are empty. Each
  // computing timestep touches one row: 3 elements of A (k is not tiled), 1 of B.
  LeafTotals all = closed_form(s, s.leaves[0], {{0, 12}});
  CHECK(all.accesses == std::vector<std::int64_t>{30, 10});
  CHECK(all.points == 30);
  CHECK(all.computing == 10);
  CHECK(all.first == 0);
  CHECK(all.last == 9);
  // [5, 11): t = 5..9 compute.
  LeafTotals mid = closed_form(s, s.leaves[0], {{5, 11}});
  CHECK(mid.accesses == std::vector<std::int64_t>{15, 5});
  CHECK(mid.first == 5);
  CHECK(mid.last == 9);
  // [10, 12): nothing computes.
  LeafTotals none = closed_form(s, s.leaves[0], {{10, 12}});
  CHECK(none.computing == 0);
  CHECK(none.first == -1);
  CHECK(none.last == -1);
  CHECK(none.accesses == std::vector<std::int64_t>{0, 0});
}

TEST_CASE("counts: halos, strides and shared variables by hand") {
  // I[p + r]: p in tiles of 2 (3 tiles of [0, 6)), r whole (3): the image of one tile
  // is 2 + 3 - 1 = 4 elements, so I has 3 x 4 = 12 accesses; W 3 x 3, O 3 x 2.
  const auto conv = th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 6, r: 0 <= r < 3}
  einsums:
  - name: C
    tensor_accesses:
    - {name: I, projection: {H: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
mapping:
  nodes:
  - !Temporal {rank_variable: p, tile_shape: 2}
  - !Compute {einsum: C}
)");
  LeafCounter c(conv, conv.leaves[0], {true, true, true});
  LeafTotals t;
  c.add({0, 3}, t);
  CHECK(t.accesses == std::vector<std::int64_t>{12, 9, 6});
  CHECK(t.points == 18);
  CHECK_FALSE(c.enumerated(0));  // a unit-coefficient sum of intervals is an interval

  // I[2p + r] with p tiles of 2 and r whole: {2p + r : p in {0, 1}, r in {0, 1, 2}} =
  // {0..4}: 5 elements per tile, 3 tiles: 15. The strided sum is enumerated.
  // D[m, m] (one variable read by two ranks) is one-to-one: 4 elements per tile of 4
  // rows, no enumeration. G[p, p + r] (ranks sharing variables) is enumerated: the
  // (p, p + r) are distinct, 2 x 3 = 6 per timestep.
  const auto mixed = th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 6, r: 0 <= r < 3, m: 0 <= m < 8}
  einsums:
  - name: C
    tensor_accesses:
    - {name: I, projection: {H: 2*p + r}}
    - {name: D, projection: {X: m, Y: m}}
    - {name: G, projection: {P: p, Q: p + r}}
    - {name: O, projection: [p, m], output: True}
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 4}
  - !Temporal {rank_variable: p, tile_shape: 2}
  - !Compute {einsum: C}
)");
  LeafCounter m(mixed, mixed.leaves[0], {true, true, true, true});
  LeafTotals u;
  m.add({0, mixed.n_timesteps}, u);
  REQUIRE(mixed.n_timesteps == 6);
  // I: 15 per m tile, 2 m tiles; D: 4 per (m tile, p tile), 6 of those; G: 6 x 6;
  // O: 2 x 4 x 6.
  CHECK(u.accesses == std::vector<std::int64_t>{30, 24, 36, 48});
  CHECK(m.enumerated(0));
  CHECK_FALSE(m.enumerated(1));
  CHECK(m.enumerated(2));
  CHECK_FALSE(m.enumerated(3));
  check_against_brute_force(mixed, 7);
}

TEST_CASE("counts: spatial loops, loops over a variable the leaf lacks, Sequential offsets") {
  const auto s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 7, n: 0 <= n < 5, k: 0 <= k < 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: {R: m + n}}
    - {name: B, projection: [n], output: True}
  - name: F
    tensor_accesses:
    - {name: B, projection: [n]}
    - {name: C, projection: [k, n], output: True}
mapping:
  nodes:
  - !Temporal {rank_variable: n, tile_shape: 2}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Spatial {rank_variable: m, tile_shape: 3, name: X, component: PE}
      - !Temporal {rank_variable: m, tile_shape: 2}
      - !Compute {einsum: E}
    - !Nested
      nodes:
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Temporal {rank_variable: n, tile_shape: 1, initial_tile_shape: 1}
      - !Compute {einsum: F}
)");
  check_against_brute_force(s, 11, 60);
}

TEST_CASE("counts: a range of 10^12 timesteps is counted without visiting them") {
  // The GEMM of bench/specs/huge_gemm at M = K = N = 10240: 2^40 timesteps, one
  // multiply-accumulate each; every trace has one access per timestep.
  const auto s = th::compile_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 10240, k: 0 <= k < 10240, n: 0 <= n < 10240}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
)", R"(
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 64}
  - !Temporal {rank_variable: n, tile_shape: 64}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  const std::int64_t n = std::int64_t(10240) * 10240 * 10240;
  REQUIRE(s.n_timesteps == n);
  LeafCounter c(s, s.leaves[0], {true, true, true});
  LeafTotals t;
  c.add({0, n}, t);
  CHECK(t.accesses == std::vector<std::int64_t>{n, n, n});
  CHECK(t.points == n);
  CHECK(t.first == 0);
  CHECK(t.last == n - 1);
  // An odd window: every timestep still computes once.
  LeafTotals w;
  c.add({123456789, 987654321012}, w);
  CHECK(w.computing == 987654321012 - 123456789);
  CHECK(w.accesses[0] == w.computing);
  CHECK(w.first == 123456789);
  CHECK(w.last == 987654321011);
}
