// The stages composed by hand: without dedup, with tile windows, in another order,
// with range-v3's views; each checked against values worked out by hand or against
// the standard pipeline.
#include <doctest/doctest.h>

#include <map>
#include <range/v3/view/chunk.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/take.hpp>
#include <ranges>

#include "helpers.hpp"
#include "looptrace/stages/keep_if.hpp"
#include "looptrace/stages/tap.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stages/transfers.hpp"
#include "looptrace/stages/transform.hpp"
#include "looptrace/stream.hpp"

using looptrace::AccessRecord;
using looptrace::Schedule;
using namespace looptrace;

namespace {

template <class Stage>
std::vector<AccessRecord> drain(Stage& stage) {
  std::vector<AccessRecord> out;
  for (auto b = stage.next_batch(kEndOfTime); !b.empty(); b = stage.next_batch(kEndOfTime))
    out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<th::Row> rows_of(const std::vector<AccessRecord>& records) {
  std::vector<th::Row> out;
  for (const auto& r : records) out.emplace_back(r.timestep, r.trace, r.element);
  return out;
}

// One timestep over a 2 x 3 tile of (i, j): S reads X[i + j] (separable: one rank of
// two variables) and D reads V[i + j, i + j] (not separable: i and j feed both ranks).
const char* kSums = R"(
workload:
  iteration_space_shape: {i: 0 <= i < 2, j: 0 <= j < 3}
  einsums:
  - name: S
    tensor_accesses:
    - {name: X, projection: {A: i + j}}
    - {name: Y, projection: [i], output: True}
  - name: D
    tensor_accesses:
    - {name: V, projection: {A: i + j, B: i + j}}
    - {name: U, projection: [i], output: True}
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [X, Y, V, U]}
  - !Sequential
    nodes:
    - !Compute {einsum: S, component: MAC}
    - !Compute {einsum: D, component: MAC}
)";

}  // namespace

TEST_CASE("stages: projection yields the multiset of (point, tensor); dedup merges it") {
  const Schedule s = th::compile_text(kSums);
  // S at t = 0: X[i + j] over i < 2, j < 3 takes 0, 1, 1, 2, 2, 3: values 0..3 with
  // 1, 2, 2, 1 points; Y[i] takes 0 and 1 with 3 points each. Separable: already
  // deduplicated. D at t = 1: V[i + j, i + j] is projected point by point.
  auto raw = leaves(s) | project() | merge_by_time();
  const auto records = drain(raw);
  std::map<std::pair<std::int64_t, std::string>, std::vector<std::pair<std::int64_t, std::uint32_t>>> got;
  for (const auto& r : records) got[{r.timestep, s.traces[r.trace].tensor}].emplace_back(r.element, r.multiplicity);
  using P = std::vector<std::pair<std::int64_t, std::uint32_t>>;
  CHECK(got[{0, "X"}] == P{{0, 1}, {1, 2}, {2, 2}, {3, 1}});
  CHECK(got[{0, "Y"}] == P{{0, 3}, {1, 3}});
  // V is 4 x 4 (i + j < 4): element (a, a) is 5a; points in order (i, j) = (0,0) (0,1) ...
  CHECK(got[{1, "V"}] == P{{0, 1}, {5, 1}, {10, 1}, {5, 1}, {10, 1}, {15, 1}});
  std::uint64_t points = 0;
  for (const auto& r : records) points += r.multiplicity;
  CHECK(points == 4 * 6);  // every point of both leaves, once per tensor

  auto deduplicated = leaves(s) | project() | dedup() | merge_by_time();
  const auto unique = drain(deduplicated);
  got.clear();
  for (const auto& r : unique) got[{r.timestep, s.traces[r.trace].tensor}].emplace_back(r.element, r.multiplicity);
  CHECK(got[{1, "V"}] == P{{0, 1}, {5, 2}, {10, 2}, {15, 1}});
  CHECK(got[{0, "X"}] == P{{0, 1}, {1, 2}, {2, 2}, {3, 1}});
  CHECK(rows_of(unique) == th::collect(s));  // the standard pipeline dedups too
}

TEST_CASE("stages: filter and selection commute, and filtering pushes down") {
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(4)}, {"KN", std::int64_t(4)}});
  TraceOptions window;
  window.from = 17, window.to = 90;
  auto late = leaves(s) | project() | dedup() | merge_by_time() | select_time(window) | filter_traces({"T1"});
  auto early = leaves(s) | project() | dedup() | merge_by_time() | filter_traces({"T1"}) | select_time(window);
  const auto a = drain(late), b = drain(early);
  REQUIRE(!a.empty());
  CHECK(rows_of(a) == rows_of(b));
  // ... and both equal the unfiltered window with T1 picked out by hand.
  auto all = leaves(s) | project() | dedup() | merge_by_time() | select_time(window);
  std::vector<th::Row> by_hand;
  for (const auto& r : drain(all))
    if (s.traces[r.trace].tensor == "T1") by_hand.emplace_back(r.timestep, r.trace, r.element);
  CHECK(rows_of(a) == by_hand);
  // Pushed down: only Matmul0 reads T0, so the merge keeps its leaf alone.
  auto t0 = leaves(s) | project() | dedup() | merge_by_time() | filter_traces({"T0"});
  CHECK(t0.upstream().leaves().size() == 1);
}

TEST_CASE("stages: range-v3 views take, chunk and filter a pipeline") {
  const Schedule s = th::compile_text(th::kConv1d);
  const auto all = th::collect(s);
  REQUIRE(all.size() == 72);
  // A named pipeline is referenced by the view (not a view itself: never copied).
  std::vector<th::Row> first;
  auto named = trace_pipeline(s, {});
  for (const AccessRecord& r : named | ranges::views::take(5))
    first.emplace_back(r.timestep, r.trace, r.element);
  CHECK(first == std::vector<th::Row>(all.begin(), all.begin() + 5));
  static_assert(!ranges::view_<TracePipeline>);
  static_assert(!std::ranges::view<TracePipeline>);
  static_assert(ranges::input_range<TracePipeline&>);

  auto pipeline = leaves(s) | project() | dedup() | merge_by_time();
  std::size_t chunks = 0, total = 0;
  for (auto chunk : pipeline | ranges::views::chunk(10)) {
    std::size_t n = 0;
    for (const AccessRecord& r : chunk) {
      CHECK(th::Row{r.timestep, r.trace, r.element} == all[total + n]);
      ++n;
    }
    CHECK(n == (chunks < 7 ? 10u : 2u));
    total += n, ++chunks;
  }
  CHECK(chunks == 8);
  CHECK(total == 72);

  auto traced = trace_pipeline(s, {});
  auto outputs = traced |
                 ranges::views::filter([&](const AccessRecord& r) { return s.traces[r.trace].is_output; });
  std::int64_t last = -1, n = 0;
  for (const AccessRecord& r : outputs) {
    CHECK(r.timestep > last);  // one O access per timestep, in time order
    last = r.timestep, ++n;
  }
  CHECK(n == 24);
}

TEST_CASE("stages: copying a timestep forward along a run equals projecting each one") {
  // One operation per timestep with a partial last tile of m (10 = 3 + 3 + 3 + 1): runs
  // of the innermost loop translate, the cut tile does not. Batches of one record
  // never have room to copy forward; batches of 4096 do.
  const Schedule s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 10, k: 0 <= k < 5, n: 0 <= n < 7}
  einsums:
  - name: Z
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: B, projection: [k, n]}
    - {name: Z, projection: [m, n], output: True}
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B, Z]}
  - !Temporal {rank_variable: n, tile_shape: 2}
  - !Temporal {rank_variable: m, tile_shape: 3}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
)");
  const auto copied = th::collect(s, {}, 4096), projected = th::collect(s, {}, 1);
  CHECK(copied.size() == 10 * 5 * 7 * 3);
  CHECK(copied == projected);
  TraceOptions window;
  window.from = 11, window.to = 297;
  CHECK(th::collect(s, window, 4096) == th::restrict_to(projected, 11, 297));
}

TEST_CASE("stages: tile windows of the conv1d worked example") {
  // GlobalBuffer holds I, W, O in 8 windows [3p, 3p + 3); every access lies in the
  // window of its timestep; MainMemory's one window [0, 24) holds them all.
  const Schedule s = th::compile_text(th::kConv1d);
  auto windows = trace_pipeline(s, {}) | tile_windows("GlobalBuffer");
  std::vector<std::pair<std::int64_t, std::int64_t>> opened, closed;
  std::size_t accesses = 0;
  for (TileStep step = windows.next_batch(); !step.empty(); step = windows.next_batch()) {
    for (const WindowEvent& e : step.events)
      (e.kind == WindowEvent::Kind::open ? opened : closed).emplace_back(e.start, e.end);
    for (const AccessRecord& r : step.accesses) {
      const int h = windows.holder(r.trace);
      REQUIRE(h >= 0);
      CHECK(s.storages[std::size_t(h)].level == "GlobalBuffer");
      const TimeRange w = windows.window(std::uint32_t(h));
      CHECK(w.from == r.timestep / 3 * 3);
      CHECK(w.to == w.from + 3);
      ++accesses;
    }
  }
  th::Windows want;
  for (std::int64_t p = 0; p < 8; ++p) want.emplace_back(3 * p, 3 * p + 3);
  CHECK(opened == want);
  CHECK(closed == want);
  CHECK(accesses == 72);

  // The element-wise view, for a prefix of 7: windows clipped at 7, closes before opens.
  TraceOptions prefix;
  prefix.max_timesteps = 7;
  std::vector<std::string> kinds;
  for (const TileEvent& e : trace_pipeline(s, prefix) | tile_windows("MainMemory")) {
    if (e.kind == TileEvent::Kind::access) {
      CHECK(e.start == 0);
      CHECK(e.end == 7);
    } else {
      kinds.push_back((e.kind == TileEvent::Kind::open ? "open " : "close ") + std::to_string(e.start) +
                      "-" + std::to_string(e.end));
    }
  }
  CHECK(kinds == std::vector<std::string>{"open 0-7", "close 0-7"});
  CHECK(th::contains(th::spec_error([&] { (void)(trace_pipeline(s, {}) | tile_windows("L3")); }).message(),
                     "levels: MainMemory, GlobalBuffer"));
}

TEST_CASE("stages: iterations merge in time order like accesses") {
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(4)}, {"KN", std::int64_t(4)}});
  auto iterations = leaves(s) | merge_by_time();
  std::int64_t last = -1, n = 0;
  for (const Iteration& it : iterations) {
    CHECK(it.timestep >= last);
    last = it.timestep, ++n;
  }
  // One operation per timestep: as many iterations as points, as the summary counts.
  CHECK(n == looptrace::summarize(s).n_points);
}

namespace {

// A filter written as a user would, from the public headers: one function over batches.
template <AccessSource Up>
class OnlyEinsum : public BatchStage<OnlyEinsum<Up>, Up> {
 public:
  OnlyEinsum(Up up, int einsum) : BatchStage<OnlyEinsum<Up>, Up>(std::move(up)), einsum_(einsum) {}
  AccessBatch process(const AccessBatch& batch) {
    kept_.clear();
    for (const AccessRecord& r : batch)
      if (this->schedule().traces[r.trace].einsum_index == einsum_) kept_.push_back(r);
    return {kept_, batch.deduplicated};
  }

 private:
  int einsum_;
  std::vector<AccessRecord> kept_;
};

template <class Stage>
std::int64_t count_accesses(Stage&& stage) {
  std::int64_t n = 0;
  for (auto b = stage.next_batch(kEndOfTime); !b.empty(); b = stage.next_batch(kEndOfTime)) n += std::int64_t(b.size());
  return n;
}

}  // namespace

TEST_CASE("stages: a user filter of one Einsum counts what the Einsum filter counts") {
  // The fused matmuls interleave their Einsums: batches with nothing kept come first.
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}});
  for (int e = 0; e < int(s.einsums.size()); ++e) {
    TraceOptions only;
    only.einsums = {s.einsums[std::size_t(e)]};
    const std::int64_t want = count_accesses(trace_pipeline(s, only));
    CHECK(want > 0);
    auto kept = trace_pipeline(s, {}) | keep_if([&](const AccessRecord& r) { return s.traces[r.trace].einsum_index == e; });
    CHECK(count_accesses(kept) == want);
    CHECK(count_accesses(OnlyEinsum(trace_pipeline(s, {}), e)) == want);
    // Pulled with a horizon, the filter still hands over everything before it.
    auto halves = trace_pipeline(s, {}) | keep_if([&](const AccessRecord& r) { return s.traces[r.trace].einsum_index == e; });
    std::int64_t n = 0;
    for (const std::int64_t until : {s.n_timesteps / 2, kEndOfTime})
      for (auto b = halves.next_batch(until); !b.empty(); b = halves.next_batch(until)) {
        CHECK(b.back().timestep < until);
        n += std::int64_t(b.size());
      }
    CHECK(n == want);
  }
}

TEST_CASE("stages: tile windows after a user stage keep the selected window") {
  const Schedule s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                        {{"N_EINSUMS", std::int64_t(2)}});
  TraceOptions window;
  window.from = 16, window.to = 48;
  auto windows_of = [](auto&& stage) {
    std::vector<std::pair<std::int64_t, std::int64_t>> opened;
    std::int64_t accesses = 0;
    for (TileStep step = stage.next_batch(); !step.empty(); step = stage.next_batch()) {
      for (const WindowEvent& e : step.events)
        if (e.kind == WindowEvent::Kind::open) opened.emplace_back(e.start, e.end);
      accesses += std::int64_t(step.accesses.size());
    }
    return std::pair(opened, accesses);
  };
  std::int64_t tapped = 0;
  const auto plain = windows_of(trace_pipeline(s, window) | tile_windows("GlobalBuffer"));
  auto user = trace_pipeline(s, window) | tap([&](const AccessBatch& b) { tapped += std::int64_t(b.size()); }) |
              keep_if([](const AccessRecord&) { return true; }) | tile_windows("GlobalBuffer");
  CHECK(user.context().window.from == 16);
  CHECK(user.context().window.to == 48);
  const auto after_user = windows_of(user);
  CHECK(after_user == plain);
  CHECK(tapped == plain.second);
  REQUIRE(!plain.first.empty());
  for (const auto& [start, end] : plain.first) {
    CHECK(start >= 16);
    CHECK(end <= 48);
  }
  // transform keeps the window too, and its batches count as not deduplicated.
  auto moved = trace_pipeline(s, window) | transform([](AccessRecord r) { return r; }) | tile_windows("GlobalBuffer");
  CHECK(windows_of(moved) == plain);
}

TEST_CASE("stages: transfers after a user stage are the transfer pipeline's") {
  const Schedule s = th::compile_text(th::kConv1d);
  TransferOptions options;
  options.level = "MainMemory";
  auto drain_requests = [](auto&& stage) {
    std::vector<TransferRequest> out;
    for (auto b = stage.next_batch(kEndOfTime); !b.empty(); b = stage.next_batch(kEndOfTime))
      out.insert(out.end(), b.begin(), b.end());
    return out;
  };
  const auto want = drain_requests(transfer_pipeline(s, {}, options));
  REQUIRE(!want.empty());
  std::int64_t seen = 0;
  auto composed = trace_pipeline(s, {}) | tap([&](const AccessBatch& b) { seen += std::int64_t(b.size()); }) |
                  transfers(options);
  CHECK(drain_requests(composed) == want);
  CHECK(seen == 72);
  // Pulled with a horizon: the requests before it, then the rest.
  auto halves = trace_pipeline(s, {}) | transfers(options);
  std::vector<TransferRequest> got;
  for (const std::int64_t until : {std::int64_t(12), kEndOfTime})
    for (auto b = halves.next_batch(until); !b.empty(); b = halves.next_batch(until))
      for (const TransferRequest& q : b) {
        CHECK(q.timestep < until);
        got.push_back(q);
      }
  CHECK(got == want);
}

TEST_CASE("stages: a pipeline copied midway goes on as the original does") {
  const Schedule s = th::compile_text(th::kConv1d);
  const auto all = th::collect(s);
  REQUIRE(all.size() == 72);
  // Small batches, so that the copy happens with records in the stages' buffers.
  auto a = leaves(s) | project(kDefaultMaxTilePoints, 8) | dedup() | merge_by_time(8);
  std::vector<AccessRecord> seen;
  for (int k = 0; k < 3; ++k) {
    const AccessBatch batch = a.next_batch(kEndOfTime);
    REQUIRE(!batch.empty());
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  auto b = a;  // every stage's state and buffers
  const auto rest_a = drain(a), rest_b = drain(b);
  CHECK(!rest_a.empty());
  CHECK(rows_of(rest_a) == rows_of(rest_b));
  seen.insert(seen.end(), rest_a.begin(), rest_a.end());
  CHECK(rows_of(seen) == all);
}

TEST_CASE("stages: a record buffer keeps its records as it grows, copies and moves") {
  RecordBuffer buffer;
  CHECK(buffer.size() == 0);
  for (std::int64_t i = 0; i < 1000; ++i) *buffer.grow(1) = {i, 2 * i, 0, 1};  // regrows many times
  AccessRecord* block = buffer.grow(5000);  // one big step past the capacity
  for (std::int64_t i = 0; i < 5000; ++i) block[i] = {1000 + i, 2 * (1000 + i), 0, 1};
  REQUIRE(buffer.size() == 6000);
  auto intact = [](const RecordBuffer& b, std::size_t n) {
    if (b.size() != n) return false;
    for (std::size_t i = 0; i < n; ++i)
      if (b.data()[i].timestep != std::int64_t(i) || b.data()[i].element != 2 * std::int64_t(i)) return false;
    return true;
  };
  CHECK(intact(buffer, 6000));
  RecordBuffer copy = buffer;
  CHECK(intact(copy, 6000));
  CHECK(copy.data() != buffer.data());
  RecordBuffer moved = std::move(copy);
  CHECK(intact(moved, 6000));
  CHECK(copy.size() == 0);
  buffer.clear();
  CHECK(buffer.size() == 0);
  CHECK(buffer.grow(6000) == buffer.data());  // refilled in place, no regrowth
  copy = moved;
  CHECK(intact(copy, 6000));
}

TEST_CASE("stages: coordinates unravel row-major, copy and compare") {
  const std::vector<std::int64_t> shape{3, 4, 5};
  const Coordinates c = unravel(2 * 20 + 3 * 5 + 4, shape);
  REQUIRE(c.size() == 3);
  CHECK(c[0] == 2);
  CHECK(c[1] == 3);
  CHECK(c[2] == 4);
  CHECK(c.back() == 4);
  Coordinates d = c;
  CHECK(d == c);
  d[0] = 1;
  CHECK(!(d == c));
  d = c;
  CHECK(d == c);
  CHECK(unravel(0, shape) == Coordinates(3));
  CHECK(unravel(7, std::vector<std::int64_t>{}).empty());
  const std::span<const std::int64_t> view = c;
  CHECK(std::vector<std::int64_t>(view.begin(), view.end()) == std::vector<std::int64_t>{2, 3, 4});
}

TEST_CASE("stages: coordinates of more ranks than they hold throw, never overrun") {
  const std::vector<std::int64_t> shape(kMaxRanks + 1, 2);
  CHECK_THROWS_AS(unravel(0, shape), std::length_error);
  CHECK_THROWS_AS(Coordinates(kMaxRanks + 1), std::length_error);
  CHECK(unravel(0, std::vector<std::int64_t>(kMaxRanks, 2)).size() == kMaxRanks);
}
