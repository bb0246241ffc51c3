#include <doctest/doctest.h>

#include <string>

#include "helpers.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/closed_form/summary.hpp"

using looptrace::compile_schedule;
using looptrace::Schedule;
using looptrace::summarize;
using looptrace::TraceOptions;

namespace {

std::vector<std::int64_t> times_of(const looptrace::TimeOdometer& proto) {
  std::vector<std::int64_t> out;
  for (auto o = proto; !o.done(); o.advance()) out.push_back(o.time());
  return out;
}

std::vector<std::int64_t> window_starts(const looptrace::StorageWindows& w) {
  return times_of(w.starts());
}

// One Einsum B[m] = A[m] over `0 <= m < M` and the given mapping nodes.
Schedule copy_with(int m, const std::string& nodes) {
  return th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < " + std::to_string(m) +
                          "}\n  einsums:\n  - B[m] = A[m]\nmapping:\n  nodes:\n" + nodes);
}

// Two Einsums under an outer loop over x and a split (`!Sequential`, `!Pipeline`, ...):
// EA over x (2) and a (4), EB over b (3) only.
const char* kSplit = R"(
workload:
  iteration_space_shape: {a: 0 <= a < 4, b: 0 <= b < 3, x: 0 <= x < 2}
  einsums:
  - name: EA
    tensor_accesses:
    - {name: A, projection: [x, a], output: True}
  - name: EB
    tensor_accesses:
    - {name: B, projection: [b], output: True}
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B]}
  - !Temporal {rank_variable: x, tile_shape: 1}
  - !{{SPLIT}}
    nodes:
    - !Storage {component: Split, tensors: [A, B]}
    - !Nested
      nodes:
      - !Temporal {rank_variable: a, tile_shape: 1}
      - !Compute {einsum: EA}
    - !Nested
      nodes:
      - !Storage {component: BranchB, tensors: [B]}
      - !Temporal {rank_variable: b, tile_shape: 1}
      - !Storage {component: Inner, tensors: [B]}
      - !Compute {einsum: EB}
)";

const looptrace::StorageWindows& storage(const Schedule& s, const std::string& level) {
  for (const auto& w : s.storages)
    if (w.level == level) return w;
  FAIL("no storage level " << level);
  return s.storages.front();
}

}  // namespace

TEST_CASE("schedule: imperfect tiles (m = 8 in tiles of 3) still take every iteration") {
  const Schedule s = copy_with(8,
                               "  - !Temporal {rank_variable: m, tile_shape: 3}\n"
                               "  - !Temporal {rank_variable: m, tile_shape: 1}\n"
                               "  - !Compute {einsum: B}\n");
  REQUIRE(s.leaves.size() == 1);
  REQUIRE(s.leaves[0].loops.size() == 2);
  CHECK(s.leaves[0].loops[0].count == 3);  // 3, 3, 2
  CHECK(s.leaves[0].loops[1].count == 3);  // the tile of 3 it is given, in 1s
  CHECK(s.n_timesteps == 9);
  const auto sum = summarize(s);
  CHECK(sum.n_points == 8);  // the ninth step's point (m = 8) is past the extent
  REQUIRE(sum.einsum_timespans.size() == 1);
  CHECK(sum.einsum_timespans[0].first == 0);
  CHECK(sum.einsum_timespans[0].end == 8);  // the last step computes nothing
  CHECK(s.tensors.at(std::size_t(s.find_tensor("A"))).shape == std::vector<std::int64_t>{8});
  const auto rows = th::collect(s);
  CHECK(th::elements_at(s, rows, 7, "B", "A") == std::vector<std::int64_t>{7});
  CHECK(th::elements_at(s, rows, 8, "B", "A").empty());
}

TEST_CASE("schedule: initial_tile_shape 3 then 2") {
  const char* nodes =
      "  - !Temporal {rank_variable: m, tile_shape: 2, initial_tile_shape: 3}\n"
      "  - !Compute {einsum: B}\n";
  SUBCASE("over 7: [0, 3), [3, 5), [5, 7)") {
    const Schedule s = copy_with(7, nodes);
    CHECK(s.leaves[0].loops[0].count == 3);
    CHECK(s.n_timesteps == 3);
    const auto rows = th::collect(s);
    CHECK(th::elements_at(s, rows, 0, "B", "A") == std::vector<std::int64_t>{0, 1, 2});
    CHECK(th::elements_at(s, rows, 1, "B", "A") == std::vector<std::int64_t>{3, 4});
    CHECK(th::elements_at(s, rows, 2, "B", "A") == std::vector<std::int64_t>{5, 6});
  }
  SUBCASE("over 8: 1 + ceil(5 / 2) = 4, the last tile partial") {
    const Schedule s = copy_with(8, nodes);
    CHECK(s.leaves[0].loops[0].count == 4);
    CHECK(s.n_timesteps == 4);
    CHECK(th::elements_at(s, th::collect(s), 3, "B", "A") == std::vector<std::int64_t>{7});
  }
  SUBCASE("over 2: one tile smaller than the first") {
    const Schedule s = copy_with(2, nodes);
    CHECK(s.leaves[0].loops[0].count == 1);
    CHECK(th::elements_at(s, th::collect(s), 0, "B", "A") == std::vector<std::int64_t>{0, 1});
  }
  SUBCASE("an inner loop is given the larger of the outer loop's two tile sizes") {
    // outer: tiles [0, 5), [5, 7) (initial 5, stride 4): 2 iterations; inner: 5 in 1s.
    const Schedule s = copy_with(7,
                                 "  - !Temporal {rank_variable: m, tile_shape: 4, initial_tile_shape: 5}\n"
                                 "  - !Temporal {rank_variable: m, tile_shape: 1}\n"
                                 "  - !Compute {einsum: B}\n");
    CHECK(s.leaves[0].loops[0].count == 2);
    CHECK(s.leaves[0].loops[1].count == 5);
    CHECK(s.n_timesteps == 10);
    CHECK(summarize(s).n_points == 7);
    const auto rows = th::collect(s);
    CHECK(th::elements_at(s, rows, 6, "B", "A") == std::vector<std::int64_t>{6});
    CHECK(th::elements_at(s, rows, 7, "B", "A").empty());
  }
}

TEST_CASE("schedule: a Sequential lasts the sum of its branches") {
  const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string("Sequential")}});
  CHECK(s.n_timesteps == 14);  // 2 x (4 + 3)
  REQUIRE(s.leaves.size() == 2);
  CHECK(times_of(s.leaves[0].odometer()) == std::vector<std::int64_t>{0, 1, 2, 3, 7, 8, 9, 10});
  CHECK(times_of(s.leaves[1].odometer()) == std::vector<std::int64_t>{4, 5, 6, 11, 12, 13});
  const auto sum = summarize(s);
  REQUIRE(sum.einsum_timespans.size() == 2);
  CHECK(sum.einsum_timespans[0].einsum == "EA");
  CHECK(sum.einsum_timespans[0].end == 11);
  CHECK(sum.einsum_timespans[1].first == 4);
  CHECK(sum.einsum_timespans[1].end == 14);
}

TEST_CASE("schedule: a Pipeline or Parallel lasts its longest branch") {
  for (const char* split : {"Pipeline", "Parallel"}) {
    CAPTURE(split);
    const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string(split)}});
    CHECK(s.n_timesteps == 8);  // 2 x max(4, 3)
    CHECK(times_of(s.leaves[1].odometer()) == std::vector<std::int64_t>{0, 1, 2, 4, 5, 6});
    // Both leaves compute at timestep 0: EA first (tree order).
    const auto rows = th::collect(s);
    REQUIRE(rows.size() >= 2);
    CHECK(std::get<1>(rows[0]) == std::uint32_t(th::trace_index(s, "EA", "A")));
    CHECK(std::get<1>(rows[1]) == std::uint32_t(th::trace_index(s, "EB", "B")));
  }
}

TEST_CASE("schedule: a loop over a variable the leaf lacks drives nothing there but repeats it") {
  const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string("Sequential")}});
  const auto& eb = s.leaves.at(1);
  REQUIRE(eb.loops.size() == 2);
  CHECK(eb.loops[0].variable == -1);  // x: EB has no x
  CHECK(eb.loops[0].count == 2);
  const auto rows = th::collect(s);
  CHECK(th::elements_at(s, rows, 4, "EB", "B") == std::vector<std::int64_t>{0});
  CHECK(th::elements_at(s, rows, 11, "EB", "B") == std::vector<std::int64_t>{0});
  CHECK(th::elements_at(s, rows, 13, "EB", "B") == std::vector<std::int64_t>{2});
  // EA: A[x, a] at t = 7x + a: element 4x + a
  CHECK(th::elements_at(s, rows, 9, "EA", "A") == std::vector<std::int64_t>{6});
}

TEST_CASE("schedule: nested splits add up (a Pipeline inside a Sequential)") {
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {a: 0 <= a < 4, b: 0 <= b < 3, c: 0 <= c < 5}
  einsums:
  - A[a] = Z[a]
  - "B[b] = Z[A: b]"
  - "C[c] = Z[A: c]"
mapping:
  nodes:
  - !Sequential
    nodes:
    - !Pipeline
      nodes:
      - !Nested
        nodes:
        - !Temporal {rank_variable: a, tile_shape: 1}
        - !Compute {einsum: A}
      - !Nested
        nodes:
        - !Temporal {rank_variable: b, tile_shape: 1}
        - !Compute {einsum: B}
    - !Nested
      nodes:
      - !Temporal {rank_variable: c, tile_shape: 2}
      - !Compute {einsum: C}
    - !Compute {einsum: A}
)");
  // max(4, 3) + 3 (c: 5 in 2s) + 1
  CHECK(s.n_timesteps == 8);
  REQUIRE(s.leaves.size() == 4);
  CHECK(times_of(s.leaves[2].odometer()) == std::vector<std::int64_t>{4, 5, 6});
  CHECK(times_of(s.leaves[3].odometer()) == std::vector<std::int64_t>{7});
  // The last leaf has no loop over a: it touches all of A at once.
  CHECK(th::elements_at(s, th::collect(s), 7, "A", "A") == std::vector<std::int64_t>{0, 1, 2, 3});
}

TEST_CASE("schedule: spatial loops add no time") {
  const std::string& w = th::kRowsWorkload;
  SUBCASE("a spatial loop then a temporal one over another variable") {
    const Schedule s = th::compile_text2(w, R"(
mapping:
  nodes:
  - !Spatial {rank_variable: m, tile_shape: 2}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: E}
)");
    CHECK(s.leaves[0].loops[0].spatial);
    CHECK(s.leaves[0].loops[0].count == 4);
    CHECK(s.leaves[0].time_levels.size() == 1);
    CHECK(s.n_timesteps == 4);
    const auto sum = summarize(s);
    CHECK(sum.n_points == 32);
    // B[m] is read by every processing element at every step: 8 per step, 32 in all
    CHECK(sum.traces.at(1).n_accesses == 32);
    const auto rows = th::collect(s);
    CHECK(th::elements_at(s, rows, 1, "E", "A") ==
          std::vector<std::int64_t>{1, 5, 9, 13, 17, 21, 25, 29});
  }
}

// Regression: each spatial iteration's tile is cut by the inner loop ([0, 4) and [4, 8)
// were once merged first, so step 1 touched m = 1 only, not m in {1, 5}).
TEST_CASE("schedule: a temporal loop inside a spatial one over the same variable") {
  const std::string& w = th::kRowsWorkload;
  SUBCASE("a temporal loop inside a spatial one over the same variable") {
    // m in 2 spatial tiles of 4, each walked in 1s: at step j, m in {j, 4 + j}
    const Schedule s = th::compile_text2(w, R"(
mapping:
  nodes:
  - !Spatial {rank_variable: m, tile_shape: 4}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)");
    CHECK(s.n_timesteps == 4);
    const auto sum = summarize(s);
    CHECK(sum.n_points == 32);
    CHECK(sum.traces.at(0).n_accesses == 32);
    CHECK(sum.traces.at(1).n_accesses == 8);
    const auto rows = th::collect(s);
    CHECK(th::elements_at(s, rows, 1, "E", "B") == std::vector<std::int64_t>{1, 5});
    CHECK(th::elements_at(s, rows, 3, "E", "B") == std::vector<std::int64_t>{3, 7});
    CHECK(th::elements_at(s, rows, 3, "E", "A") ==
          std::vector<std::int64_t>{12, 13, 14, 15, 28, 29, 30, 31});
  }
  SUBCASE("an imperfect spatial loop") {
    // m = 8 in spatial tiles of 3: [0,3) [3,6) [6,8); with an inner temporal m loop of 1s
    // over the tile of 3: step 2 touches m in {2, 5} (8 is past the extent).
    const Schedule s = th::compile_text2(w, R"(
mapping:
  nodes:
  - !Spatial {rank_variable: m, tile_shape: 3}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)");
    CHECK(s.leaves[0].loops[0].count == 3);
    CHECK(s.n_timesteps == 3);
    const auto rows = th::collect(s);
    CHECK(th::elements_at(s, rows, 0, "E", "B") == std::vector<std::int64_t>{0, 3, 6});
    CHECK(th::elements_at(s, rows, 2, "E", "B") == std::vector<std::int64_t>{2, 5});
  }
}

TEST_CASE("schedule: tile windows of a Storage inside a Nested, after loops") {
  const Schedule s = th::compile_text(th::kConv1d);
  CHECK(s.memory_levels == std::vector<std::string>{"MainMemory", "GlobalBuffer"});
  const auto& main = storage(s, "MainMemory");
  CHECK(main.duration == 24);
  CHECK(window_starts(main) == std::vector<std::int64_t>{0});
  const auto& gb = storage(s, "GlobalBuffer");
  CHECK(gb.duration == 3);  // the r loop after it
  CHECK(window_starts(gb) == std::vector<std::int64_t>{0, 3, 6, 9, 12, 15, 18, 21});
  const auto sum = summarize(s);
  CHECK(th::windows_of(sum.tile_lifetime("MainMemory", "W")) == th::Windows{{0, 24}});
  CHECK(th::windows_of(sum.tile_lifetime("GlobalBuffer", "I")) ==
        th::Windows{{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 18}, {18, 21}, {21, 24}});
  CHECK(sum.tile_lifetime("GlobalBuffer", "nope").empty());
  CHECK(sum.tile_lifetime("nope", "I").empty());

  // A Storage after two loops and before a third: a window per (m, n), lasting k.
  const Schedule t = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2, n: 0 <= n < 3, k: 0 <= k < 2}
  einsums:
  - Z[m, n] = A[m, k]
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Storage {component: Buf, tensors: [A]}
  - !Storage {tensors: [Z]}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  CHECK(t.memory_levels == std::vector<std::string>{"Buf"});  // no component: no level
  CHECK(th::windows_of(summarize(t).tile_lifetime("Buf", "A")) ==
        th::Windows{{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 10}, {10, 12}});
}

TEST_CASE("schedule: tile windows under a split") {
  SUBCASE("Sequential") {
    const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string("Sequential")}});
    CHECK(s.memory_levels == std::vector<std::string>{"DRAM", "Split", "BranchB", "Inner"});
    const auto sum = summarize(s);
    CHECK(th::windows_of(sum.tile_lifetime("DRAM", "A")) == th::Windows{{0, 14}});
    // directly under the split: the whole split, once per x
    CHECK(th::windows_of(sum.tile_lifetime("Split", "A")) == th::Windows{{0, 7}, {7, 14}});
    CHECK(th::windows_of(sum.tile_lifetime("Split", "B")) == th::Windows{{0, 7}, {7, 14}});
    // at the head of branch B: branch B's run
    CHECK(th::windows_of(sum.tile_lifetime("BranchB", "B")) == th::Windows{{4, 7}, {11, 14}});
    // after b's loop: one step each
    CHECK(th::windows_of(sum.tile_lifetime("Inner", "B")) ==
          th::Windows{{4, 5}, {5, 6}, {6, 7}, {11, 12}, {12, 13}, {13, 14}});
  }
  SUBCASE("Pipeline") {
    const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string("Pipeline")}});
    const auto sum = summarize(s);
    CHECK(th::windows_of(sum.tile_lifetime("Split", "B")) == th::Windows{{0, 4}, {4, 8}});
    CHECK(th::windows_of(sum.tile_lifetime("BranchB", "B")) == th::Windows{{0, 3}, {4, 7}});
  }
  SUBCASE("a prefix clips the windows and keeps an emptied entry") {
    const Schedule s = th::compile_text(kSplit, {{"SPLIT", std::string("Sequential")}});
    TraceOptions o;
    o.max_timesteps = 5;
    const auto sum = summarize(s, o);
    CHECK(sum.n_timesteps == 5);
    CHECK(sum.truncated);
    CHECK(th::windows_of(sum.tile_lifetime("Split", "A")) == th::Windows{{0, 5}});
    CHECK(th::windows_of(sum.tile_lifetime("BranchB", "B")) == th::Windows{{4, 5}});
    o.max_timesteps = 3;
    const auto early = summarize(s, o);
    REQUIRE(early.tile_windows.size() == 4);
    CHECK(early.tile_windows[2].level == "BranchB");
    REQUIRE(early.tile_windows[2].tensors.size() == 1);
    CHECK(early.tile_windows[2].tensors[0].tensor == "B");
    CHECK(early.tile_windows[2].tensors[0].windows.empty());
  }
}

TEST_CASE("schedule: tensor shapes, strides and halos") {
  SUBCASE("conv1d: I covers p + r") {
    const Schedule s = th::compile_text(th::kConv1d);
    CHECK(s.tensors.size() == 3);
    CHECK(s.tensors[0].name == "I");
    CHECK(s.tensors[0].shape == std::vector<std::int64_t>{10});  // 7 + 2 + 1
    CHECK(s.tensors[1].shape == std::vector<std::int64_t>{3});
    CHECK(s.tensors[2].shape == std::vector<std::int64_t>{8});
    CHECK(s.tensors[0].ranks == std::vector<std::string>{"P"});
    CHECK(s.traces.size() == 3);
    CHECK(s.traces[2].is_output);
  }
  SUBCASE("conv2d: row-major strides") {
    const Schedule s = th::compile_corpus({"conv2d.workload.yaml", "conv2d.mapping.yaml"});
    const auto& i = s.tensors.at(std::size_t(s.find_tensor("I")));
    CHECK(i.ranks == std::vector<std::string>{"C", "H", "W"});
    CHECK(i.shape == std::vector<std::int64_t>{2, 6, 6});  // H: 4 + 3 - 1, W: 5 + 2 - 1
    CHECK(i.strides == std::vector<std::int64_t>{36, 6, 1});
    CHECK(i.size == 72);
    const auto& f = s.tensors.at(std::size_t(s.find_tensor("F")));
    CHECK(f.shape == std::vector<std::int64_t>{3, 2, 3, 2});
    CHECK(f.strides == std::vector<std::int64_t>{12, 6, 2, 1});
    CHECK(s.tensors.at(std::size_t(s.find_tensor("O"))).shape == std::vector<std::int64_t>{3, 4, 5});
    CHECK(s.find_tensor("nope") == -1);
  }
  SUBCASE("the box of a sum constraint: p in [0, 27], r in [0, 2]") {
    const Schedule s = th::compile_text(R"(
workload:
  einsums:
  - name: Conv
    iteration_space_shape: ["0 <= p + r < 28", "0 <= r < 3"]
    tensor_accesses:
    - {name: I, projection: {P: p + r}}
    - {name: O, projection: [p], output: True}
mapping:
  nodes:
  - !Compute {einsum: Conv}
)");
    CHECK(s.tensors.at(0).shape == std::vector<std::int64_t>{30});
    CHECK(s.tensors.at(1).shape == std::vector<std::int64_t>{28});
  }
  SUBCASE("a reader's halo grows a tensor past its writer's box") {
    const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {h: 0 <= h < 8, p: 0 <= p < 8, r: 0 <= r < 3}
  einsums:
  - name: Make
    tensor_accesses:
    - {name: X, projection: [h]}
    - {name: I, projection: {H: h}, output: True}
  - name: Conv
    tensor_accesses:
    - {name: I, projection: {H: p + r}}
    - {name: O, projection: [p], output: True}
mapping:
  nodes:
  - !Sequential
    nodes:
    - !Compute {einsum: Make}
    - !Compute {einsum: Conv}
)");
    const auto& i = s.tensors.at(std::size_t(s.find_tensor("I")));
    CHECK(i.shape == std::vector<std::int64_t>{10});  // max(8, 7 + 2 + 1)
    CHECK(i.ranks == std::vector<std::string>{"H"});
    CHECK(s.tensors[0].name == "X");  // order of first trace
    CHECK(s.tensors[1].name == "I");
  }
  SUBCASE("a writer's box is the nominal shape when the readers reach less") {
    const Schedule s = th::compile_text(R"(
workload:
  einsums:
  - name: Make
    iteration_space_shape: ["0 <= m < 6"]
    tensor_accesses:
    - {name: T, projection: [m], output: True}
  - name: Use
    iteration_space_shape: ["0 <= m < 4"]
    tensor_accesses:
    - {name: T, projection: [m]}
    - {name: U, projection: [m], output: True}
mapping:
  nodes:
  - !Sequential
    nodes:
    - !Compute {einsum: Use}
    - !Compute {einsum: Make}
)");
    CHECK(s.tensors.at(std::size_t(s.find_tensor("T"))).shape == std::vector<std::int64_t>{6});
    CHECK(s.tensors.at(0).name == "T");  // Use comes first in the tree
    CHECK(s.traces.at(0).einsum == "Use");
    CHECK(s.einsums == std::vector<std::string>{"Make", "Use"});  // workload order
    CHECK(s.find_einsum("Use") == 1);
  }
  SUBCASE("a strided projection 2*p + r") {
    const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 4, r: 0 <= r < 3}
  einsums:
  - "O[p] = I[H: 2*p + r]"
mapping:
  nodes:
  - !Compute {einsum: O}
)");
    CHECK(s.tensors.at(0).shape == std::vector<std::int64_t>{9});  // 2*3 + 2 + 1
  }
}

TEST_CASE("schedule errors name the node") {
  const char* w = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 2}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m], output: True}
)";
  SUBCASE("an undefined Einsum in !Compute") {
    const auto e = th::spec_error([&] {
      th::compile_text2(w, "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 1}\n"
                           "  - !Compute {einsum: F}\n");
    });
    CHECK(th::contains(e.message(), "Einsum 'F'"));
    CHECK(th::contains(e.message(), "does not define"));
    CHECK(th::contains(e.message(), "(it has: E)"));
    CHECK(e.where().file == "mapping.yaml");
    CHECK(e.where().line == 4);
  }
  SUBCASE("a loop over a rank variable the first Einsum below lacks") {
    const auto e = th::spec_error([&] {
      th::compile_text2(w, "mapping:\n  nodes:\n  - !Storage {tensors: [A], component: X}\n"
                           "  - !Temporal {rank_variable: q, tile_shape: 1}\n"
                           "  - !Compute {einsum: E}\n");
    });
    CHECK(th::contains(e.message(), "'q'"));
    CHECK(th::contains(e.message(), "Einsum 'E'"));
    CHECK(th::contains(e.message(), "m, n"));
    CHECK(e.where().line == 4);
  }
  SUBCASE("a Storage of a tensor no Einsum accesses") {
    const auto e = th::spec_error([&] {
      th::compile_text2(w, "mapping:\n  nodes:\n  - !Storage {tensors: [A, Q], component: X}\n"
                           "  - !Compute {einsum: E}\n");
    });
    CHECK(th::contains(e.message(), "'Q'"));
    CHECK(th::contains(e.message(), "no Einsum"));
    CHECK(e.where().line == 3);
  }
  SUBCASE("a loop directly under a split") {
    const auto e = th::spec_error([&] {
      th::compile_text2(w, "mapping:\n  nodes:\n  - !Sequential\n    nodes:\n"
                           "    - !Temporal {rank_variable: m, tile_shape: 1}\n"
                           "    - !Compute {einsum: E}\n");
    });
    CHECK(th::contains(e.message(), "under a split"));
    CHECK(e.where().line == 5);
  }
  SUBCASE("an Einsum that accesses one tensor twice") {
    const auto e = th::spec_error([] {
      th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                       "  - name: E\n    tensor_accesses:\n"
                       "    - {name: A, projection: [m]}\n"
                       "    - {name: A, projection: [m], output: True}\n"
                       "mapping:\n  nodes:\n  - !Compute {einsum: E}\n");
    });
    CHECK(th::contains(e.message(), "twice"));
    CHECK(e.where().line == 7);
  }
  SUBCASE("a projection that reaches negative coordinates") {
    const auto e = th::spec_error([] {
      th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                       "  - \"B[m] = A[M: m - 1]\"\n"
                       "mapping:\n  nodes:\n  - !Compute {einsum: B}\n");
    });
    CHECK(th::contains(e.message(), "negative"));
    CHECK(th::contains(e.message(), "'A'"));
  }
  SUBCASE("a tensor with different ranks in two Einsums") {
    const auto e = th::spec_error([] {
      th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 4}\n  einsums:\n"
                       "  - B[m] = A[m, n]\n  - C[m] = A[m]\n"
                       "mapping:\n  nodes:\n  - !Compute {einsum: B}\n");
    });
    // The front end refuses it (AccelForge's Workload._validate), before any compiling.
    CHECK(e.message() == "tensor 'A' has ranks [M] in Einsum 'C' but [M, N] in Einsum 'B'; "
                         "every access of a tensor names the same ranks");
  }
  SUBCASE("more than 2^63 timesteps") {
    const auto e = th::spec_error([] {
      th::compile_text(R"(
workload:
  iteration_space_shape:
    a: 0 <= a < 2147483648
    b: 0 <= b < 2147483648
    c: 0 <= c < 2147483648
  einsums:
  - Z[a, b, c] = Y[a]
mapping:
  nodes:
  - !Temporal {rank_variable: a, tile_shape: 1}
  - !Temporal {rank_variable: b, tile_shape: 1}
  - !Temporal {rank_variable: c, tile_shape: 1}
  - !Compute {einsum: Z}
)");
    });
    CHECK(th::contains(e.message(), "more than 2^63 timesteps"));
    CHECK(e.where().line >= 11);
    CHECK(e.where().line <= 13);
  }
  SUBCASE("2^62 timesteps are fine") {
    const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {a: 0 <= a < 2147483648, b: 0 <= b < 2147483648}
  einsums:
  - Z[a, b] = Y[a]
mapping:
  nodes:
  - !Temporal {rank_variable: a, tile_shape: 1}
  - !Temporal {rank_variable: b, tile_shape: 1}
  - !Compute {einsum: Z}
)");
    CHECK(s.n_timesteps == (std::int64_t(1) << 62));
    // a prefix of such a schedule is cheap
    TraceOptions o;
    o.max_timesteps = 3;
    CHECK(th::collect(s, o).size() == 6);
    TraceOptions late;
    late.from = (std::int64_t(1) << 62) - 2;
    const auto rows = th::collect(s, late);
    REQUIRE(rows.size() == 4);
    CHECK(std::get<0>(rows.back()) == (std::int64_t(1) << 62) - 1);
  }
}
