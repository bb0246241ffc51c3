// The stage protocol's promises to a stage author (issue 26's traps): a composition
// gives what the CLI gives, a stage never sees the effect of a stage after it, a
// pipeline is referenced by a view and never copied, batches are not deduplicated
// unless they say so, and stages over every batch kind compose with the same adaptors.
#include <doctest/doctest.h>

#include <range/v3/view/take.hpp>

#include <cstdint>
#include <ranges>
#include <vector>

#include "helpers.hpp"
#include "looptrace/stages/dedup.hpp"
#include "looptrace/stages/filter.hpp"
#include "looptrace/stages/keep_if.hpp"
#include "looptrace/stages/tap.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stages/transfers.hpp"
#include "looptrace/stages/transform.hpp"
#include "looptrace/stream.hpp"

using namespace looptrace;

namespace {

// The fused matmuls of the findings (../shared/findings/stages): T0 -> Matmul0 -> T1 ->
// Matmul1 -> T2 with M = 8, KN = 4: 768 accesses over 256 timesteps.
Schedule fused_matmuls() {
  return th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                            {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(8)}, {"KN", std::int64_t(4)}});
}

template <class S>
auto drain_all(S& s) {
  std::vector<std::remove_cvref_t<decltype(*s.next_batch(kEndOfTime).begin())>> out;
  for (auto b = s.next_batch(kEndOfTime); !b.empty(); b = s.next_batch(kEndOfTime))
    out.insert(out.end(), b.begin(), b.end());
  return out;
}

template <class S>
std::int64_t count_all(S&& s) {
  std::int64_t n = 0;
  for (auto b = s.next_batch(kEndOfTime); !b.empty(); b = s.next_batch(kEndOfTime)) n += std::int64_t(b.size());
  return n;
}

// A stateful stage of the kind a user writes: counts what it sees, and (finish) how
// often its source ended.
template <Source Up>
class Counter : public BatchStage<Counter<Up>, Up> {
 public:
  using Batch = BatchOf<Up>;
  explicit Counter(Up up) : BatchStage<Counter<Up>, Up>(std::move(up)) {}
  Batch process(const Batch& b) {
    seen += std::int64_t(BatchTraits<Batch>::values(b).size());
    return b;
  }
  void finish() { ++finished; }
  std::int64_t seen = 0;
  int finished = 0;
};
inline const auto counter = make_stage([](auto up) { return Counter<decltype(up)>(std::move(up)); });

// A user stage that repeats every access, returning its batch the shortest way ({buf}).
template <AccessSource Up>
class Twice : public BatchStage<Twice<Up>, Up> {
 public:
  explicit Twice(Up up) : BatchStage<Twice<Up>, Up>(std::move(up)) {}
  AccessBatch process(const AccessBatch& b) {
    buf_.clear();
    for (const AccessRecord& r : b) buf_.push_back(r), buf_.push_back(r);
    return {buf_};
  }

 private:
  std::vector<AccessRecord> buf_;
};

}  // namespace

TEST_CASE("stage traps: transfers of a cut stream are the whole run's requests in its window") {
  const Schedule s = fused_matmuls();
  TransferOptions o;
  o.level = "MainMemory";
  o.enumerate = true;
  // The run's requests in [16, 48), the way `looptrace transfers --from 16 --to 48` has them.
  auto whole = transfer_pipeline(s, {}, o);
  std::vector<TransferRequest> want;
  for (const TransferRequest& q : drain_all(whole))
    if (q.timestep >= 16 && q.timestep < 48) want.push_back(q);
  for (const auto& [from, to] : {std::pair<std::int64_t, std::int64_t>{16, 48}, {0, 16}, {5, 200}, {100, 256}}) {
    CAPTURE(from);
    CAPTURE(to);
    TraceOptions w;
    w.from = from, w.to = to;
    std::vector<TransferRequest> cut;
    auto all = transfer_pipeline(s, {}, o);
    for (const TransferRequest& q : drain_all(all))
      if (q.timestep >= from && (q.timestep < to || to == s.n_timesteps)) cut.push_back(q);
    auto piped = transfer_pipeline(s, w, o);
    CHECK(drain_all(piped) == cut);
    auto composed = trace_pipeline(s, w) | transfers(o);
    CHECK(drain_all(composed) == cut);
    std::int64_t tapped = 0;
    auto with_tap = trace_pipeline(s, w) | tap([&](const AccessBatch& b) { tapped += std::int64_t(b.size()); }) |
                    transfers(o);
    CHECK(drain_all(with_tap) == cut);
    CHECK(tapped == count_all(trace_pipeline(s, w)));  // the tap saw only its window
  }
  TraceOptions w;
  w.from = 16, w.to = 48;
  auto composed = trace_pipeline(s, w) | transfers(o);
  const auto got = drain_all(composed);
  CHECK(got == want);
  CHECK(got.size() == 2);  // the findings' case: not the fills of W0 and W1 at t = 16
  // The closed form agrees.
  TransferOptions boxes = o;
  boxes.enumerate = false;
  auto closed = transfer_pipeline(s, w, boxes);
  CHECK(drain_all(closed) == want);
  // Shards: each shard's composition is that shard of the whole run's requests.
  std::vector<TransferRequest> joined;
  for (std::int64_t i = 0; i < 3; ++i) {
    TraceOptions sh;
    sh.shard = {i, 3};
    auto part = trace_pipeline(s, sh) | transfers(o);
    const auto got_part = drain_all(part);
    joined.insert(joined.end(), got_part.begin(), got_part.end());
  }
  auto all = transfer_pipeline(s, {}, o);
  CHECK(joined == drain_all(all));
  // A prefix ends the trace: its composition is transfer_pipeline's, last drains included.
  TraceOptions p;
  p.max_timesteps = 40;
  auto prefix_composed = trace_pipeline(s, p) | transfers(o);
  auto prefix_piped = transfer_pipeline(s, p, o);
  CHECK(drain_all(prefix_composed) == drain_all(prefix_piped));
}

TEST_CASE("stage traps: transfers refuse what they cannot define") {
  const Schedule s = fused_matmuls();
  TransferOptions o;
  o.level = "MainMemory";
  TraceOptions sample;
  sample.sample_timesteps = 4;
  CHECK_THROWS_AS(trace_pipeline(s, sample) | transfers(o), SpecError);
  // Window traffic already clipped to a cut window cannot be widened again.
  TraceOptions w;
  w.from = 16, w.to = 48;
  CHECK_THROWS_AS(trace_pipeline(s, w) | tile_windows(children_of(s, "MainMemory", {})) | window_traffic(true) |
                      transfers(o),
                  SpecError);
  auto whole = trace_pipeline(s, {}) | tile_windows(children_of(s, "MainMemory", {})) | window_traffic(true) |
               transfers(o);
  auto piped = transfer_pipeline(s, {}, o);
  CHECK(drain_all(whole) == drain_all(piped));
}

TEST_CASE("stage traps: a tap before a filter sees every access; after it, the kept ones") {
  const Schedule s = fused_matmuls();
  std::int64_t before = 0, after = 0;
  auto p = trace_pipeline(s, {}) | tap([&](const AccessBatch& b) { before += std::int64_t(b.size()); }) |
           filter_traces({"T1"}) | tap([&](const AccessBatch& b) { after += std::int64_t(b.size()); });
  const std::int64_t out = count_all(p);
  CHECK(before == 768);
  TraceOptions t1;
  t1.tensors = {"T1"};
  CHECK(after == count_all(trace_pipeline(s, t1)));
  CHECK(out == after);
  CHECK(after > 0);
  CHECK(after < 768);
  // Library stages that commute with the mask still pass it down: nothing else projected.
  auto pushed = leaves(s) | project() | dedup() | merge_by_time() | filter_traces({"T1"});
  CHECK(count_all(pushed) == after);
}

TEST_CASE("stage traps: a time selection after a user stage does not seek past it") {
  const Schedule s = fused_matmuls();
  std::int64_t tapped = 0;
  auto p = leaves(s) | project() | dedup() | merge_by_time() |
           tap([&](const AccessBatch& b) { tapped += std::int64_t(b.size()); }) | from_to(100, 120);
  TraceOptions w;
  w.from = 100, w.to = 120;
  CHECK(count_all(p) == count_all(trace_pipeline(s, w)));
  // The tap saw everything up to the window's end: the stage after it dropped the rest.
  TraceOptions upto;
  upto.max_timesteps = 120;
  CHECK(tapped == count_all(trace_pipeline(s, upto)));
}

TEST_CASE("stage traps: a view refers to a named pipeline, and its state is read back") {
  const Schedule s = fused_matmuls();
  auto p = trace_pipeline(s, {}, 8) | counter;  // small batches: a view takes a few of many
  static_assert(!ranges::view_<decltype(p)>);
  static_assert(!std::ranges::view<decltype(p)>);
  std::int64_t n = 0;
  for (const AccessRecord& r : p | ranges::views::take(5)) n += r.multiplicity > 0;
  CHECK(n == 5);
  // The count landed in p, not in a copy: the first batch passed through p itself.
  auto& c = p.stage<Counter>();
  CHECK(c.seen > 0);
  const std::int64_t after_take = c.seen;
  for (const AccessRecord& r : p | std::views::take(3)) (void)r;
  CHECK(p.stage<Counter>().seen >= after_take);
  // Reading the rest through the same pipeline: every access counted once, finish once.
  const std::int64_t rest = count_all(p);
  CHECK(rest > 0);
  CHECK(p.stage<Counter>().seen == 768);
  CHECK(p.stage<Counter>().finished == 1);
  CHECK(count_all(p) == 0);
  CHECK(p.stage<Counter>().finished == 1);  // once, however often it is pulled after the end
  // std::ranges moves a temporary pipeline into the view (and owns it there).
  std::int64_t m = 0;
  for (const AccessRecord& r : trace_pipeline(s, {}) | std::views::take(7)) m += r.multiplicity > 0;
  CHECK(m == 7);
}

TEST_CASE("stage traps: a tap's function is found by its type after composition") {
  const Schedule s = fused_matmuls();
  struct Sizes {
    std::int64_t batches = 0, records = 0;
    void operator()(const AccessBatch& b) { ++batches, records += std::int64_t(b.size()); }
  };
  auto p = trace_pipeline(s, {}) | tap(Sizes{}) | keep_if([](const AccessRecord& r) { return r.element % 2 == 0; });
  const std::int64_t kept = count_all(p);
  CHECK(p.stage<Sizes>().records == 768);
  CHECK(p.stage<Sizes>().batches > 0);
  CHECK(kept < 768);
  CHECK(kept > 0);
}

TEST_CASE("stage traps: a batch is not deduplicated unless it says so") {
  const Schedule s = th::compile_text(th::kConv1d);
  CHECK(!AccessBatch{}.deduplicated);
  auto doubled = trace_pipeline(s, {}) | make_stage([](auto up) { return Twice<decltype(up)>(std::move(up)); });
  auto merged = std::move(doubled) | dedup();
  const auto got = drain_all(merged);
  const auto want = th::collect(s);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(th::Row{got[i].timestep, got[i].trace, got[i].element} == want[i]);
    CHECK(got[i].multiplicity == 2);  // both copies summed: dedup did its work
  }
}

TEST_CASE("stage protocol: tap, keep_if and transform over tile steps and transfer requests") {
  const Schedule s = th::compile_text(th::kConv1d);
  TransferOptions o;
  o.level = "MainMemory";
  auto plain = transfer_pipeline(s, {}, o);
  const auto all = drain_all(plain);
  REQUIRE(!all.empty());
  std::int64_t tapped = 0;
  auto reads = trace_pipeline(s, {}) | transfers(o) |
               tap([&](std::span<const TransferRequest> b) { tapped += std::int64_t(b.size()); }) |
               keep_if([](const TransferRequest& q) { return !q.write; }) |
               transform([](TransferRequest q) { return q.address += 1, q; });
  const auto got = drain_all(reads);
  CHECK(tapped == std::int64_t(all.size()));
  std::vector<TransferRequest> want;
  for (TransferRequest q : all)
    if (!q.write) q.address += 1, want.push_back(q);
  CHECK(got == want);
  CHECK(!want.empty());

  // Over tile steps: the accesses are the values, the window events pass as they are.
  auto windows = [&](auto&& stage) {
    std::int64_t opens = 0, accesses = 0;
    for (TileStep step = stage.next_batch(); !step.empty(); step = stage.next_batch()) {
      for (const WindowEvent& e : step.events) opens += e.kind == WindowEvent::Kind::open;
      accesses += std::int64_t(step.accesses.size());
    }
    return std::pair(opens, accesses);
  };
  const auto base = windows(trace_pipeline(s, {}) | tile_windows("GlobalBuffer"));
  CHECK(base == std::pair<std::int64_t, std::int64_t>(8, 72));  // 8 windows, 72 accesses
  std::int64_t steps = 0;
  const auto outputs = windows(trace_pipeline(s, {}) | tile_windows("GlobalBuffer") |
                               tap([&](const TileStep&) { ++steps; }) |
                               keep_if([&](const AccessRecord& r) { return s.traces[r.trace].is_output; }));
  CHECK(outputs == std::pair<std::int64_t, std::int64_t>(8, 24));  // O once per timestep
  CHECK(steps > 8);
  // window_traffic still runs after a stage over tile steps (the plan is forwarded).
  auto traffic = trace_pipeline(s, {}) | tile_windows("GlobalBuffer") | tap([](const TileStep&) {}) |
                 window_traffic();
  std::int64_t fills = 0;
  for (auto b = traffic.next_batch(); !b.empty(); b = traffic.next_batch())
    for (const TileTraffic& t : b) fills += t.fills;
  CHECK(fills == 48);  // SEMANTICS' worked example: I 24 + W 24
}

TEST_CASE("stage protocol: an aggregating stage with a finish hook, read back after composition") {
  const Schedule s = th::compile_text(th::kConv1d);
  // Reuse distance in timesteps per (trace, element), as a histogram finished at the end.
  struct ReuseHistogram {
    std::vector<std::vector<std::int64_t>> last;  // per trace, per element: last timestep
    std::vector<std::int64_t> histogram;          // distance -> count
    std::int64_t total = 0;
    bool done = false;
  };
  auto p = trace_pipeline(s, {}) | counter;
  ReuseHistogram h;
  h.last.resize(s.traces.size());
  for (std::size_t t = 0; t < s.traces.size(); ++t)
    h.last[t].assign(std::size_t(s.tensors[std::size_t(s.find_tensor(s.traces[t].tensor))].size), -1);
  auto q = std::move(p) | tap([&](const AccessBatch& b) {
             for (const AccessRecord& r : b) {
               std::int64_t& l = h.last[r.trace][std::size_t(r.element)];
               if (l >= 0) {
                 const std::size_t d = std::size_t(r.timestep - l);
                 if (h.histogram.size() <= d) h.histogram.resize(d + 1);
                 ++h.histogram[d];
               }
               l = r.timestep, ++h.total;
             }
           });
  for (const AccessRecord& r : q) (void)r;
  CHECK(h.total == 72);
  CHECK(q.stage<Counter>().seen == 72);
  CHECK(q.stage<Counter>().finished == 1);
  // conv1d: W[r] is read every 3 timesteps (24 reads, 3 first); O[p] at 3 consecutive
  // timesteps (24 writes, 8 first); I[p + r] at distance 2 (its next p): 24 reads, 10 first.
  std::int64_t reuses = 0;
  for (std::int64_t c : h.histogram) reuses += c;
  CHECK(reuses == 72 - 3 - 8 - 10);
  REQUIRE(h.histogram.size() > 3);
  CHECK(h.histogram[3] == 21);  // W
  CHECK(h.histogram[1] == 16);  // O
  CHECK(h.histogram[2] == 14);  // I: every read but the first of each element
}
