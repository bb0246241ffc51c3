#include <doctest/doctest.h>

#include <string>

#include "helpers.hpp"
#include "looptrace/frontend/workload.hpp"

using looptrace::einsum_box;
using looptrace::EinsumBox;
using looptrace::Workload;

namespace {

const char* kMapping = R"(
mapping:
  nodes:
  - !Compute {einsum: E}
)";

// The box of the first Einsum of a workload text.
EinsumBox box_of(const std::string& workload, int einsum = 0) {
  const auto spec = th::spec_text2(workload, kMapping);
  return einsum_box(spec.workload, spec.workload.einsums.at(std::size_t(einsum)));
}

std::int64_t extent(const EinsumBox& box, const std::string& var) {
  for (std::size_t i = 0; i < box.variables.size(); ++i)
    if (box.variables[i] == var) return box.extent[i];
  FAIL_CHECK("no variable " << var);
  return -1;
}

}  // namespace

TEST_CASE("einsum_box: conv `0 <= p + r < 28` with `0 <= r < 3` gives p extent 28") {
  const auto box = box_of(R"(
workload:
  einsums:
  - name: E
    iteration_space_shape: ["0 <= p + r < 28", "0 <= r < 3"]
    tensor_accesses:
    - {name: I, projection: {P: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
)");
  // variables in order of first use: p + r names p first
  CHECK(box.variables == std::vector<std::string>{"p", "r"});
  CHECK(extent(box, "p") == 28);  // p + r <= 27 and r >= 0: p in [0, 27]
  CHECK(extent(box, "r") == 3);
}

TEST_CASE("einsum_box: max - min + 1 of chained, equality, scaled and joined constraints") {
  const auto box = box_of(R"(
workload:
  einsums:
  - name: E
    iteration_space_shape:
    - 2 <= a < 6
    - b == 3
    - 0 <= 2*c < 9
    - 0 <= d and d <= 4 and d < 3
    - 10 > e >= 1
    tensor_accesses:
    - {name: T, projection: [a, b, c, d, e], output: True}
)");
  CHECK(extent(box, "a") == 4);  // [2, 5]
  CHECK(extent(box, "b") == 1);  // [3, 3]
  CHECK(extent(box, "c") == 5);  // 2c <= 8: [0, 4]
  CHECK(extent(box, "d") == 3);  // [0, 2]
  CHECK(extent(box, "e") == 9);  // [1, 9]
}

TEST_CASE("einsum_box: workload-level iteration_space_shape applies to the Einsums that use the variable") {
  const std::string w = R"(
workload:
  iteration_space_shape:
    m: 0 <= m < 5
    k: 0 <= k < 7
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m], output: True}
  - name: F
    tensor_accesses:
    - {name: B, projection: [m, k], output: True}
)";
  const auto e = box_of(w, 0);
  CHECK(e.variables == std::vector<std::string>{"m"});  // k's constraint does not add k
  CHECK(e.extent == std::vector<std::int64_t>{5});
  const auto f = box_of(w, 1);
  CHECK(f.extent == std::vector<std::int64_t>{5, 7});
}

TEST_CASE("einsum_box: rank_sizes at Einsum level override the workload's") {
  const std::string w = R"(
workload:
  rank_sizes: {M: 10, N: 6}
  einsums:
  - name: E
    rank_sizes: {M: 4}
    tensor_accesses:
    - {name: A, projection: [m, n], output: True}
  - name: F
    tensor_accesses:
    - {name: B, projection: [m], output: True}
)";
  const auto e = box_of(w, 0);
  CHECK(extent(e, "m") == 4);  // the Einsum's M
  CHECK(extent(e, "n") == 6);  // the workload's N
  CHECK(extent(box_of(w, 1), "m") == 10);
}

TEST_CASE("einsum_box: a rank size bounds a projection, halo included") {
  // H: p + r < 8 and R: r < 3 -> p in [0, 7], r in [0, 2]
  const auto box = box_of(R"(
workload:
  rank_sizes: {H: 8, R: 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: I, projection: {H: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: {Q: p}, output: True}
)");
  CHECK(extent(box, "p") == 8);
  CHECK(extent(box, "r") == 3);
}

TEST_CASE("einsum_box: an unbounded variable names the variable and the Einsum") {
  const auto spec = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: Gemm
    tensor_accesses:
    - {name: A, projection: [m, kk]}
    - {name: Z, projection: [m], output: True}
)", kMapping);
  const auto e = th::spec_error([&] { einsum_box(spec.workload, spec.workload.einsums[0]); });
  CHECK(th::contains(e.message(), "'kk'"));
  CHECK(th::contains(e.message(), "Einsum 'Gemm'"));
  CHECK(th::contains(e.message(), "unbounded"));
  CHECK(e.where().file == "workload.yaml");
  CHECK(e.where().line == 5);  // the Einsum's entry (line 1 is the empty first line)
}

TEST_CASE("einsum_box: an upper bound alone is not enough; a lower bound alone neither") {
  const auto spec = th::spec_text2(R"(
workload:
  einsums:
  - name: E
    iteration_space_shape: ["m >= 2"]
    tensor_accesses:
    - {name: A, projection: [m], output: True}
)", kMapping);
  const auto e = th::spec_error([&] { einsum_box(spec.workload, spec.workload.einsums[0]); });
  CHECK(th::contains(e.message(), "'m'"));
  CHECK(th::contains(e.message(), "unbounded"));
}

TEST_CASE("einsum_box: an empty range is an error") {
  for (const char* c : {"0 <= m < 0", "5 <= m < 3", "m < -1"}) {
    CAPTURE(c);
    const auto spec = th::spec_text2(std::string(R"(
workload:
  einsums:
  - name: E
    iteration_space_shape: [")") + c + R"("]
    tensor_accesses:
    - {name: A, projection: [m], output: True}
)", kMapping);
    const auto e = th::spec_error([&] { einsum_box(spec.workload, spec.workload.einsums[0]); });
    CHECK(th::contains(e.message(), "'m'"));
    CHECK(th::contains(e.message(), "Einsum 'E'"));
    CHECK(th::contains(e.message(), "empty range"));
  }
}

TEST_CASE("einsum_box: compile_schedule reports a box error through the leaf") {
  const auto e = th::spec_error([] {
    th::compile_text(R"(
workload:
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [q], output: True}
mapping:
  nodes:
  - !Compute {einsum: E}
)");
  });
  CHECK(th::contains(e.message(), "'q'"));
  CHECK(th::contains(e.message(), "unbounded"));
}
