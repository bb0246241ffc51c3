// Invariants of the streamed trace over many specs: time order, coverage, counts that
// agree with the summary's closed-form counting, and selections (prefix, window, shard,
// sample, filters) that agree with the full stream.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <ranges>
#include <set>
#include <string>

#include "helpers.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"

#ifdef LOOPTRACE_HAVE_RANGE_V3
#include <range/v3/range/concepts.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/transform.hpp>
#endif

using looptrace::AccessStream;
using looptrace::Schedule;
using looptrace::summarize;
using looptrace::TraceOptions;
using th::Row;

namespace {

struct NamedSpec {
  std::string name;
  Schedule schedule;
  bool tile_one = false;  // every compute is one point, one leaf per timestep
  bool dense = true;      // every element of every tensor is touched
  bool spatial_reuse = false;  // a loop inside a spatial loop over the same variable
};

Schedule inline_spec(const std::string& workload, const std::string& nodes) {
  return th::compile_text(workload + "mapping:\n  nodes:\n" + nodes);
}

const char* kMatmul = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 7, k: 0 <= k < 5, n: 0 <= n < 6}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
)";

const char* kConvBox = R"(
workload:
  einsums:
  - name: Conv
    iteration_space_shape: ["0 <= p + r < 9", "0 <= r < 3"]
    tensor_accesses:
    - {name: I, projection: {H: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
)";

// Non-separable: p feeds two ranks; a coefficient of 2; a rank fed by two variables.
const char* kMixed = R"(
workload:
  iteration_space_shape: {p: 0 <= p < 5, r: 0 <= r < 3, c: 0 <= c < 2}
  einsums:
  - name: Mix
    tensor_accesses:
    - {name: D, projection: {X: p, Y: p + c}}
    - {name: S, projection: {H: 2*p + r, C: c}}
    - {name: O, projection: [p, c], output: True}
)";

const std::vector<NamedSpec>& specs() {
  static const std::vector<NamedSpec> all = [] {
    std::vector<NamedSpec> v;
    auto corpus = [&](std::string name, std::vector<std::string> files, th::Defines vars,
                      bool tile_one) {
      v.push_back({std::move(name), th::compile_corpus(files, vars), tile_one, true});
    };
    using I = std::int64_t;
    corpus("conv1d", {"conv1d.workload.yaml", "conv1d.mapping.yaml"}, {}, true);
    corpus("conv2d", {"conv2d.workload.yaml", "conv2d.mapping.yaml"}, {}, false);
    corpus("matmuls-unfused", {"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"},
           {{"N_EINSUMS", I(2)}, {"M", I(8)}, {"KN", I(4)}}, true);
    corpus("matmuls-fused", {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
           {{"N_EINSUMS", I(2)}, {"M", I(8)}, {"KN", I(4)}}, true);
    corpus("matmuls-fused-3", {"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
           {{"N_EINSUMS", I(3)}, {"M", I(3)}, {"KN", I(3)}}, true);
    corpus("matvecs-unfused", {"matvecs.yaml", "unfused_matvecs_to_simple.mapping.yaml"}, {}, true);
    corpus("matvecs-tiled", {"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"}, {}, true);
    corpus("matvecs-reuse-A", {"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"}, {}, true);
    corpus("matvecs-untiled", {"matvecs.yaml", "fused_matvecs_to_simple_untiled.mapping.yaml"}, {}, true);
    corpus("matvecs-pipeline", {"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}, {}, false);
    corpus("simple-fused", {"simple_fused.workload.yaml", "simple_fused.mapping.yaml"}, {}, true);
    corpus("matmul-spatial", {"matmuls.yaml", "matmul_spatial.mapping.yaml"},
           {{"N_EINSUMS", I(1)}, {"M", I(8)}, {"KN", I(4)}}, false);
    corpus("matmul-imperfect", {"matmuls.yaml", "matmul_imperfect.mapping.yaml"},
           {{"N_EINSUMS", I(1)}, {"M", I(8)}, {"KN", I(7)}}, false);

    auto add = [&](std::string name, Schedule s, bool tile_one, bool dense = true,
                   bool spatial_reuse = false) {
      v.push_back({std::move(name), std::move(s), tile_one, dense, spatial_reuse});
    };
    add("matmul-tile1",
        inline_spec(kMatmul,
                    "  - !Temporal {rank_variable: m, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: n, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: k, tile_shape: 1}\n"
                    "  - !Compute {einsum: Z}\n"),
        true);
    add("matmul-imperfect-nested",
        inline_spec(kMatmul,
                    "  - !Temporal {rank_variable: m, tile_shape: 3}\n"
                    "  - !Temporal {rank_variable: n, tile_shape: 4, initial_tile_shape: 2}\n"
                    "  - !Temporal {rank_variable: m, tile_shape: 2}\n"
                    "  - !Temporal {rank_variable: k, tile_shape: 2, initial_tile_shape: 3}\n"
                    "  - !Temporal {rank_variable: n, tile_shape: 1}\n"
                    "  - !Compute {einsum: Z}\n"),
        false);
    add("matmul-spatial-mixed",
        inline_spec(kMatmul,
                    "  - !Temporal {rank_variable: m, tile_shape: 4}\n"
                    "  - !Spatial {rank_variable: n, tile_shape: 4}\n"
                    "  - !Spatial {rank_variable: m, tile_shape: 3}\n"
                    "  - !Temporal {rank_variable: k, tile_shape: 2}\n"
                    "  - !Temporal {rank_variable: n, tile_shape: 1}\n"
                    "  - !Compute {einsum: Z}\n"),
        false, true, /*spatial_reuse=*/true);
    add("matmul-spatial-innermost",
        inline_spec(kMatmul,
                    "  - !Temporal {rank_variable: k, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: n, tile_shape: 4, initial_tile_shape: 1}\n"
                    "  - !Spatial {rank_variable: n, tile_shape: 2}\n"
                    "  - !Compute {einsum: Z}\n"),
        false);
    add("matmul-untiled-k-innermost-loop-over-m",
        inline_spec(kMatmul,
                    "  - !Temporal {rank_variable: n, tile_shape: 5}\n"
                    "  - !Temporal {rank_variable: m, tile_shape: 2}\n"
                    "  - !Compute {einsum: Z}\n"),
        false);
    add("conv-box-tile1",
        inline_spec(kConvBox,
                    "  - !Temporal {rank_variable: p, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: r, tile_shape: 1}\n"
                    "  - !Compute {einsum: Conv}\n"),
        true);
    add("conv-box-tiled-p",
        inline_spec(kConvBox,
                    "  - !Temporal {rank_variable: r, tile_shape: 2}\n"
                    "  - !Temporal {rank_variable: p, tile_shape: 4}\n"
                    "  - !Compute {einsum: Conv}\n"),
        false);
    add("conv-box-spatial-r",
        inline_spec(kConvBox,
                    "  - !Spatial {rank_variable: r, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: p, tile_shape: 2, initial_tile_shape: 1}\n"
                    "  - !Compute {einsum: Conv}\n"),
        false);
    add("reversed-and-strided",
        inline_spec(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 5, r: 0 <= r < 2}
  einsums:
  - name: Rev
    tensor_accesses:
    - {name: X, projection: {X: 4 - p + r}}
    - {name: S, projection: {S: 2*p - r + 1}}
    - {name: O, projection: {P: 4 - p}, output: True}
)",
                    "  - !Temporal {rank_variable: p, tile_shape: 2, initial_tile_shape: 1}\n"
                    "  - !Compute {einsum: Rev}\n"),
        false, false);
    add("mixed-tile1",
        inline_spec(kMixed,
                    "  - !Temporal {rank_variable: c, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: p, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: r, tile_shape: 1}\n"
                    "  - !Compute {einsum: Mix}\n"),
        true, false);
    add("mixed-tiled",
        inline_spec(kMixed,
                    "  - !Temporal {rank_variable: r, tile_shape: 2}\n"
                    "  - !Spatial {rank_variable: c, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: p, tile_shape: 2}\n"
                    "  - !Compute {einsum: Mix}\n"),
        false, false);
    add("mixed-spatial-p",
        inline_spec(kMixed,
                    "  - !Temporal {rank_variable: c, tile_shape: 1}\n"
                    "  - !Spatial {rank_variable: p, tile_shape: 2}\n"
                    "  - !Temporal {rank_variable: r, tile_shape: 1}\n"
                    "  - !Temporal {rank_variable: p, tile_shape: 1}\n"
                    "  - !Compute {einsum: Mix}\n"),
        false, false, /*spatial_reuse=*/true);
    return v;
  }();
  return all;
}

// conv1d with p tiled by 4 and r whole: I[p + r] overlaps across a tile's points.
Schedule tiled_conv1d() {
  return th::compile_text(R"(
workload:
  iteration_space_shape: {p: 0 <= p < 8, r: 0 <= r < 3}
  einsums:
  - "O[p] = I[H: p + r] * W[r]"
mapping:
  nodes:
  - !Temporal {rank_variable: p, tile_shape: 4}
  - !Compute {einsum: O}
)");
}

std::vector<const NamedSpec*> good_specs() {
  std::vector<const NamedSpec*> out;
  for (const auto& s : specs()) out.push_back(&s);
  return out;
}

// Several selections of a schedule, each a (label, options) pair.
std::vector<std::pair<std::string, TraceOptions>> selections(const Schedule& s) {
  std::vector<std::pair<std::string, TraceOptions>> out;
  const std::int64_t n = s.n_timesteps;
  out.emplace_back("full", TraceOptions{});
  for (std::int64_t cut : {std::int64_t(0), std::int64_t(1), n / 3, n / 2 + 1, n - 1, n, n + 5}) {
    TraceOptions o;
    o.max_timesteps = cut;
    out.emplace_back("prefix " + std::to_string(cut), o);
  }
  for (auto [a, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, n - 1}, {n / 3, 2 * n / 3 + 1}, {n / 2, n / 2}, {n - 1, n + 3}, {2, 3}}) {
    TraceOptions o;
    o.from = a;
    o.to = b;
    out.emplace_back("window " + std::to_string(a) + ".." + std::to_string(b), o);
  }
  {
    TraceOptions o;
    o.from = n / 4;  // open-ended
    out.emplace_back("from " + std::to_string(n / 4), o);
  }
  for (std::int64_t k = 0; k < 3; ++k) {
    TraceOptions o;
    o.shard = {k, 3};
    out.emplace_back("shard " + std::to_string(k) + "/3", o);
  }
  for (std::uint64_t seed : {1u, 7u}) {
    TraceOptions o;
    o.sample_timesteps = std::max<std::int64_t>(1, n / 4);
    o.seed = seed;
    out.emplace_back("sample seed " + std::to_string(seed), o);
  }
  {
    TraceOptions o;  // a window, then a shard of it, then a sample of that
    o.from = 1;
    o.to = n - 1;
    o.shard = {1, 2};
    o.sample_timesteps = 3;
    o.seed = 3;
    out.emplace_back("window+shard+sample", o);
  }
  if (s.tensors.size() > 1) {
    TraceOptions o;
    o.tensors = {s.tensors.back().name};
    o.max_timesteps = n - 1;
    out.emplace_back("tensor " + s.tensors.back().name + " prefix", o);
  }
  if (s.einsums.size() > 1) {
    TraceOptions o;
    o.einsums = {s.einsums.back()};
    o.from = 1;
    out.emplace_back("einsum " + s.einsums.back(), o);
  }
  return out;
}

// Whether `rows` are the rows of `full` that `keep` accepts, in the same order.
template <class Keep>
bool is_restriction(const std::vector<Row>& rows, const std::vector<Row>& full, Keep keep) {
  std::vector<Row> want;
  for (const auto& r : full)
    if (keep(r)) want.push_back(r);
  return rows == want;
}

}  // namespace

TEST_CASE("stream: accesses come in time order, inside the schedule, with valid elements") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    CAPTURE(spec.name);
    const Schedule& s = spec.schedule;
    const auto rows = th::collect(s);
    REQUIRE_FALSE(rows.empty());
    CHECK(std::is_sorted(rows.begin(), rows.end(),
                         [](const Row& a, const Row& b) { return std::get<0>(a) < std::get<0>(b); }));
    // within a timestep: leaves in tree order, a leaf's tensors in access order (trace
    // ids grow that way when no Einsum has two leaves), each tile's elements ascending
    // and distinct
    bool ordered = true;
    for (std::size_t k = 1; k < rows.size(); ++k)
      if (std::get<0>(rows[k]) == std::get<0>(rows[k - 1]) &&
          std::make_pair(std::get<1>(rows[k]), std::get<2>(rows[k])) <=
              std::make_pair(std::get<1>(rows[k - 1]), std::get<2>(rows[k - 1])))
        ordered = false;
    CHECK(ordered);
    CHECK(std::get<0>(rows.front()) >= 0);
    CHECK(std::get<0>(rows.back()) < s.n_timesteps);
    for (const auto& [t, trace, element] : rows) {
      const auto& tensor = s.tensors[std::size_t(s.traces[trace].tensor_index)];
      CHECK(element >= 0);
      CHECK(element < tensor.size);
    }
  }
}

TEST_CASE("stream: a tile-1 mapping computes exactly once per timestep") {
  int checked = 0;
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    if (!spec.tile_one) continue;
    CAPTURE(spec.name);
    ++checked;
    const auto sum = summarize(spec.schedule);
    CHECK(sum.n_points == spec.schedule.n_timesteps);
    // and every timestep has accesses: so no timestep computes twice or not at all
    std::set<std::int64_t> steps;
    for (const auto& r : th::collect(spec.schedule)) steps.insert(std::get<0>(r));
    CHECK(std::int64_t(steps.size()) == spec.schedule.n_timesteps);
  }
  CHECK(checked >= 10);
}

TEST_CASE("stream: every element of every tensor is touched") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    if (!spec.dense) continue;
    CAPTURE(spec.name);
    const Schedule& s = spec.schedule;
    std::vector<std::set<std::int64_t>> seen(s.tensors.size());
    for (const auto& [t, trace, element] : th::collect(s))
      seen[std::size_t(s.traces[trace].tensor_index)].insert(element);
    for (std::size_t i = 0; i < s.tensors.size(); ++i) {
      CAPTURE(s.tensors[i].name);
      CHECK(std::int64_t(seen[i].size()) == s.tensors[i].size);
    }
  }
}

TEST_CASE("stream: the number of accesses per trace equals the summary's n_accesses") {
  // The summary counts in closed form (counts.hpp); the stream emits.
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    for (const auto& [label, o] : selections(s)) {
      CAPTURE(spec.name);
      CAPTURE(label);
      const auto sum = summarize(s, o);
      const auto rows = th::collect(s, o);
      CHECK(th::per_trace(s, rows) == th::summary_counts(s, sum));
      // the span of each Einsum is that of its output's accesses
      for (const auto& span : sum.einsum_timespans) {
        std::int64_t first = -1, last = -1;
        for (const auto& [t, trace, element] : rows)
          if (s.traces[trace].einsum == span.einsum && s.traces[trace].is_output) {
            if (first < 0) first = t;
            last = t;
          }
        if (o.tensors.empty()) {
          CHECK(span.first == first);
          CHECK(span.end == last + 1);
        }
      }
    }
  }
}

TEST_CASE("stream: a prefix is the full stream cut at N") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    const auto full = th::collect(s);
    for (std::int64_t n : {std::int64_t(0), std::int64_t(1), s.n_timesteps / 2 + 1, s.n_timesteps - 1,
                           s.n_timesteps + 2}) {
      CAPTURE(spec.name);
      CAPTURE(n);
      TraceOptions o;
      o.max_timesteps = n;
      CHECK(is_restriction(th::collect(s, o), full, [&](const Row& r) { return std::get<0>(r) < n; }));
      const auto sum = summarize(s, o);
      CHECK(sum.n_timesteps == std::min(n, s.n_timesteps));
      CHECK(sum.truncated == (n < s.n_timesteps));
    }
  }
}

TEST_CASE("stream: a [from, to) window is the full stream restricted") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    const auto full = th::collect(s);
    const std::int64_t n = s.n_timesteps;
    for (auto [a, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, n}, {1, n - 1}, {n / 3, n / 2}, {n / 2, n / 2}, {n - 1, n + 10}, {n, n + 1}}) {
      CAPTURE(spec.name);
      CAPTURE(a);
      CAPTURE(b);
      TraceOptions o;
      o.from = a;
      o.to = b;
      CHECK(is_restriction(th::collect(s, o, 7), full, [&](const Row& r) {
        return std::get<0>(r) >= a && std::get<0>(r) < b;
      }));
    }
  }
}

TEST_CASE("stream: shards I/N concatenated are the unsharded stream") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    const auto full = th::collect(s);
    for (std::int64_t count : {1, 2, 3, 7}) {
      CAPTURE(spec.name);
      CAPTURE(count);
      std::vector<Row> joined;
      for (std::int64_t i = 0; i < count; ++i) {
        TraceOptions o;
        o.shard = {i, count};
        const auto part = th::collect(s, o);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      CHECK(joined == full);
    }
    // a shard of a window
    TraceOptions w;
    w.from = 1;
    w.to = s.n_timesteps - 1;
    const auto window = th::collect(s, w);
    std::vector<Row> joined;
    for (std::int64_t i = 0; i < 3; ++i) {
      TraceOptions o = w;
      o.shard = {i, 3};
      const auto part = th::collect(s, o);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    CHECK(joined == window);
  }
}

TEST_CASE("stream: a sample is deterministic for a seed and is the full stream at its timesteps") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    const auto full = th::collect(s);
    for (std::uint64_t seed : {0u, 1u, 42u}) {
      CAPTURE(spec.name);
      CAPTURE(seed);
      TraceOptions o;
      o.sample_timesteps = std::max<std::int64_t>(1, s.n_timesteps / 3);
      o.seed = seed;
      const auto a = th::collect(s, o);
      CHECK(a == th::collect(s, o));
      AccessStream stream(s, o);
      std::set<std::int64_t> picked;
      for (const auto& r : stream.selection().ranges) {
        CHECK(r.to == r.from + 1);
        CHECK(r.from >= 0);
        CHECK(r.to <= s.n_timesteps);
        picked.insert(r.from);
      }
      CHECK(std::int64_t(picked.size()) == *o.sample_timesteps);  // distinct
      CHECK(is_restriction(a, full, [&](const Row& r) { return picked.count(std::get<0>(r)) > 0; }));
      const auto sum = summarize(s, o);
      CHECK(th::per_trace(s, a) == th::summary_counts(s, sum));
      CHECK(sum.truncated == (*o.sample_timesteps < s.n_timesteps));
    }
    // asking for more timesteps than there are gives them all
    TraceOptions all;
    all.sample_timesteps = s.n_timesteps + 3;
    CHECK(th::collect(s, all) == full);
    CHECK_FALSE(summarize(s, all).truncated);
  }
}

TEST_CASE("stream: filters keep the other traces' accesses unchanged") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    const Schedule& s = spec.schedule;
    const auto full = th::collect(s);
    for (const auto& tensor : s.tensors) {
      CAPTURE(spec.name);
      CAPTURE(tensor.name);
      TraceOptions o;
      o.tensors = {tensor.name};
      CHECK(is_restriction(th::collect(s, o), full, [&](const Row& r) {
        return s.traces[std::get<1>(r)].tensor == tensor.name;
      }));
    }
    for (const auto& einsum : s.einsums) {
      CAPTURE(spec.name);
      CAPTURE(einsum);
      TraceOptions o;
      o.einsums = {einsum};
      CHECK(is_restriction(th::collect(s, o), full, [&](const Row& r) {
        return s.traces[std::get<1>(r)].einsum == einsum;
      }));
    }
  }
}

TEST_CASE("stream: within one (leaf, tensor) an element comes once per timestep") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    CAPTURE(spec.name);
    const auto rows = th::collect(spec.schedule);
    std::set<Row> distinct(rows.begin(), rows.end());
    CHECK(distinct.size() == rows.size());
  }
  // conv1d with p tiled by 4 and r whole: I[p + r] overlaps across the tile's points
  const Schedule s = tiled_conv1d();
  const auto rows = th::collect(s);
  // p in [0, 4), r in [0, 3): I elements 0..5, once each (12 points)
  CHECK(th::elements_at(s, rows, 0, "O", "I") == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(th::elements_at(s, rows, 1, "O", "I") == std::vector<std::int64_t>{4, 5, 6, 7, 8, 9});
  CHECK(th::elements_at(s, rows, 1, "O", "W") == std::vector<std::int64_t>{0, 1, 2});
  CHECK(summarize(s).n_points == 24);
}

TEST_CASE("stream: non-separable projections are deduplicated and sorted") {
  // D[X: p, Y: p + c] with p in a tile of 2 and c whole: the points (p, p + c) for
  // p in {0, 1}, c in {0, 1}: (0,0) (0,1) (1,1) (1,2); D's shape is [5, 6].
  const Schedule s = th::compile_text(std::string(kMixed) + R"(
mapping:
  nodes:
  - !Temporal {rank_variable: r, tile_shape: 3}
  - !Temporal {rank_variable: p, tile_shape: 2}
  - !Compute {einsum: Mix}
)");
  const auto& d = s.tensors.at(std::size_t(s.find_tensor("D")));
  CHECK(d.shape == std::vector<std::int64_t>{5, 6});
  const auto rows = th::collect(s);
  CHECK(th::elements_at(s, rows, 0, "Mix", "D") == std::vector<std::int64_t>{0, 1, 7, 8});
  // S[H: 2p + r, C: c], shape [2*4 + 2 + 1, 2] = [11, 2]: p in {2, 3}, r in [0, 3)
  // gives H in {4..8}, all c: elements 8..17
  const auto& sh = s.tensors.at(std::size_t(s.find_tensor("S")));
  CHECK(sh.shape == std::vector<std::int64_t>{11, 2});
  std::vector<std::int64_t> want;
  for (std::int64_t e = 8; e < 18; ++e) want.push_back(e);
  CHECK(th::elements_at(s, rows, 1, "Mix", "S") == want);
}

TEST_CASE("stream: range-for over accesses equals the batches") {
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    CAPTURE(spec.name);
    const Schedule& s = spec.schedule;
    const auto batches = th::collect(s);
    AccessStream stream(s);
    std::vector<Row> one_by_one;
    for (const looptrace::Access& a : stream) {
      one_by_one.emplace_back(a.timestep, a.trace, a.element);
      // the view's fields agree with the trace it names
      const looptrace::TraceInfo& trace = s.traces[a.trace];
      CHECK(a.einsum == trace.einsum);
      CHECK(a.tensor == trace.tensor);
      CHECK(a.is_output == trace.is_output);
      const auto& shape = s.tensors[std::size_t(trace.tensor_index)].shape;
      CHECK(std::equal(a.shape.begin(), a.shape.end(), shape.begin(), shape.end()));
      CHECK(a.multiplicity >= 1);
      // coords ravel back to the element
      std::int64_t e = 0;
      const auto c = a.coords();
      REQUIRE(c.size() == shape.size());
      for (std::size_t r = 0; r < c.size(); ++r) {
        CHECK(c[r] >= 0);
        CHECK(c[r] < shape[r]);
        e = e * shape[r] + c[r];
      }
      CHECK(e == a.element);
    }
    CHECK(one_by_one == batches);
  }
}

TEST_CASE("stream: std::ranges views over the stream") {
  static_assert(std::ranges::input_range<AccessStream>);
  const Schedule s = th::compile_text(th::kConv1d);
  AccessStream stream(s);
  std::vector<std::int64_t> writes;
  for (const auto& a : stream | std::views::filter([](const looptrace::Access& x) { return x.is_output; }))
    writes.push_back(a.element);
  // O[p] is written at every r of every p: p repeated 3 times
  REQUIRE(writes.size() == 24);
  for (std::size_t i = 0; i < writes.size(); ++i) CHECK(writes[i] == std::int64_t(i / 3));
}

#ifdef LOOPTRACE_HAVE_RANGE_V3
TEST_CASE("stream: a range-v3 view pipeline over the stream equals the batches") {
  static_assert(ranges::input_range<AccessStream>, "AccessStream is a range-v3 input_range");
  for (const NamedSpec* spec_ptr : good_specs()) {
    const NamedSpec& spec = *spec_ptr;
    CAPTURE(spec.name);
    const Schedule& s = spec.schedule;
    const auto batches = th::collect(s);
    AccessStream stream(s);
    auto view = stream | ranges::views::filter([](const looptrace::Access& a) { return !a.is_output; }) |
                ranges::views::transform([&](const looptrace::Access& a) {
                  return Row{a.timestep, a.trace, a.element};
                });
    std::vector<Row> got;
    for (const Row& r : view) got.push_back(r);
    CHECK(is_restriction(got, batches, [&](const Row& r) { return !s.traces[std::get<1>(r)].is_output; }));
  }
}
#endif

TEST_CASE("stream: batches honor the target and never split a leaf's timestep") {
  const Schedule s = th::compile_text(th::kConv1d);
  AccessStream stream(s, {}, 1);
  auto b = stream.next_batch();
  // one timestep of the leaf: I, W, O, one access each
  REQUIRE(b.size() == 3);
  CHECK(b[0].timestep == 0);
  CHECK(b[2].timestep == 0);
  b = stream.next_batch();
  CHECK(b.size() == 3);
  CHECK(b[2].timestep == 1);
  AccessStream by_four(s, {}, 4);
  b = by_four.next_batch();  // two timesteps: the second brings the batch past 4
  CHECK(b.size() == 6);
  CHECK(b[5].timestep == 1);
  std::size_t rest = 6;
  for (b = by_four.next_batch(); !b.empty(); b = by_four.next_batch()) rest += b.size();
  CHECK(rest == 72);
  CHECK(by_four.next_batch().empty());  // stays done
}

TEST_CASE("stream: option errors") {
  const Schedule s = th::compile_text(th::kConv1d);
  auto error = [&](TraceOptions o) { return th::spec_error([&] { AccessStream x(s, o); }); };
  TraceOptions o;
  o.tensors = {"Q"};
  CHECK(th::contains(error(o).message(), "'Q'"));
  o = {};
  o.einsums = {"Nope"};
  CHECK(th::contains(error(o).message(), "'Nope'"));
  o = {};
  o.shard = {3, 3};
  CHECK(th::contains(error(o).message(), "--shard"));
  o = {};
  o.shard = {0, 0};
  CHECK(th::contains(error(o).message(), "--shard"));
  o = {};
  o.from = 5;
  o.to = 4;
  CHECK(th::contains(error(o).message(), "--to"));
  o = {};
  o.from = -1;
  CHECK(th::contains(error(o).message(), "--from"));
  o = {};
  o.max_timesteps = -1;
  CHECK(th::contains(error(o).message(), "--max-timesteps"));
  // the summary checks the same
  o = {};
  o.tensors = {"Q"};
  CHECK(th::contains(th::spec_error([&] { summarize(s, o); }).message(), "'Q'"));
}

TEST_CASE("stream: max_tile_points bounds one timestep's tile") {
  const Schedule s = tiled_conv1d();
  TraceOptions o;
  o.max_tile_points = 5;  // I's tile has 6 elements
  const auto e = th::spec_error([&] { th::collect(s, o); });
  CHECK(th::contains(e.message(), "'I'"));
  CHECK(th::contains(e.message(), "more than the limit of 5"));
  o.max_tile_points = 6;
  CHECK(th::collect(s, o).size() == 2 * (6 + 3 + 4));
}

// Regression: a loop inside a spatial loop over the same variable cuts every spatial
// iteration's tile (they were once merged first), and the summary's closed-form run
// counting starts from those tiles too.
TEST_CASE("stream: invariants of spatial-then-temporal loops over one variable") {
  for (const auto& spec : specs()) {
    if (!spec.spatial_reuse) continue;
    CAPTURE(spec.name);
    const Schedule& s = spec.schedule;
    const auto rows = th::collect(s);
    CHECK(th::per_trace(s, rows) == th::summary_counts(s, summarize(s)));
    TraceOptions o;
    o.tensors = {s.tensors.back().name};
    CHECK(th::per_trace(s, th::collect(s, o)) == th::summary_counts(s, summarize(s, o)));
    if (spec.dense) {
      std::vector<std::set<std::int64_t>> seen(s.tensors.size());
      for (const auto& [t, trace, element] : rows)
        seen[std::size_t(s.traces[trace].tensor_index)].insert(element);
      for (std::size_t i = 0; i < s.tensors.size(); ++i)
        CHECK(std::int64_t(seen[i].size()) == s.tensors[i].size);
    }
  }
}

// Regression: the closed-form run counting once read an odometer digit for a spatial
// loop of the chain (the summary said 0 accesses where the stream has 8 writes of B).
TEST_CASE("summary: counting a temporal loop under a one-iteration spatial loop") {
  const Schedule s = th::compile_text2(th::kRowsWorkload, R"(
mapping:
  nodes:
  - !Spatial {rank_variable: m, tile_shape: 8}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)");
  CHECK(s.n_timesteps == 8);
  const auto rows = th::collect(s);
  CHECK(th::elements_at(s, rows, 5, "E", "B") == std::vector<std::int64_t>{5});  // the stream is right
  const auto sum = summarize(s);
  CHECK(sum.n_points == 32);
  REQUIRE(sum.traces.size() == 2);
  CHECK(sum.traces[0].n_accesses == 32);  // A: 4 per step
  CHECK(sum.traces[1].n_accesses == 8);   // B: 1 per step
  REQUIRE(sum.einsum_timespans.size() == 1);
  CHECK(sum.einsum_timespans[0].end == 8);
}
