#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "helpers.hpp"
#include "looptrace/trace.hpp"

using looptrace::AccessTrace;
using looptrace::TensorAccessTrace;
using looptrace::trace_accesses;
using looptrace::TraceOptions;

namespace {

// conv1d: t = 3p + r; I[p + r], W[r], O[p].
const AccessTrace& conv1d() {
  static const AccessTrace trace = trace_accesses(th::compile_text(th::kConv1d));
  return trace;
}

const TensorAccessTrace& only(const AccessTrace& t, const std::string& tensor) {
  const auto list = t.for_tensor(tensor);
  REQUIRE(list.size() == 1);
  return *list[0];
}

}  // namespace

TEST_CASE("trace: conv1d values by hand") {
  const AccessTrace& t = conv1d();
  CHECK(t.n_timesteps == 24);
  CHECK_FALSE(t.truncated);
  REQUIRE(t.traces.size() == 3);
  const auto& i = only(t, "I");
  const auto& w = only(t, "W");
  const auto& o = only(t, "O");
  CHECK(i.n_accesses() == 24);
  CHECK(w.n_accesses() == 24);
  CHECK(o.n_accesses() == 24);
  CHECK(i.einsum == "Conv");
  CHECK_FALSE(i.is_output);
  CHECK(o.is_output);
  for (std::size_t k = 0; k < 24; ++k) {
    CAPTURE(k);
    const std::int64_t p = std::int64_t(k) / 3, r = std::int64_t(k) % 3;
    CHECK(i.timestep[k] == std::int64_t(k));
    CHECK(i.element[k] == p + r);
    CHECK(w.element[k] == r);
    CHECK(o.element[k] == p);
  }
  // timestep 4 is p = 1, r = 1: I element 2
  CHECK(i.timestep[4] == 4);
  CHECK(i.element[4] == 2);
  CHECK(i.coords(4)[0] == 2);
  CHECK(i.ranks == std::vector<std::string>{"P"});
  CHECK(i.tensor_shape == std::vector<std::int64_t>{10});
  CHECK(i.tensor_size() == 10);
  CHECK(o.tensor_size() == 8);
}

TEST_CASE("trace: AccessTrace accessors") {
  const AccessTrace& t = conv1d();
  CHECK(t.tensors() == std::vector<std::string>{"I", "W", "O"});
  CHECK(t.einsums() == std::vector<std::string>{"Conv"});
  CHECK(t.memory_levels() == std::vector<std::string>{"MainMemory", "GlobalBuffer"});
  CHECK(t.for_tensor("nope").empty());
  REQUIRE(t.tensor_shapes.size() == 3);
  CHECK(t.tensor_shapes[0].first == "I");
  CHECK(t.tensor_shapes[0].second == std::vector<std::int64_t>{10});
  CHECK(t.tensor_shapes[1].second == std::vector<std::int64_t>{3});
  CHECK(t.tensor_ranks[2].first == "O");
  CHECK(t.tensor_ranks[2].second == std::vector<std::string>{"P"});
  REQUIRE(t.einsum_timespans.size() == 1);
  CHECK(t.einsum_timespans[0].first == 0);
  CHECK(t.einsum_timespans[0].end == 24);
  CHECK(th::windows_of(t.tile_lifetime("MainMemory", "O")) == th::Windows{{0, 24}});
  CHECK(th::windows_of(t.tile_lifetime("GlobalBuffer", "W")) ==
        th::Windows{{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 18}, {18, 21}, {21, 24}});
  CHECK(t.tile_lifetime("GlobalBuffer", "Z").empty());
}

TEST_CASE("trace: write_csv has the to_dataframe() columns") {
  std::ostringstream out;
  conv1d().write_csv(out);
  const std::string csv = out.str();
  std::istringstream lines(csv);
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  REQUIRE(all.size() == 1 + 72);
  CHECK(all[0] == "einsum,tensor,is_output,timestep,element");
  // traces one after another: I's rows first, then W's, then O's
  CHECK(all[1] == "Conv,I,False,0,0");
  CHECK(all[1 + 4] == "Conv,I,False,4,2");
  CHECK(all[1 + 24 + 5] == "Conv,W,False,5,2");
  CHECK(all[1 + 48 + 23] == "Conv,O,True,23,7");
}

TEST_CASE("trace: a prefix and a tensor filter") {
  const auto s = th::compile_text(th::kConv1d);
  TraceOptions o;
  o.max_timesteps = 7;
  o.tensors = {"W", "I"};
  const AccessTrace t = trace_accesses(s, o);
  CHECK(t.n_timesteps == 7);
  CHECK(t.truncated);
  CHECK(t.tensors() == std::vector<std::string>{"I", "W"});  // order of first trace
  REQUIRE(t.traces.size() == 2);
  CHECK(t.traces[1].element == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0});
  CHECK(t.traces[0].element == std::vector<std::int64_t>{0, 1, 2, 1, 2, 3, 2});
  CHECK(t.einsums() == std::vector<std::string>{"Conv"});
  CHECK(t.einsum_timespans[0].end == 7);
  CHECK(th::windows_of(t.tile_lifetime("GlobalBuffer", "I")) == th::Windows{{0, 3}, {3, 6}, {6, 7}});
  CHECK(t.tile_lifetime("GlobalBuffer", "O").empty());  // filtered out
  // element ids do not depend on the prefix
  CHECK(t.traces[0].tensor_shape == std::vector<std::int64_t>{10});
}

TEST_CASE("trace: an Einsum filter keeps its traces, empty ones included") {
  const auto s = th::compile_corpus({"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"});
  TraceOptions o;
  o.einsums = {"Z"};
  o.max_timesteps = 4;  // ny = 0: Y runs at 0..3, Z at 4..7
  const AccessTrace t = trace_accesses(s, o);
  REQUIRE(t.traces.size() == 3);
  CHECK(t.traces[0].einsum == "Z");
  for (const auto& tr : t.traces) CHECK(tr.n_accesses() == 0);
  CHECK(t.einsums().empty());
}

TEST_CASE("trace: coordinates of a multi-rank tensor") {
  const auto s = th::compile_corpus({"conv2d.workload.yaml", "conv2d.mapping.yaml"});
  TraceOptions o;
  o.max_timesteps = 1;
  o.tensors = {"I"};
  const AccessTrace t = trace_accesses(s, o);
  // step 0: k = 0, p in [0, 2) (then p = 0 innermost), c in [0, 2) spatially, q = r = 0:
  // I[c, p + r, q + s] for c in {0, 1}, p = 0, s in {0, 1}
  const auto& i = t.traces.at(0);
  REQUIRE(i.n_accesses() == 4);
  CHECK(i.element == std::vector<std::int64_t>{0, 1, 36, 37});
  CHECK(std::vector<std::int64_t>(i.coords(3).begin(), i.coords(3).end()) ==
        std::vector<std::int64_t>{1, 0, 1});
}

TEST_CASE("trace: max_points bounds what one leaf enumerates") {
  const auto s = th::compile_text(th::kConv1d);
  const auto e = th::spec_error([&] { trace_accesses(s, {}, 23); });
  CHECK(th::contains(e.message(), "enumerates 24 points"));
  CHECK(th::contains(e.message(), "max_points = 23"));
  CHECK(trace_accesses(s, {}, 24).traces.at(0).n_accesses() == 24);
  // a prefix enumerates fewer points
  TraceOptions o;
  o.max_timesteps = 10;
  CHECK(trace_accesses(s, o, 10).traces.at(0).n_accesses() == 10);
  // the Spec overload
  CHECK(trace_accesses(th::spec_text(th::kConv1d)).n_timesteps == 24);
}

TEST_CASE("trace: a tensor filter does not shrink the Einsums' spans") {
  // ny (3) x [Y: na (4) | Z: nz (4)]: Y at 8 ny + na, Z at 8 ny + 4 + nz.
  const auto s = th::compile_corpus({"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"});
  TraceOptions o;
  o.tensors = {"A"};  // only Y reads A
  const AccessTrace t = trace_accesses(s, o);
  CHECK(t.n_timesteps == 24);
  CHECK(t.einsums() == std::vector<std::string>{"Y", "Z"});
  REQUIRE(t.einsum_timespans.size() == 2);
  CHECK(t.einsum_timespans[0].first == 0);
  CHECK(t.einsum_timespans[0].end == 20);
  CHECK(t.einsum_timespans[1].first == 4);
  CHECK(t.einsum_timespans[1].end == 24);
  REQUIRE(t.traces.size() == 1);
  CHECK(t.traces[0].einsum == "Y");
  CHECK(t.traces[0].timestep == std::vector<std::int64_t>{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19});
  CHECK(t.traces[0].element == std::vector<std::int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(t.tensors() == std::vector<std::string>{"A"});
}
