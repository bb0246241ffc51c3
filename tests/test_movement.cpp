// Data movement (SEMANTICS "Data movement"): the worked example, fused and unfused
// matmuls by hand, and invariants that tie the levels together.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "helpers.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/sinks/movement_report.hpp"
#include "looptrace/stages/window_traffic.hpp"
#include "looptrace/stream.hpp"

using namespace looptrace;

namespace {

const TensorMovement& at(const MovementReport& r, const std::string& level, const std::string& tensor) {
  for (const auto& l : r.levels)
    if (l.level == level)
      for (const auto& t : l.tensors)
        if (t.tensor == tensor) return t;
  FAIL("no movement for " << level << "/" << tensor);
  static TensorMovement none;
  return none;
}

const LevelMovement& level(const MovementReport& r, const std::string& name) {
  for (const auto& l : r.levels)
    if (l.level == name) return l;
  FAIL("no level " << name);
  static LevelMovement none;
  return none;
}

}  // namespace

TEST_CASE("movement: the conv1d worked example of SEMANTICS") {
  const Schedule s = th::compile_text(th::kConv1d);
  const MovementReport r = summarize_movement(s);
  REQUIRE(r.levels.size() == 2);
  CHECK(r.levels[0].level == "MainMemory");
  CHECK(r.levels[1].level == "GlobalBuffer");
  // GlobalBuffer: 8 windows [3p, 3p + 3); I's tile {p, p+1, p+2}, W's {0, 1, 2}, O's {p}.
  const auto& gi = at(r, "GlobalBuffer", "I");
  CHECK(gi.windows == 8);
  CHECK(gi.max_tile == 3);
  CHECK(gi.fills == 24);
  CHECK(gi.drains == 0);
  CHECK(!gi.home);
  CHECK(at(r, "GlobalBuffer", "W").fills == 24);
  CHECK(at(r, "GlobalBuffer", "W").max_tile == 3);
  const auto& go = at(r, "GlobalBuffer", "O");
  CHECK(go.fills == 0);
  CHECK(go.drains == 8);
  CHECK(go.max_tile == 1);
  CHECK(level(r, "GlobalBuffer").peak_footprint.value == 7);
  CHECK(level(r, "GlobalBuffer").peak_footprint.timestep == 0);
  // MainMemory is home to all three: one window [0, 24).
  const auto& mi = at(r, "MainMemory", "I");
  CHECK(mi.home);
  CHECK(mi.windows == 1);
  CHECK(mi.fills == 10);
  CHECK(at(r, "MainMemory", "W").fills == 3);
  CHECK(at(r, "MainMemory", "O").fills == 0);
  CHECK(at(r, "MainMemory", "O").drains == 8);
  CHECK(level(r, "MainMemory").peak_footprint.value == 21);
  CHECK(!level(r, "MainMemory").peak_footprint_bytes);  // no bits_per_value

  // A prefix of 7 cuts the third GlobalBuffer window to [6, 7).
  TraceOptions prefix;
  prefix.max_timesteps = 7;
  const MovementReport p = summarize_movement(s, prefix);
  CHECK(at(p, "GlobalBuffer", "I").windows == 3);
  CHECK(at(p, "GlobalBuffer", "I").fills == 3 + 3 + 1);  // p = 2 reads I[2] only at t = 6
  CHECK(at(p, "MainMemory", "I").fills == 4);            // p + r < 4 before t = 7
  CHECK(at(p, "GlobalBuffer", "O").drains == 3);
  TraceOptions sampled;
  sampled.sample_timesteps = 3;
  CHECK(th::contains(th::spec_error([&] { summarize_movement(s, sampled); }).message(), "--sample-timesteps"));
}

TEST_CASE("movement: an intermediate held on chip never reaches its home level") {
  // Two matmuls fused: T1 = T0 x W0 is written then read under GlobalBuffer; DRAM is
  // home to all. M = 4, KN = 4: each GlobalBuffer window is one m (a row).
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(4)}, {"KN", std::int64_t(4)}});
  const MovementReport r = summarize_movement(s);
  for (const auto& l : r.levels) {
    for (const auto& t : l.tensors) {
      CAPTURE(l.level);
      CAPTURE(t.tensor);
      if (t.tensor == "T1") {
        // Written by Matmul0 before Matmul1 reads it, in every window: never filled.
        CHECK(t.fills == 0);
        CHECK(t.drains == 16);
      }
      if (t.tensor == "T0" || t.tensor == "W0" || t.tensor == "W1") CHECK(t.drains == 0);
    }
  }
  // The home level fills exactly the inputs' elements, once each.
  const auto& dram = r.levels.front();
  for (const auto& t : dram.tensors) {
    CAPTURE(t.tensor);
    CHECK(t.home);
    CHECK(t.windows == 1);
    CHECK(t.fills == (t.tensor == "T0" || t.tensor == "W0" || t.tensor == "W1" ? 16 : 0));
  }
}

namespace {

// An independent model: for every Storage node, tensor and window (from the node's
// odometer), the elements the leaves below it access in the window, from the plain
// access list; fills are those first read (reads before writes within a timestep).
std::map<std::pair<std::string, std::string>, TensorMovement> brute_force(const Schedule& s) {
  const auto rows = th::collect(s);
  std::map<std::pair<std::string, std::string>, TensorMovement> out;
  for (std::size_t n = 0; n < s.storages.size(); ++n) {
    const StorageWindows& node = s.storages[n];
    for (TimeOdometer starts = node.starts(); !starts.done(); starts.advance()) {
      const std::int64_t from = starts.time(), to = from + node.duration;
      for (const auto& tensor : node.tensors) {
        std::map<std::int64_t, std::pair<std::int64_t, bool>> first;  // element -> (t, read first)
        std::set<std::int64_t> written;
        for (const auto& [t, trace, e] : rows) {
          const TraceInfo& info = s.traces[trace];
          if (t < from || t >= to || info.tensor != tensor) continue;
          bool below = false;
          for (const auto& leaf : s.leaves)
            if (leaf.einsum == info.einsum)
              below = below || std::find(leaf.storages.begin(), leaf.storages.end(), int(n)) != leaf.storages.end();
          if (!below) continue;
          auto [it, fresh] = first.try_emplace(e, t, !info.is_output);
          if (!fresh && it->second.first == t && !info.is_output) it->second.second = true;
          if (info.is_output) written.insert(e);
        }
        TensorMovement& m = out[{node.level, tensor}];
        ++m.windows;
        m.max_tile = std::max<std::int64_t>(m.max_tile, std::int64_t(first.size()));
        for (const auto& [e, f] : first) m.fills += f.second;
        m.drains += std::int64_t(written.size());
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("movement: streaming counts equal a brute-force model of the semantics") {
  const std::vector<std::vector<std::string>> cases = {
      {"conv1d.workload.yaml", "conv1d.mapping.yaml"},
      {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
      {"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"},
      {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"},
      {"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"},
      {"matvecs.yaml", "matvecs_pipeline.mapping.yaml"},
      {"matmuls.yaml", "matmul_spatial.mapping.yaml"},
      {"conv2d.workload.yaml", "conv2d.mapping.yaml"},
  };
  for (const auto& files : cases) {
    CAPTURE(files[1]);
    const Schedule s = th::compile_corpus(files, {{"N_EINSUMS", std::int64_t(3)}, {"M", std::int64_t(6)},
                                                  {"KN", std::int64_t(4)}});
    const auto want = brute_force(s);
    const MovementReport r = summarize_movement(s);
    std::size_t seen = 0;
    for (const auto& l : r.levels)
      for (const auto& t : l.tensors) {
        CAPTURE(l.level);
        CAPTURE(t.tensor);
        const auto it = want.find({l.level, t.tensor});
        REQUIRE(it != want.end());
        CHECK(t.windows == it->second.windows);
        CHECK(t.max_tile == it->second.max_tile);
        CHECK(t.fills == it->second.fills);
        CHECK(t.drains == it->second.drains);
        ++seen;
      }
    CHECK(seen == want.size());
  }
}

TEST_CASE("movement: listed elements agree with the counts, window by window") {
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(4)}, {"KN", std::int64_t(4)}});
  auto traffic = trace_pipeline(s, {}) | tile_windows() | window_traffic(true);
  std::int64_t closes = 0, opens = 0;
  for (auto events = traffic.next_batch(); !events.empty(); events = traffic.next_batch())
    for (const TileTraffic& t : events) {
      if (t.kind == TileTraffic::Kind::open) {
        ++opens;
        continue;
      }
      ++closes;
      CHECK(std::int64_t(t.filled.size()) == t.fills);
      CHECK(std::int64_t(t.drained.size()) == t.drains);
      CHECK(std::is_sorted(t.filled.begin(), t.filled.end()));
      CHECK(t.fills <= t.tile);
      CHECK(t.drains <= t.tile);
    }
  CHECK(opens == closes);
  CHECK(closes > 0);
}

TEST_CASE("movement: the peak tracker by hand") {
  // Windows [0, 10) of 5 and, inside it, [2, 4) of 3 and [4, 6) of 4, then [10, 12) of
  // 1: the sum peaks at 9 over [4, 6).
  PeakTracker p;
  p.open(0);
  p.open(2);
  p.close(2, 3);
  p.open(4);
  p.close(4, 4);
  p.close(0, 5);
  p.open(10);
  p.close(10, 1);
  CHECK(p.peak().value == 9);
  CHECK(p.peak().timestep == 4);
  // Half-open: [0, 2) and [2, 4) never add up.
  PeakTracker q;
  q.open(0);
  q.close(0, 6);
  q.open(2);
  q.close(2, 6);
  CHECK(q.peak().value == 6);
  CHECK(q.peak().timestep == 0);
}

TEST_CASE("movement: TileSet counts fills and drains, dense and hashed alike") {
  for (std::int64_t size : {std::int64_t(100), std::int64_t(1) << 40}) {
    CAPTURE(size);
    TileSet set(size);
    CHECK(set.touch(7, false));   // new, read first: a fill
    CHECK(!set.touch(7, false));  // nothing new
    CHECK(set.touch(7, true));    // first written: a drain too
    CHECK(!set.touch(7, true));
    CHECK(set.touch(9, true));    // written first: a drain, no fill
    CHECK(!set.touch(9, false));
    for (std::int64_t e = 20; e < 90; ++e) set.touch(e, false);  // grows the hash table
    std::vector<std::int64_t> filled, drained;
    const TileSet::Tally t = set.close(&filled, &drained);
    CHECK(t.tile == 72);
    CHECK(t.fills == 71);
    CHECK(t.drains == 2);
    CHECK(drained == std::vector<std::int64_t>{7, 9});
    CHECK(filled.front() == 7);
    CHECK(filled[1] == 20);
    // Emptied: the same elements are new again.
    CHECK(set.touch(9, false));
    CHECK(set.close().fills == 1);
  }
}

// The report without the fields that say how it was computed.
static std::string figures(const MovementReport& r) {
  nlohmann::ordered_json j = movement_json(r);
  j.erase("method");
  j.erase("enumerated");
  return j.dump();
}

TEST_CASE("movement: the closed form, the enumeration and its workers give the same report") {
  for (const auto& files : std::vector<std::vector<std::string>>{
           {"conv1d.workload.yaml", "conv1d.mapping.yaml"},
           {"conv2d.workload.yaml", "conv2d.mapping.yaml"},
           {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
           {"matmuls.yaml", "matmul_imperfect.mapping.yaml"},
           {"matmuls.yaml", "matmul_spatial.mapping.yaml"},
           {"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"},        // nested nodes of one level
           {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"},    // a writer and a reader interleaved
           {"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"},
           {"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}}) {
    CAPTURE(files[1]);
    const Schedule s = th::compile_corpus(files, {{"N_EINSUMS", std::int64_t(3)}, {"M", std::int64_t(6)},
                                                  {"KN", std::int64_t(4)}});
    for (const std::int64_t to : {s.n_timesteps, s.n_timesteps * 2 / 3}) {  // cut windows too
      CAPTURE(to);
      TraceOptions o;
      o.to = to;
      o.from = to < s.n_timesteps ? 1 : 0;
      const MovementReport closed = summarize_movement(s, o);
      CHECK(closed.method == MovementMethod::closed_form);
      // A !Pipeline's leaves that read and write one tensor at once, and an interleaved
      // window cut by the selection, in closed form too (FirstReads).
      CHECK(closed.enumerated.empty());
      const std::string one = figures(closed);
      for (int threads : {1, 2, 5}) {
        const MovementReport e = summarize_movement(s, o, MovementOptions{MovementMethod::enumerate, threads});
        CHECK(e.method == MovementMethod::enumerate);
        CHECK(figures(e) == one);
      }
    }
  }
}

TEST_CASE("movement: whole-tensor tiles in closed form, by hand") {
  // Z[m, n] = A[m, k] * B[k, n] at M = K = N = 10240: DRAM holds all three for the whole
  // run; GlobalBuffer keeps a 1024-row band of A and Z and all of B per window, and a
  // loop over k inside reads everything. 10^12 operations: enumeration would take hours.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 10240, k: 0 <= k < 10240, n: 0 <= n < 10240}
  einsums: ["Z[m, n] = A[m, k] * B[k, n]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, Z]}
  - !Temporal {rank_variable: m, tile_shape: 1024}
  - !Storage {component: GlobalBuffer, tensors: [A, B, Z]}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1024}
  - !Compute {einsum: Z}
)");
  const MovementReport r = summarize_movement(s);
  CHECK(r.enumerated.empty());
  REQUIRE(r.levels.size() == 2);
  const std::int64_t all = 10240LL * 10240, band = 1024LL * 10240;
  const LevelMovement& dram = r.levels[0];
  CHECK(dram.tensors[0].fills == all);   // A
  CHECK(dram.tensors[1].fills == all);   // B
  CHECK(dram.tensors[2].fills == 0);     // Z: written first
  CHECK(dram.tensors[2].drains == all);
  CHECK(dram.peak_footprint.value == 3 * all);
  const LevelMovement& gb = r.levels[1];
  for (const auto& t : gb.tensors) CHECK(t.windows == 10);
  CHECK(gb.tensors[0].max_tile == band);
  CHECK(gb.tensors[0].fills == all);      // each band once
  CHECK(gb.tensors[1].fills == 10 * all);  // all of B per window
  CHECK(gb.tensors[2].drains == all);
  CHECK(gb.peak_footprint.value == 2 * band + all);
  CHECK(gb.peak_footprint.timestep == 0);

  // A prefix cuts DRAM's window and the third band's: the first 2.5 bands' worth of
  // (k, n) steps. Per GlobalBuffer window: 10240 k x 10 n tiles = 102400 timesteps.
  TraceOptions o;
  o.max_timesteps = 102400 * 2 + 51200;  // half of window 2: k < 5120
  const MovementReport p = summarize_movement(s, o);
  CHECK(p.enumerated.empty());
  CHECK(p.levels[1].tensors[0].windows == 3);
  CHECK(p.levels[1].tensors[0].fills == 2 * band + 1024LL * 5120);  // A[m band, k < 5120]
  CHECK(p.levels[1].tensors[1].fills == 2 * all + 5120LL * 10240);
  CHECK(p.levels[0].tensors[0].fills == 2 * band + 1024LL * 5120);
}

TEST_CASE("movement: a !Spatial split tiled again in time is a lattice, in closed form") {
  // B[x] = A[x], x < 8: 4 PEs take 2 each, and each walks its 2 in time, Buf inside. At
  // window j (j < 2) the PEs together touch {j, j + 2, j + 4, j + 6}: 4 elements at
  // stride 2, not a range.
  const Schedule s = th::compile_corpus({"retiled_copy.yaml"});
  const MovementReport r = summarize_movement(s);
  CHECK(r.method == MovementMethod::closed_form);
  CHECK(r.enumerated.empty());
  const TensorMovement& a = at(r, "Buf", "A");
  CHECK(a.windows == 2);
  CHECK(a.max_tile == 4);
  CHECK(a.fills == 8);
  CHECK(at(r, "Buf", "B").drains == 8);
  CHECK(at(r, "Buf", "B").max_tile == 4);
  CHECK(level(r, "Buf").peak_footprint.value == 8);
  CHECK(at(r, "DRAM", "A").fills == 8);
  CHECK(figures(r) == figures(summarize_movement(s, {}, MovementOptions{MovementMethod::enumerate, 1})));
  // The second window alone: {1, 3, 5, 7}.
  TraceOptions o;
  o.from = 1;
  const MovementReport second = summarize_movement(s, o);
  CHECK(second.enumerated.empty());
  CHECK(at(second, "Buf", "A").fills == 4);
  CHECK(at(second, "Buf", "A").windows == 1);
}

TEST_CASE("movement: a strided image is a lattice, in closed form") {
  // O[p] = I[2p + r] * W[r], p < 8, r < 2, one r per GlobalBuffer window: I's tiles are
  // {0, 2, .., 14} then {1, 3, .., 15}, 8 each; all of O is written in both windows.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 8, r: 0 <= r < 2}
  einsums: ["O[p] = I[X: 2*p + r] * W[r]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [I, W, O]}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Compute {einsum: O}
)");
  const MovementReport r = summarize_movement(s);
  CHECK(r.enumerated.empty());
  const TensorMovement& i = at(r, "GlobalBuffer", "I");
  CHECK(i.windows == 2);
  CHECK(i.max_tile == 8);
  CHECK(i.fills == 16);
  CHECK(at(r, "GlobalBuffer", "W").fills == 2);
  CHECK(at(r, "GlobalBuffer", "O").drains == 16);
  CHECK(level(r, "GlobalBuffer").peak_footprint.value == 17);
  CHECK(at(r, "DRAM", "I").fills == 16);
  CHECK(figures(r) == figures(summarize_movement(s, {}, MovementOptions{MovementMethod::enumerate, 1})));
  // A prefix of 12 timesteps cuts window 1 to p < 4: {1, 3, 5, 7}.
  TraceOptions o;
  o.max_timesteps = 12;
  const MovementReport cut = summarize_movement(s, o);
  CHECK(cut.enumerated.empty());
  CHECK(at(cut, "GlobalBuffer", "I").fills == 12);
  CHECK(figures(cut) == figures(summarize_movement(s, o, MovementOptions{MovementMethod::enumerate, 1})));
}

TEST_CASE("movement: a lattice and a range of one tensor in one window") {
  // Z[x] = A[x] + A[x + 1] as two Einsums' reads would be; here one Einsum reads
  // A[2p] (a lattice of stride 2) and writes B[p]; a second reads A[q] for q < 5 (a
  // range) in the same window: the union is {0, 2, 4, 6} with {0, .., 4}, 6 elements.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 4, q: 0 <= q < 5}
  einsums:
  - name: E1
    tensor_accesses:
    - {name: A, projection: {X: 2*p}}
    - {name: B, projection: [p], output: True}
  - name: E2
    tensor_accesses:
    - {name: A, projection: {X: q}}
    - {name: C, projection: [q], output: True}
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, C]}
  - !Storage {component: Buf, tensors: [A]}
  - !Sequential
    nodes:
    - !Nested {nodes: [!Temporal {rank_variable: p, tile_shape: 1}, !Compute {einsum: E1}]}
    - !Nested {nodes: [!Temporal {rank_variable: q, tile_shape: 1}, !Compute {einsum: E2}]}
)");
  const MovementReport r = summarize_movement(s);
  CHECK(r.enumerated.empty());
  CHECK(at(r, "Buf", "A").max_tile == 6);
  CHECK(at(r, "Buf", "A").fills == 6);
  CHECK(figures(r) == figures(summarize_movement(s, {}, MovementOptions{MovementMethod::enumerate, 1})));
}

TEST_CASE("movement: what the closed form cannot count is enumerated, and listed") {
  // Z[m] = A[m, m] (A's ranks I and J both m) with 4 m per window: A's tile is a
  // diagonal, not a box.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 8}
  einsums:
  - name: Z
    tensor_accesses:
    - {name: A, projection: {I: m, J: m}}
    - {name: Z, projection: [m], output: True}
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, Z]}
  - !Temporal {rank_variable: m, tile_shape: 4}
  - !Storage {component: GlobalBuffer, tensors: [A, Z]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  const MovementReport r = summarize_movement(s);
  // Only the slots of A: DRAM's one window holds the whole diagonal; Z stays in
  // closed form.
  REQUIRE(r.enumerated.size() == 2);
  CHECK(r.enumerated[0].level == "DRAM");
  CHECK(r.enumerated[0].tensor == "A");
  CHECK(r.enumerated[1].level == "GlobalBuffer");
  CHECK(r.enumerated[1].tensor == "A");
  CHECK(th::contains(r.enumerated[1].reason, "not a box"));
  const LevelMovement& gb = r.levels[1];
  CHECK(gb.tensors[0].tensor == "A");
  CHECK(gb.tensors[0].fills == 8);  // (0, 0) .. (3, 3) then (4, 4) .. (7, 7)
  CHECK(gb.tensors[0].max_tile == 4);
  CHECK(figures(r) == figures(summarize_movement(s, {}, MovementOptions{MovementMethod::enumerate, 1})));
  // A cut window too: [1, 6) cuts DRAM's one window to [1, 6), a diagonal still,
  // enumerated per slot (A only).
  TraceOptions cut;
  cut.from = 1, cut.to = 6;
  const MovementReport c = summarize_movement(s, cut);
  REQUIRE(!c.enumerated.empty());
  CHECK(c.enumerated[0].level == "DRAM");
  for (const auto& e : c.enumerated) CHECK(e.tensor == "A");
  CHECK(figures(c) == figures(summarize_movement(s, cut, MovementOptions{MovementMethod::enumerate, 1})));
}

TEST_CASE("movement: bytes from bits_per_value, and the arch's sizes") {
  const std::string workload = R"(
workload:
  iteration_space_shape: {p: 0 <= p < 8, r: 0 <= r < 3}
  bits_per_value: {All: 8, I | W: 12, W: 16}
  einsums:
  - name: Conv
    tensor_accesses:
    - {name: I, projection: {P: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True, bits_per_value: 32}
)";
  const std::string mapping = R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I, W, O]}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Compute {einsum: Conv, component: MAC}
arch:
  nodes:
  - !Memory {name: MainMemory, size: inf}
  - !Container
    nodes:
    - !Memory {name: GlobalBuffer, size: 8 * 12}
  - !Memory {name: Register, size: weight.bits_per_value if weight else 0}
)";
  const Schedule s = th::compile_text2(workload, mapping);
  // I: "I | W" (12 bits: 2 bytes); W: its name (16: 2); O: its access's own (32: 4).
  CHECK(s.tensors[std::size_t(s.find_tensor("I"))].bits_per_value == 12);
  CHECK(s.tensors[std::size_t(s.find_tensor("W"))].bits_per_value == 16);
  CHECK(s.tensors[std::size_t(s.find_tensor("O"))].bits_per_value == 32);
  const MovementReport r = summarize_movement(s);
  const auto& gi = at(r, "GlobalBuffer", "I");
  REQUIRE(gi.bytes_per_value);
  CHECK(*gi.bytes_per_value == 2);
  CHECK(*at(r, "GlobalBuffer", "O").bytes_per_value == 4);
  // GlobalBuffer at t = 0 holds I {0, 1, 2}, W {0, 1, 2}, O {0}: 6 + 6 + 4 bytes.
  const auto& gb = level(r, "GlobalBuffer");
  REQUIRE(gb.peak_footprint_bytes);
  CHECK(gb.peak_footprint_bytes->value == 16);
  REQUIRE(gb.capacity_bits);
  CHECK(*gb.capacity_bits == 96.0);  // 128 bits of peak: does not fit
  const auto json = movement_json(r);
  CHECK(json["levels"][1]["capacity"]["fits"] == false);
  CHECK(json["levels"][1]["capacity"]["over_by_bits"] == 32.0);
  CHECK(json["levels"][0]["capacity"]["size_bits"] == "inf");
  CHECK(json["levels"][1]["tensors"][0]["fill_bytes"] == 48);  // 24 fills of 2 bytes
  REQUIRE(s.memory("Register"));
  CHECK(!s.memory("Register")->size_bits);  // no renames give `weight`: not guessed
  CHECK(s.memory("Register")->per_einsum.empty());
  CHECK(th::contains(s.memory("Register")->unevaluated, "name 'weight' is not defined"));

  // A plain number means every tensor; a bad value names itself.
  const Schedule plain = th::compile_text2(
      std::string(workload).replace(workload.find("{All: 8, I | W: 12, W: 16}"), 26, "4"), mapping);
  CHECK(plain.tensors[std::size_t(plain.find_tensor("I"))].bits_per_value == 4);
  CHECK(th::contains(th::spec_error([&] {
                       th::compile_text2(std::string(workload).replace(workload.find("W: 16"), 5, "W: -2"), mapping);
                     }).message(),
                     "bits_per_value of 'W' must be a positive integer"));
}

namespace {
// Two Einsums, as AccelForge's transformer files write them: E1 = A x W (its input
// renamed to A), E2 copies B. The default renames make `weight` {W} in E1, {} in E2.
const char* kRenamedWorkload = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2, k: 0 <= k < 2}
  bits_per_value: {A | B | C: 8, W: 16}
  einsums:
  - name: E1
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: W, projection: [k]}
    - {name: B, projection: [m], output: True}
    renames: {input: A}
  - name: E2
    tensor_accesses:
    - {name: B, projection: [m]}
    - {name: C, projection: [m], output: True}
renames:
  einsums:
  - name: default
    tensor_accesses:
    - {name: input, source: Inputs & Intermediates if len(All) == 3 else Inputs, expected_count: 1}
    - {name: output, source: Outputs, expected_count: 1}
    - {name: weight, source: ~(input | output), expected_count: 1 if len(All) == 3 else 0}
arch:
  nodes:
  - !Memory {name: MainMemory, size: inf}
  - !Memory {name: Register, size: weight.bits_per_value if weight else 0}
  - !Memory {name: Twice, size: 2 * input.bits_per_value + len(Nothing | Outputs)}
)";

// E1 keeps `e1` in the Register (one element of each at a time), E2 keeps `e2`.
std::string renamed_mapping(const std::string& e1, const std::string& e2) {
  return R"(
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [A, W, B, C]}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Storage {component: Register, tensors: [)" + e1 + R"(]}
      - !Compute {einsum: E1, component: MAC}
    - !Nested
      nodes:
      - !Storage {component: Register, tensors: [)" + e2 + R"(]}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Compute {einsum: E2, component: MAC}
)";
}
}  // namespace

TEST_CASE("movement: a size per Einsum from its renames, as AccelForge evaluates the arch") {
  const Spec spec = th::spec_text(std::string(kRenamedWorkload) + renamed_mapping("A, W, B", "B"));
  const ArchMemory& reg = spec.memories.at("Register");
  CHECK(!reg.size_bits);
  REQUIRE(reg.per_einsum.size() == 2);
  CHECK(reg.per_einsum[0].einsum == "E1");
  CHECK(reg.per_einsum[0].size_bits == 16.0);  // weight = {W}: W's own 16 bits, not All's 8
  CHECK(reg.per_einsum[0].bits_of == std::vector<std::string>{"W"});
  CHECK(reg.per_einsum[1].size_bits == 0.0);  // weight = {}: `else 0`
  CHECK(reg.per_einsum[1].bits_of.empty());
  // input: E1's own rename A (8 bits); E2's default, Inputs = {B}. Outputs has one tensor.
  const ArchMemory& twice = spec.memories.at("Twice");
  REQUIRE(twice.per_einsum.size() == 2);
  CHECK(twice.per_einsum[0].size_bits == 2 * 8 + 1);  // A's 8 bits
  CHECK(twice.per_einsum[0].bits_of == std::vector<std::string>{"A"});
  CHECK(twice.per_einsum[1].bits_of == std::vector<std::string>{"B"});

  // The Register holds one A, W and B in E1 (1 + 2 + 1 bytes) against W's 16 bits, and
  // B's two elements in E2 (above its m loop) against 0 bits: each checked against its
  // own Einsum's size.
  const Schedule s = compile_schedule(spec);
  const MovementReport r = summarize_movement(s);
  const LevelMovement& l = level(r, "Register");
  REQUIRE(l.einsum_capacities.size() == 2);
  CHECK(l.einsum_capacities[0].einsum == "E1");
  REQUIRE(l.einsum_capacities[0].peak_footprint_bytes);
  CHECK(l.einsum_capacities[0].peak_footprint_bytes->value == 4);
  REQUIRE(l.einsum_capacities[1].peak_footprint_bytes);
  CHECK(l.einsum_capacities[1].peak_footprint_bytes->value == 2);
  CHECK(l.peak_footprint_bytes->value == 4);  // the whole run's peak: E1's
  const auto json = movement_json(r);
  const auto& cap = json["levels"][1]["capacity"];
  CHECK(cap["fits"] == false);
  CHECK(cap["per_einsum"][0]["over_by_bits"] == 16.0);
  CHECK(cap["per_einsum"][1]["over_by_bits"] == 16.0);
  CHECK(cap["per_einsum"][0]["bits_of"] == std::vector<std::string>{"W"});
  CHECK(th::contains(movement_text(r), "  E1: 16 bits (2 bytes), from W's bits_per_value; peak 4 bytes at t="));
  CHECK(th::contains(movement_text(r), "  E2: 0 bits (0 bytes); peak 2 bytes at t="));

  // Holding only its weight, E1's Register fits (one W of 16 bits at a time), and E2's
  // holds nothing, so it is not listed.
  const Schedule fits = compile_schedule(th::spec_text(std::string(kRenamedWorkload) + renamed_mapping("W", "")));
  const auto fit_json = movement_json(summarize_movement(fits));
  const auto& reg_json = fit_json["levels"][1];
  REQUIRE(reg_json["level"] == "Register");
  CHECK(reg_json["capacity"]["per_einsum"].size() == 1);
  CHECK(reg_json["capacity"]["per_einsum"][0]["peak_bits"] == 16.0);
  CHECK(reg_json["capacity"]["fits"] == true);
}

TEST_CASE("movement: a size AccelForge cannot evaluate stays unevaluated, with the reason") {
  // E1 without its own rename: input = Inputs & Intermediates = {}, not 1 tensor.
  std::string w = kRenamedWorkload;
  w.replace(w.find("    renames: {input: A}\n"), std::string("    renames: {input: A}\n").size(), "");
  const Spec spec = th::spec_text(w + renamed_mapping("W", ""));
  const ArchMemory& reg = spec.memories.at("Register");
  CHECK(reg.per_einsum.empty());
  // `weight` is `~(input | output)`: its failure is input's.
  CHECK(th::contains(reg.unevaluated, "in Einsum 'E1': rename 'weight' ('~(input | output)'): rename 'input' "
                                      "('Inputs & Intermediates if len(All) == 3 else Inputs'): "));
  CHECK(th::contains(reg.unevaluated, "Expected count is 1, but got 0"));
  CHECK(th::contains(reg.unevaluated, "AccelForge fails on it too"));
  const std::string text = movement_text(summarize_movement(compile_schedule(spec)));
  CHECK(th::contains(text, "size 'weight.bits_per_value if weight else 0' not evaluated (in Einsum 'E1'"));
}

TEST_CASE("movement: partial sums read back, by hand") {
  // Z[m, n] = A[m, k] * B[k, n], 4 x 4 x 4, k outermost: GlobalBuffer's 4 windows each
  // write all of Z (16) and drain it. As SEMANTICS counts, Z is never filled; with
  // partial sums, windows 1..3 read Z back first: 48. DRAM is Z's home: no read back.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4, k: 0 <= k < 4, n: 0 <= n < 4}
  einsums: ["Z[m, n] = A[m, k] * B[k, n]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, Z]}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [A, B, Z]}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  for (const MovementMethod method : {MovementMethod::closed_form, MovementMethod::enumerate}) {
    CAPTURE(int(method));
    MovementOptions how;
    how.method = method;
    const MovementReport plain = summarize_movement(s, {}, how);
    how.partial_sums = true;
    const MovementReport rmw = summarize_movement(s, {}, how);
    CHECK(plain.levels[1].tensors[2].fills == 0);
    CHECK(rmw.levels[1].tensors[2].tensor == "Z");
    CHECK(rmw.levels[1].tensors[2].fills == 48);
    CHECK(rmw.levels[1].tensors[2].drains == 64);
    CHECK(rmw.levels[0].tensors[2].fills == 0);
    CHECK(rmw.levels[1].tensors[0].fills == plain.levels[1].tensors[0].fills);  // inputs unchanged
    TraceOptions half;
    // Windows [8, 16) (rows 2, 3 of Z), [16, 32) (all: rows 2, 3 read back, the
    // piece never wrote rows 0, 1 before) and [32, 40) (rows 0, 1, read back): 8 + 8.
    half.from = 8, half.to = 40;
    const MovementReport cut = summarize_movement(s, half, how);
    CHECK(cut.levels[1].tensors[2].fills == 8 + 8);
  }
}

TEST_CASE("movement: partial sums of a fused intermediate, by hand") {
  // I[m] = A[m, k] reduced over k, then Z[m] = I[m] * B[k], fused under k (2
  // iterations, the reduction): GlobalBuffer holds I, 2 windows of 8 timesteps (4 of each Einsum).
  // Producer first: each window writes I[0..4) before reading it, so nothing is filled
  // (SEMANTICS); window 1 writes I first after window 0 drained it: 4 read back.
  // Consumer first: each window reads I first (4 fills each, 8), and window 1 writes
  // only what it read first: no read back, though window 0 drained all of it. The spec:
  // tests/specs/fused_reduction.yaml (a !Sequential, m tiles of 1).
  for (const bool producer_first : {true, false}) {
    CAPTURE(producer_first);
    const Schedule s = th::compile_corpus({"fused_reduction.yaml"}, {{"FIRST", producer_first ? "I" : "Z"}});
    MovementOptions how;
    how.partial_sums = true;
    const MovementReport r = summarize_movement(s, {}, how);
    CHECK(r.enumerated.empty());
    const TensorMovement& gb = at(r, "GlobalBuffer", "I");
    CHECK(gb.windows == 2);
    CHECK(gb.max_tile == 4);
    CHECK(gb.drains == 8);
    CHECK(gb.fills == (producer_first ? 4 : 8));
    CHECK(at(r, "DRAM", "I").fills == (producer_first ? 0 : 4));  // home: never read back
    how.method = MovementMethod::enumerate;
    CHECK(figures(summarize_movement(s, {}, how)) == figures(r));
    // The second window alone: nothing drained before it in the traced time.
    TraceOptions second;
    second.from = 8;
    how.method = MovementMethod::closed_form;
    const MovementReport cut = summarize_movement(s, second, how);
    CHECK(cut.enumerated.empty());
    CHECK(at(cut, "GlobalBuffer", "I").fills == (producer_first ? 0 : 4));
    how.method = MovementMethod::enumerate;
    CHECK(figures(summarize_movement(s, second, how)) == figures(cut));
  }
}

TEST_CASE("movement: a !Pipeline producer and consumer of one tensor, by hand") {
  // I[n, m] = A[n, m] writes I[n, 2t], I[n, 2t + 1] at timestep t of n's window (t < 2);
  // alongside, Z[n, m] = I[n, m] reads I[n, t] (t < 4). Reads come first in a timestep:
  // I[n, 0] is read first at t = 0 (a fill); I[n, 1] is written at t = 0 before its
  // read at t = 1, I[n, 2..4) at t = 1 before theirs. Per window of GlobalBuffer (one
  // per n, 3 alike): tile 4, fills 1, drains 4.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {n: 0 <= n < 3, m: 0 <= m < 4}
  einsums: ["I[n, m] = A[n, m]", "Z[n, m] = I[n, m]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, I, Z]}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I]}
  - !Pipeline
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 2}
      - !Compute {einsum: I}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Compute {einsum: Z}
)");
  for (const bool partial_sums : {false, true}) {
    CAPTURE(partial_sums);
    MovementOptions how;
    how.partial_sums = partial_sums;
    const MovementReport r = summarize_movement(s, {}, how);
    CHECK(r.enumerated.empty());
    const TensorMovement& gb = at(r, "GlobalBuffer", "I");
    CHECK(gb.windows == 3);
    CHECK(gb.max_tile == 4);
    CHECK(gb.fills == 3);  // each window writes other rows of I: nothing to read back
    CHECK(gb.drains == 12);
    CHECK(at(r, "DRAM", "I").fills == 3);
    CHECK(at(r, "DRAM", "I").drains == 12);
    how.method = MovementMethod::enumerate;
    CHECK(figures(summarize_movement(s, {}, how)) == figures(r));
    // Windows cut by the selection [1, 6): in [1, 4), t = 0's write of I[0, 1] is not
    // traced, so its read at t = 1 is first (I[0, 2], I[0, 3] are written at t = 1,
    // before their reads); in [4, 6), I[1, 0] as before: 2 fills.
    TraceOptions cut;
    cut.from = 1, cut.to = 6;
    how.method = MovementMethod::closed_form;
    const MovementReport c = summarize_movement(s, cut, how);
    CHECK(c.enumerated.empty());
    CHECK(at(c, "GlobalBuffer", "I").fills == 2);
    how.method = MovementMethod::enumerate;
    CHECK(figures(summarize_movement(s, cut, how)) == figures(c));
  }
}

TEST_CASE("movement: partial sums of a !Pipeline producer and consumer, by hand") {
  // As above, but the loop above GlobalBuffer reduces I over k: I[m] = A[m, k], with
  // Z[m] = I[m] * B[k] alongside. Each window fills I[0] (read at t = 0 before its
  // write) and writes I[1..4) first. With partial sums, window 1 reads back those 3,
  // which window 0 drained, but not I[0], which it reads first: fills 2 + 3. The spec:
  // tests/specs/fused_reduction.yaml as a !Pipeline, the producer's m tiles of 2.
  const Schedule s = th::compile_corpus({"fused_reduction.yaml"}, {{"BRANCH", "Pipeline"}, {"PRODUCER_TILE", 2}});
  for (const bool partial_sums : {false, true}) {
    CAPTURE(partial_sums);
    MovementOptions how;
    how.partial_sums = partial_sums;
    const MovementReport r = summarize_movement(s, {}, how);
    CHECK(r.enumerated.empty());
    const TensorMovement& gb = at(r, "GlobalBuffer", "I");
    CHECK(gb.windows == 2);
    CHECK(gb.drains == 8);
    CHECK(gb.fills == (partial_sums ? 5 : 2));
    how.method = MovementMethod::enumerate;
    CHECK(figures(summarize_movement(s, {}, how)) == figures(r));
  }
}

TEST_CASE("movement: lattices in !Pipeline readers and writers and in partial sums, as the enumeration") {
  // I[x] = A[x, k] reduced over k above GlobalBuffer; alongside, Z reads I at a lattice
  // (I[2p], or one PE's chunk of a !Spatial split walked in time): the halving of time
  // (FirstReads) and the read-backs count unions and intersections of lattices and
  // ranges, with each lattice rank split in row and place. The spec:
  // tests/specs/fused_reduction_lattice.yaml.
  for (const std::string& branch : {std::string("Pipeline"), std::string("Sequential")})
    for (const bool spatial : {false, true}) {
      for (const std::int64_t producer_tile : {1, 2, 3}) {
        const th::Defines defines{{"BRANCH", branch}, {"SPATIAL", spatial}, {"PRODUCER_TILE", producer_tile}};
        CAPTURE(branch);
        CAPTURE(spatial);
        CAPTURE(producer_tile);
        const Schedule s = th::compile_corpus({"fused_reduction_lattice.yaml"}, defines);
        for (int variant = 0; variant < 6; ++variant) {
          CAPTURE(variant);
          TraceOptions o;
          if (variant % 3 == 1) o.max_timesteps = s.n_timesteps / 2 + 1;
          if (variant % 3 == 2) o.from = s.n_timesteps / 3, o.to = s.n_timesteps * 2 / 3;
          MovementOptions how;
          how.partial_sums = variant >= 3;
          const MovementReport r = summarize_movement(s, o, how);
          for (const auto& e : r.enumerated) CHECK_MESSAGE(false, e.level << " " << e.tensor << ": " << e.reason);
          how.method = MovementMethod::enumerate;
          CHECK(figures(r) == figures(summarize_movement(s, o, how)));
        }
      }
    }
}

TEST_CASE("movement: the text table widens its columns for figures of 12 digits and more") {
  MovementReport r;
  r.n_timesteps = 10;
  LevelMovement level;
  level.level = "DRAM";
  TensorMovement t;
  t.tensor = "W";
  t.windows = 1, t.max_tile = 123456789012, t.fills = 123456789012, t.drains = 987654321098;
  t.bytes_per_value = 2;  // fill B 246913578024, drain B 1975308642196: 13 digits
  level.tensors.push_back(t);
  r.levels.push_back(level);
  const std::string text = movement_text(r);
  // Columns of 15: the widest figure, 13 digits, and two spaces.
  CHECK(th::contains(text, "DRAM   W                           1   123456789012   123456789012   987654321098"
                           "   246913578024  1975308642196\n"));
  // Figures of up to 10 digits keep the columns of 12.
  r.levels[0].tensors[0].max_tile = 5, r.levels[0].tensors[0].fills = 6, r.levels[0].tensors[0].drains = 7;
  CHECK(th::contains(movement_text(r),
                     "DRAM   W                        1           5           6           7          12          14\n"));
}
