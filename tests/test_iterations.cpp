// Iteration traces: each computing leaf's tile origins per timestep, one record per
// spatial iteration, with origins worked out by hand from the mappings.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "helpers.hpp"
#include "looptrace/iterations.hpp"
#include "looptrace/stages/leaf_iterations.hpp"

using looptrace::Interval;
using looptrace::Iteration;
using looptrace::IterationStream;
using looptrace::Schedule;
using looptrace::TraceOptions;

namespace {

// (timestep, einsum, origin per variable) of every iteration.
using Record = std::tuple<std::int64_t, std::string, std::vector<std::int64_t>>;

std::vector<Record> records(const Schedule& s, const TraceOptions& o = {}) {
  std::vector<Record> out;
  IterationStream stream(s, o);
  for (const Iteration& it : stream) {
    std::vector<std::int64_t> origin;
    for (std::size_t v = 0; v < it.tile.size(); ++v) origin.push_back(it.origin(v));
    out.emplace_back(it.timestep, it.leaf->einsum, origin);
  }
  return out;
}

Schedule matmul(const std::string& mapping, std::int64_t kn) {
  return th::compile_corpus({"matmuls.yaml", mapping},
                            {{"N_EINSUMS", std::int64_t(1)}, {"M", std::int64_t(8)}, {"KN", kn}});
}

// Two rows of 7, the 7 spread over processing elements 3 wide: tiles [0,3) [3,6) [6,7).
const char* kSpatialImperfect = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2, n: 0 <= n < 7}
  einsums:
  - B[m, n] = A[m, n]
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, B]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Spatial {rank_variable: n, tile_shape: 3, name: X, component: PE}
  - !Compute {einsum: B, component: MAC}
)";

}  // namespace

TEST_CASE("iterations: conv1d origins follow the p, r odometer, one per timestep") {
  Schedule s = th::compile_text(th::kConv1d);
  auto all = records(s);
  REQUIRE(all.size() == 24);  // 8 values of p x 3 of r
  CHECK(s.leaves[0].variables == std::vector<std::string>{"p", "r"});
  for (std::int64_t t = 0; t < 24; ++t)
    CHECK(all[std::size_t(t)] == Record{t, "Conv", {t / 3, t % 3}});
}

TEST_CASE("iterations: a spatial loop gives one record per processing element") {
  // m in tiles of 2 (4 iterations), n0 one by one (4), n1 over 4 PEs of width 1.
  Schedule s = matmul("matmul_spatial.mapping.yaml", 4);
  auto all = records(s);
  REQUIRE(all.size() == 16 * 4);
  const auto& vars = s.leaves[0].variables;
  REQUIRE(vars == std::vector<std::string>{"m", "n0", "n1"});
  for (std::int64_t pe = 0; pe < 4; ++pe) {
    CHECK(all[std::size_t(pe)] == Record{0, "Matmul0", {0, 0, pe}});
    // t = 5: the second m tile (origin 2), n0 = 1.
    CHECK(all[std::size_t(5 * 4 + pe)] == Record{5, "Matmul0", {2, 1, pe}});
  }
}

TEST_CASE("iterations: imperfect tiles start where the partial tiles start") {
  // m: 8 in tiles of 3 then 1 -> the last outer tile [6, 8) has no third row; n0 (7)
  // in a first tile of 3, then tiles of 2 -> origins 0, 3, 5.
  Schedule s = matmul("matmul_imperfect.mapping.yaml", 7);
  auto all = records(s);
  REQUIRE(all.size() == 8 * 3);
  CHECK(all[1] == Record{1, "Matmul0", {0, 3, 0}});
  CHECK(all[2] == Record{2, "Matmul0", {0, 5, 0}});
  CHECK(all.back() == Record{23, "Matmul0", {7, 5, 0}});  // 18 + 3 + 2; 24..26 compute nothing

  IterationStream stream(s);
  auto it = stream.begin();
  const Iteration* second = &*++it;
  CHECK(second->tile[1].from == 3);
  CHECK(second->tile[1].to == 5);
  CHECK(second->tile[2].from == 0);  // n1 is left whole
  CHECK(second->tile[2].to == 7);
}

TEST_CASE("iterations: spatial sub-tiles of an imperfect split, and LeafIterations::spatial_tiles") {
  Schedule s = th::compile_text(kSpatialImperfect);
  auto all = records(s);
  REQUIRE(all.size() == 6);
  CHECK(all[0] == Record{0, "B", {0, 0}});
  CHECK(all[1] == Record{0, "B", {0, 3}});
  CHECK(all[2] == Record{0, "B", {0, 6}});
  CHECK(all[5] == Record{1, "B", {1, 6}});

  looptrace::LeafIterations leaf(s, 0);
  auto tiles = leaf.spatial_tiles(1);
  REQUIRE(tiles.size() == 3);
  CHECK(tiles[2].from == 6);
  CHECK(tiles[2].to == 7);
  // The merged tile covers exactly the union of the sub-tiles.
  REQUIRE(leaf.tile()[1].size() == 1);
  CHECK(leaf.tile()[1][0].from == 0);
  CHECK(leaf.tile()[1][0].to == 7);
}

TEST_CASE("iterations: windows, prefixes and the Einsum filter select like the trace") {
  Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                  {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(8)}, {"KN", std::int64_t(4)}});
  auto all = records(s);
  CHECK(all.size() == std::size_t(s.n_timesteps));  // one leaf computes per timestep

  TraceOptions window;
  window.from = 30, window.to = 34;
  auto part = records(s, window);
  REQUIRE(part.size() == 4);
  // Matmul0 of m = 0 ends at 16; Matmul1 of m = 0 runs [16, 32); m = 1 starts at 32.
  CHECK(part[0] == Record{30, "Matmul1", {0, 3, 2}});
  CHECK(part[2] == Record{32, "Matmul0", {1, 0, 0}});

  TraceOptions only;
  only.einsums = {"Matmul1"};
  auto ones = records(s, only);
  CHECK(ones.size() == 8 * 16);
  for (const auto& r : ones) CHECK(std::get<1>(r) == "Matmul1");

  TraceOptions prefix;
  prefix.max_timesteps = 3;
  CHECK(records(s, prefix).size() == 3);
}
