// Transfer traces: the SEMANTICS worked example by hand, shards that concatenate to
// the whole, line coalescing, and the invariant that ties them to movement.
#include <doctest/doctest.h>

#include <regex>

#include "helpers.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/sinks/transfer_formats.hpp"
#include "looptrace/stages/transfers.hpp"

using namespace looptrace;

namespace {

std::vector<TransferRequest> requests(const Schedule& s, const TraceOptions& o, TransferOptions t) {
  auto stage = transfer_pipeline(s, o, std::move(t));
  std::vector<TransferRequest> out;
  for (auto b = stage.next_batch(); !b.empty(); b = stage.next_batch()) out.insert(out.end(), b.begin(), b.end());
  return out;
}

TransferOptions level(const std::string& name, std::uint64_t line = 64) {
  TransferOptions t;
  t.level = name;
  t.line_bytes = line;
  return t;
}

}  // namespace

TEST_CASE("transfers: the worked example of SEMANTICS") {
  // MainMemory holds I, W, O at 0x0, 0x1000, 0x2000; GlobalBuffer windows [3q, 3q + 3):
  // at 3q READ 0x0, READ 0x1000; at 3q + 3 WRITE 0x2000 before the next reads.
  const Schedule s = th::compile_text(th::kConv1d);
  const auto r = requests(s, {}, level("MainMemory"));
  REQUIRE(r.size() == 8 * 3);
  for (std::int64_t q = 0; q < 8; ++q) {
    const std::size_t k = std::size_t(q) * 3;
    CHECK(r[k] == TransferRequest{3 * q, 0x0, false, 1, 0});
    CHECK(r[k + 1] == TransferRequest{3 * q, 0x1000, false, 1, 1});
    CHECK(r[k + 2] == TransferRequest{3 * q + 3, 0x2000, true, 1, 2});
  }
  // With one-byte lines, every element is a request: I's tiles {q, q+1, q+2}.
  const auto bytes = requests(s, {}, level("MainMemory", 1));
  std::vector<std::uint64_t> first;
  for (const auto& x : bytes)
    if (x.timestep == 3 && !x.write) first.push_back(x.address);
  CHECK(first == std::vector<std::uint64_t>{1, 2, 3, 0x1000, 0x1001, 0x1002});
  // GlobalBuffer has no children: no traffic.
  CHECK(requests(s, {}, level("GlobalBuffer")).empty());
  CHECK(th::contains(th::spec_error([&] { requests(s, {}, level("L9")); }).message(), "'L9'"));
}

TEST_CASE("transfers: shards and windows concatenate to the whole run") {
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(3)}, {"M", std::int64_t(6)}, {"KN", std::int64_t(4)}});
  const std::string dram = s.memory_levels.front();
  const auto whole = requests(s, {}, level(dram, 8));
  REQUIRE(!whole.empty());
  for (std::int64_t n : {2, 3, 7}) {
    std::vector<TransferRequest> joined;
    for (std::int64_t i = 0; i < n; ++i) {
      TraceOptions o;
      o.shard = {i, n};
      const auto part = requests(s, o, level(dram, 8));
      joined.insert(joined.end(), part.begin(), part.end());
    }
    CAPTURE(n);
    CHECK(joined == whole);
  }
  TraceOptions window;
  window.from = 5, window.to = 41;
  std::vector<TransferRequest> inside;
  for (const auto& x : whole)
    if (x.timestep >= 5 && x.timestep < 41) inside.push_back(x);
  CHECK(requests(s, window, level(dram, 8)) == inside);
  // Time order; at one timestep writes first, then ascending addresses.
  for (std::size_t i = 1; i < whole.size(); ++i) {
    const auto &a = whole[i - 1], &b = whole[i];
    CHECK(a.timestep <= b.timestep);
    if (a.timestep == b.timestep && a.write == b.write) CHECK(a.address <= b.address);
    if (a.timestep == b.timestep) CHECK(!(!a.write && b.write));
  }
}

TEST_CASE("transfers: with byte lines, a level serves exactly its children's fills and drains") {
  for (const auto& files : std::vector<std::vector<std::string>>{
           {"conv1d.workload.yaml", "conv1d.mapping.yaml"},
           {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
           {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"},
           {"conv2d.workload.yaml", "conv2d.mapping.yaml"}}) {
    CAPTURE(files[1]);
    const Schedule s = th::compile_corpus(files, {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(4)},
                                                  {"KN", std::int64_t(4)}});
    const MovementReport m = summarize_movement(s);
    for (std::size_t l = 0; l + 1 < m.levels.size(); ++l) {
      // In these mappings the children of level l are at level l + 1, for the tensors
      // that level l holds too (an intermediate kept only on chip has no parent).
      const auto r = requests(s, {}, level(m.levels[l].level, 1));
      std::int64_t reads = 0, writes = 0, fills = 0, drains = 0;
      for (const auto& x : r) (x.write ? writes : reads) += 1;
      auto held_above = [&](const std::string& tensor) {
        for (const auto& t : m.levels[l].tensors)
          if (t.tensor == tensor) return true;
        return false;
      };
      for (const auto& t : m.levels[l + 1].tensors)
        if (held_above(t.tensor)) fills += t.fills, drains += t.drains;
      CHECK(reads > 0);
      CHECK(reads == fills);
      CHECK(writes == drains);
    }
  }
}

TEST_CASE("transfers: line coalescing and addresses") {
  const Schedule s = th::compile_text(th::kConv1d);
  // 4-byte lines: I's first tile {0, 1, 2} is one line, {3, 4, 5} at t = 9 two.
  const auto r = requests(s, {}, level("MainMemory", 4));
  std::vector<std::uint64_t> at9;
  for (const auto& x : r)
    if (x.timestep == 9 && x.tensor == 0) at9.push_back(x.address);
  CHECK(at9 == std::vector<std::uint64_t>{0, 4});
  AddressMap map = AddressMap::make(s, {"W", "I"}, 100);
  CHECK(map.base[std::size_t(s.find_tensor("W"))] == 0);
  CHECK(map.base[std::size_t(s.find_tensor("I"))] == 100);  // W has 3 one-byte elements
}

TEST_CASE("transfers: the simulators' formats") {
  const Schedule s = th::compile_text(th::kConv1d);
  auto render = [&](const std::string& format, std::int64_t cycles, const char* rate = nullptr) {
    std::FILE* f = std::tmpfile();
    {
      OutputBuffer out(fileno(f));
      const IssueTiming timing = rate ? parse_issue_rate(rate, cycles) : IssueTiming{cycles};
      auto sink = make_transfer_sink(format, s, "MainMemory", out, timing.limited());
      auto stage = transfer_pipeline(s, {}, level("MainMemory")) | issue_cycles(timing);
      for (auto b = stage.next_batch(); !b.empty(); b = stage.next_batch()) sink->write(b);
      out.flush();
    }
    std::string text(4096, '\0');
    std::rewind(f);
    text.resize(std::fread(text.data(), 1, text.size(), f));
    std::fclose(f);
    return text;
  };
  // DRAMsim3 reads `hex-address op decimal-cycle`; Ramulator 2 exactly two tokens.
  const std::string d = render("dramsim3", 10);
  CHECK(d.substr(0, 41) == "0x0 READ 0\n0x1000 READ 0\n0x2000 WRITE 30\n");
  const std::regex dram_line("0x[0-9a-f]+ (READ|WRITE) [0-9]+");
  const std::regex ram_line("(LD|ST) 0x[0-9a-f]+");
  std::size_t lines = 0;
  for (std::size_t at = 0, nl; (nl = d.find('\n', at)) != std::string::npos; at = nl + 1, ++lines)
    CHECK(std::regex_match(d.substr(at, nl - at), dram_line));
  CHECK(lines == 24);
  // One request a cycle: the second read of t = 0 waits a cycle; the write at t = 3 is
  // at its own first cycle, 30. JSON Lines then carry the cycle.
  CHECK(render("dramsim3", 10, "1").substr(0, 41) == "0x0 READ 0\n0x1000 READ 1\n0x2000 WRITE 30\n");
  const std::string j = render("jsonl", 10, "1/4");
  CHECK(th::contains(j.substr(0, j.find('\n')), "\"tensor\": \"I\", \"cycle\": 0}"));
  CHECK(th::contains(j.substr(j.find('\n') + 1), "\"tensor\": \"W\", \"cycle\": 4}"));
  CHECK_FALSE(th::contains(render("jsonl", 10), "cycle"));
  const std::string m = render("ramulator2", 1);
  CHECK(m.substr(0, 26) == "LD 0x0\nLD 0x1000\nST 0x2000");
  for (std::size_t at = 0, nl; (nl = m.find('\n', at)) != std::string::npos; at = nl + 1)
    CHECK(std::regex_match(m.substr(at, nl - at), ram_line));
  CHECK(th::contains(th::spec_error([&] { render("csv", 1); }).message(), "dramsim3"));
}

TEST_CASE("transfers: the boxes and the enumeration give the same requests") {
  for (const auto& files : std::vector<std::vector<std::string>>{
           {"conv1d.workload.yaml", "conv1d.mapping.yaml"},
           {"conv2d.workload.yaml", "conv2d.mapping.yaml"},
           {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
           {"matmuls.yaml", "matmul_imperfect.mapping.yaml"},
           {"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"},
           {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"},  // a writer and a reader interleaved
           {"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}}) {              // ... and running at once
    CAPTURE(files[1]);
    const Schedule s = th::compile_corpus(files, {{"N_EINSUMS", std::int64_t(3)}, {"M", std::int64_t(6)},
                                                  {"KN", std::int64_t(4)}});
    for (const std::string& lv : s.memory_levels) {
      if (children_of(s, lv, {}).empty()) continue;
      CAPTURE(lv);
      for (int variant = 0; variant < 6; ++variant) {
        TraceOptions o;
        if (variant % 3 == 1) o.max_timesteps = s.n_timesteps / 2 + 1;  // windows cut at the prefix
        if (variant % 3 == 2) o.from = s.n_timesteps / 3, o.to = s.n_timesteps * 2 / 3;
        CAPTURE(variant);
        TransferOptions boxes = level(lv, 4);
        boxes.partial_sums = variant >= 3;
        TransferOptions enumerated = boxes;
        enumerated.enumerate = true;
        auto stage = transfer_pipeline(s, o, boxes);
        CHECK(stage.closed_form());
        const auto got = requests(s, o, boxes);
        CHECK(got == requests(s, o, enumerated));
        if (variant == 0) CHECK(!got.empty());
      }
    }
  }
}

TEST_CASE("transfers: lattices stream row by row, as the enumeration does") {
  // B[x] = A[x], x < 8: 4 PEs take 2 each and walk them in time, Buf inside. A at 0, B
  // at 0x1000; one-byte lines. Window 0 reads A {0, 2, 4, 6}; at t = 1 it writes B
  // {0, 2, 4, 6}, then window 1 reads A {1, 3, 5, 7}; at t = 2 B {1, 3, 5, 7}.
  const Schedule s = th::compile_corpus({"retiled_copy.yaml"});
  TransferOptions bytes = level("DRAM", 1);
  REQUIRE(transfer_pipeline(s, {}, bytes).closed_form());
  const auto r = requests(s, {}, bytes);
  std::vector<TransferRequest> want;
  for (std::uint64_t e : {0, 2, 4, 6}) want.push_back({0, e, false, 1, 0});
  for (std::uint64_t e : {0, 2, 4, 6}) want.push_back({1, 0x1000 + e, true, 1, 1});
  for (std::uint64_t e : {1, 3, 5, 7}) want.push_back({1, e, false, 1, 0});
  for (std::uint64_t e : {1, 3, 5, 7}) want.push_back({2, 0x1000 + e, true, 1, 1});
  CHECK(r == want);
  TransferOptions enumerated = bytes;
  enumerated.enumerate = true;
  CHECK(r == requests(s, {}, enumerated));
  // Lines of 4 bytes: each window touches both lines of a tensor, in order.
  TransferOptions lines = level("DRAM", 4), lines_enumerated = lines;
  lines_enumerated.enumerate = true;
  CHECK(requests(s, {}, lines) == requests(s, {}, lines_enumerated));
  CHECK(requests(s, {}, lines).size() == 8);
}

TEST_CASE("transfers: a strided image streams in closed form") {
  // O[p] = I[2p + r] * W[r], p < 8, r < 2, one r per GlobalBuffer window: window 0 reads
  // I {0, 2, .., 14}, window 1 I {1, 3, .., 15}; at any line size, whole or cut, the
  // boxes and the enumeration write the same requests.
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
  TransferOptions bytes = level("DRAM", 1);
  REQUIRE(transfer_pipeline(s, {}, bytes).closed_form());
  const auto r = requests(s, {}, bytes);
  std::vector<std::uint64_t> first;  // window 0's reads of I
  for (const auto& x : r)
    if (x.timestep == 0 && x.tensor == 0) first.push_back(x.address);
  CHECK(first == std::vector<std::uint64_t>{0, 2, 4, 6, 8, 10, 12, 14});
  for (std::uint64_t line : {1, 2, 4, 64}) {
    CAPTURE(line);
    for (int variant = 0; variant < 2; ++variant) {
      TraceOptions o;
      if (variant == 1) o.max_timesteps = 12;  // window 1 cut to p < 4
      TransferOptions boxes = level("DRAM", line), enumerated = boxes;
      enumerated.enumerate = true;
      CHECK(transfer_pipeline(s, o, boxes).closed_form());
      CHECK(requests(s, o, boxes) == requests(s, o, enumerated));
    }
  }
}

TEST_CASE("transfers: a tensor of 10^10 elements streams from its first line") {
  // A[m, n] at 100000 x 100000: one GlobalBuffer window holds 1000 rows. The first
  // requests are A's first lines, at once; no memory follows the tensor.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 100000, n: 0 <= n < 100000}
  einsums: ["Z[m] = A[m, n]"]
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, Z]}
  - !Temporal {rank_variable: m, tile_shape: 1000}
  - !Storage {component: GlobalBuffer, tensors: [A, Z]}
  - !Temporal {rank_variable: n, tile_shape: 100}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  CHECK(s.tensors[0].size == 10'000'000'000);
  auto stage = transfer_pipeline(s, {}, level("DRAM"));
  REQUIRE(stage.closed_form());
  const auto first = stage.next_batch();
  REQUIRE(first.size() == 4096);  // one batch
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i] == TransferRequest{0, 64 * i, false, 1, 0});
  // The rest of the first window's reads: 10^8 elements of A, 1,562,500 lines.
  std::int64_t reads = std::int64_t(first.size());
  for (auto b = stage.next_batch(1'000'000); !b.empty(); b = stage.next_batch(1'000'000))
    for (const auto& r : b) reads += r.timestep == 0 && !r.write;
  CHECK(reads == 100'000'000 / 64);  // 10^8 bytes from 0: lines 0 .. 1562499
  // At the window's end Z's first 1000 elements drain (Z lies after A, at the next
  // 4096-byte boundary), before the next window's reads of A from row 1000.
  auto b = stage.next_batch();
  REQUIRE(!b.empty());
  const std::uint64_t z = (10'000'000'000ull + 4095) / 4096 * 4096;
  CHECK(b.front() == TransferRequest{1'000'000, z, true, 1, 1});
}

TEST_CASE("transfers: the issue clock queues requests at its rate") {
  IssueClock every_other(IssueTiming{10, 1, 2});  // one request every 2 cycles
  CHECK(every_other.issue(0) == 0);
  CHECK(every_other.issue(0) == 2);
  CHECK(every_other.issue(0) == 4);
  CHECK(every_other.issue(3) == 30);  // the queue is empty again by cycle 30
  CHECK(every_other.issue(3) == 32);
  IssueClock two_a_cycle(IssueTiming{1, 2, 1});
  std::vector<std::int64_t> cycles;
  for (int i = 0; i < 5; ++i) cycles.push_back(two_a_cycle.issue(0));
  cycles.push_back(two_a_cycle.issue(1));  // the backlog runs past timestep 1's first cycle
  cycles.push_back(two_a_cycle.issue(1));
  CHECK(cycles == std::vector<std::int64_t>{0, 0, 1, 1, 2, 2, 3});
  IssueClock unlimited(IssueTiming{7});
  CHECK(unlimited.issue(3) == 21);
  CHECK(unlimited.issue(3) == 21);
  IssueClock far(IssueTiming{std::int64_t(1) << 20});
  CHECK(th::contains(th::spec_error([&] { far.issue(std::int64_t(1) << 62); }).message(), "passes 2^63 - 1"));
}

TEST_CASE("transfers: issue rates as N, N/K and decimals") {
  auto rate = [](const char* text) {
    const IssueTiming t = parse_issue_rate(text);
    return std::pair{t.requests, t.per_cycles};
  };
  CHECK(rate("4") == std::pair<std::int64_t, std::int64_t>{4, 1});
  CHECK(rate("1/8") == std::pair<std::int64_t, std::int64_t>{1, 8});
  CHECK(rate("2/4") == std::pair<std::int64_t, std::int64_t>{1, 2});
  CHECK(rate("0.25") == std::pair<std::int64_t, std::int64_t>{1, 4});
  CHECK(rate("1.5") == std::pair<std::int64_t, std::int64_t>{3, 2});
  CHECK(rate(".5") == std::pair<std::int64_t, std::int64_t>{1, 2});
  for (const char* bad : {"0", "", "x", "1/0", "-1", "1/", "0.1234567", "1.-5", "2097152", "1/2097152", "0.0",
                          "1844674407370955162.0", "9223372036854775807.5"})
    CHECK_MESSAGE(th::contains(th::spec_error([&] { parse_issue_rate(bad); }).message(), "--issue-rate takes"), bad);
}

TEST_CASE("transfers: partial sums read back at the window's start, in closed form and enumerated") {
  // I[m] = A[m, k] reduced over k (2 iterations above GlobalBuffer), fused with its
  // consumer Z[m] = I[m] * B[k]: each GlobalBuffer window writes I[0..4) before reading it.
  // Window 0 drains I at t = 8; window 1 starts there and, with partial sums, reads
  // the 4 elements back (after the writes of that timestep), then drains them at 16.
  // The spec: tests/specs/fused_reduction.yaml (a !Sequential, the producer first).
  const Schedule s = th::compile_corpus({"fused_reduction.yaml"});
  const auto tensor_i = std::uint32_t(s.find_tensor("I"));
  for (const bool partial_sums : {false, true}) {
    CAPTURE(partial_sums);
    TransferOptions t = level("DRAM", 1);
    t.partial_sums = partial_sums;
    CHECK(transfer_pipeline(s, {}, t).closed_form());
    const auto got = requests(s, {}, t);
    std::vector<std::int64_t> reads, writes;
    for (const auto& x : got) (x.write ? writes : reads).push_back(x.timestep);
    CHECK(writes == std::vector<std::int64_t>{8, 8, 8, 8, 16, 16, 16, 16});
    CHECK(reads == (partial_sums ? std::vector<std::int64_t>{8, 8, 8, 8} : std::vector<std::int64_t>{}));
    for (const auto& x : got) CHECK(x.tensor == tensor_i);
    if (partial_sums) CHECK(got[4].address == got[0].address);  // the lines just written, in order
    TransferOptions e = t;
    e.enumerate = true;
    CHECK(got == requests(s, {}, e));
    for (int variant = 0; variant < 3; ++variant) {  // a prefix, a window and shards of it
      CAPTURE(variant);
      TraceOptions o;
      if (variant == 0) o.max_timesteps = 12;
      if (variant == 1) o.from = 8, o.to = 9;
      if (variant == 2) o.from = 9;
      CHECK(requests(s, o, t) == requests(s, o, e));
    }
  }
}

TEST_CASE("transfers: lattices where a child's writer and reader run at once, and read back, as the enumeration") {
  // I[x] = A[x, k] reduced over k above GlobalBuffer; its !Pipeline consumer reads I[2p]
  // (rows at stride 2), or one PE's chunk of a !Spatial split walked in time: the fills
  // from the halving of time and the read-backs subtract and intersect lattices in
  // split coordinates, and stream the same requests as the enumeration. The spec:
  // tests/specs/fused_reduction_lattice.yaml.
  for (const std::string& branch : {std::string("Pipeline"), std::string("Sequential")})
    for (const bool spatial : {false, true})
      for (const std::int64_t producer_tile : {1, 3}) {
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
          for (std::uint64_t line : {1, 4}) {
            CAPTURE(line);
            TransferOptions boxes = level("DRAM", line);
            boxes.partial_sums = variant >= 3;
            TransferOptions enumerated = boxes;
            enumerated.enumerate = true;
            // A strided index of a !Spatial split tiled again is refused up front where
            // a window's time is cut (the enumeration then): the same requests either way.
            if (!spatial) CHECK(transfer_pipeline(s, o, boxes).closed_form());
            CHECK(requests(s, o, boxes) == requests(s, o, enumerated));
          }
        }
      }
}

namespace {

TransferOptions timeloop(const std::string& name) {
  TransferOptions t = level(name, 1);
  t.convention = Convention::timeloop;
  return t;
}

}  // namespace

TEST_CASE("transfers: Timeloop's convention, the conv1d sliding window by hand") {
  // I[p + r], p < 8, r < 3; MainMemory (I, W, O at 0x0, 0x1000, 0x2000) above the p
  // loop, GlobalBuffer (node 1) above the r loop: windows [3p, 3p + 3). I's tile [p, p + 3)
  // slides by one: [0, 3) at 0, then the new element p + 2 at 3p. W's tile [0, 3) stays
  // put: read once. O's tile {p} is updated when the next window's tile replaces it, at
  // 3p + 3 (writes before the reads of that timestep), never read back.
  const Schedule s = th::compile_text(th::kConv1d);
  std::vector<TransferRequest> want{{0, 0, false, 1, 0},      {0, 1, false, 1, 0},      {0, 2, false, 1, 0},
                                    {0, 0x1000, false, 1, 1}, {0, 0x1001, false, 1, 1}, {0, 0x1002, false, 1, 1}};
  for (std::int64_t p = 1; p < 8; ++p) {
    want.push_back({3 * p, 0x2000 + std::uint64_t(p) - 1, true, 1, 2});
    want.push_back({3 * p, std::uint64_t(p) + 2, false, 1, 0});
  }
  want.push_back({24, 0x2007, true, 1, 2});
  CHECK(requests(s, {}, timeloop("MainMemory")) == want);
  // The counts are movement's parent figures for GlobalBuffer: I 10 reads (3 + 7), W 3,
  // O 8 updates and no read-back (each element is updated once).
  MovementOptions how;
  how.convention = Convention::timeloop;
  const MovementReport m = summarize_movement(s, {}, how);
  const auto& gb = m.levels.at(1);
  REQUIRE(gb.level == "GlobalBuffer");
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> parent;
  for (const auto& t : gb.tensors) parent[t.tensor] = {t.parent_reads, t.parent_updates};
  CHECK(parent["I"] == std::pair<std::int64_t, std::int64_t>{10, 0});
  CHECK(parent["W"] == std::pair<std::int64_t, std::int64_t>{3, 0});
  CHECK(parent["O"] == std::pair<std::int64_t, std::int64_t>{0, 8});
  // GlobalBuffer has no children.
  CHECK(requests(s, {}, timeloop("GlobalBuffer")).empty());
}

TEST_CASE("transfers: Timeloop's convention counts movement's parent reads and updates") {
  // On the Timeloop specs (tests/specs/timeloop, the tutorial's; the larger designs are
  // in tests/cli/test_timeloop_convention.py): per child level and tensor, the requests of
  // its parent (one element a line) are movement's parent_reads (reads) and
  // parent_updates (writes), in Timeloop's convention.
  const std::vector<std::pair<std::string, std::string>> specs{
      {"00_1level", "conv1d"},
      {"01_2level_os", "conv1d"},
      {"01_2level_ws", "conv1d"},
      {"02_2level_no_tiling", "conv1d_oc"},
      {"02_2level_tiling", "conv1d_oc"},
      {"03_3level_bypass", "conv1d_oc"},
      {"03_3level_no_bypass", "conv1d_oc"},
      {"04_3level_spatial_cp", "conv1d_oc_ic"},
      {"04_3level_spatial_kp", "conv1d_oc_ic"},
      {"05_mapper_baked", "conv1d_oc"},
      {"05_mapper_freebypass", "conv1d_oc"},
      {"05_mapper_null", "conv1d_oc"}};
  MovementOptions how;
  how.convention = Convention::timeloop;
  for (const auto& [mapping, workload] : specs) {
    CAPTURE(mapping);
    const Schedule s =
        th::compile_corpus({"timeloop/" + workload + ".workload.yaml", "timeloop/" + mapping + ".mapping.yaml"});
    std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> want, have;
    for (const auto& l : summarize_movement(s, {}, how).levels)
      for (const auto& t : l.tensors)
        if (!t.home) want[{l.level, t.tensor}] = {t.parent_reads, t.parent_updates};
    for (const std::string& l : s.memory_levels) {
      const auto r = requests(s, {}, timeloop(l));
      for (std::size_t i = 0; i < r.size(); ++i) {
        auto& c = have[{s.storages[r[i].child].level, s.tensors[r[i].tensor].name}];
        (r[i].write ? c.second : c.first) += 1;
        if (i > 0) {  // time; writes first; addresses ascending
          const auto &a = r[i - 1], &b = r[i];
          CHECK((a.timestep < b.timestep ||
                 (a.timestep == b.timestep && (a.write > b.write || (a.write == b.write && a.address <= b.address)))));
        }
      }
    }
    for (const auto& [key, counts] : want) {
      CAPTURE(key.first);
      CAPTURE(key.second);
      const auto got = have.count(key) ? have[key] : std::pair<std::int64_t, std::int64_t>{0, 0};
      CHECK(got == counts);
    }
    for (const auto& [key, counts] : have) CHECK(want.count(key) == 1);
  }
}

TEST_CASE("transfers: Timeloop's convention refuses what it does not define") {
  const Schedule s = th::compile_text(th::kConv1d);
  TraceOptions cut;
  cut.from = 3, cut.to = 9;
  CHECK(th::contains(th::spec_error([&] { requests(s, cut, timeloop("MainMemory")); }).message(), "whole run"));
  TraceOptions prefix;
  prefix.max_timesteps = 9;
  CHECK(th::contains(th::spec_error([&] { requests(s, prefix, timeloop("MainMemory")); }).message(), "whole run"));
  TransferOptions e = timeloop("MainMemory");
  e.enumerate = true;
  CHECK(th::contains(th::spec_error([&] { requests(s, {}, e); }).message(), "closed form"));
  // The stage over accesses follows SEMANTICS' fills and drains only.
  CHECK(th::contains(
      th::spec_error([&] { (void)(trace_pipeline(s, {}) | transfers(timeloop("MainMemory"))); }).message(),
      "transfer_pipeline()"));
}
