// Hostile input: every rejection is a SpecError that names the file, line and column
// and says what is wrong and what would be accepted; nothing overflows, hangs or
// escapes as another exception. Cases marked "regression" once crashed, hung or
// misbehaved.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "helpers.hpp"
#include "looptrace/frontend/concise_einsum.hpp"
#include "looptrace/frontend/expression.hpp"
#include "looptrace/stream.hpp"
#include "frontend/jinja.hpp"  // internal: the template engine

using th::contains;
using th::spec_error;

namespace {

const std::string kWorkload = R"(workload:
  iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m], output: True}
)";

const std::string kMapping = R"(mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)";

// A mapping with `loop` (one flow mapping line) over m, then the Compute.
std::string mapping_with(const std::string& loop) {
  return "mapping:\n  nodes:\n  - " + loop + "\n  - !Compute {einsum: E}\n";
}

// A one-file spec whose Einsum E has the given projection of A and constraints.
std::string spec_with(const std::string& constraints, const std::string& projection,
                      const std::string& mapping = "mapping:\n  nodes:\n  - !Compute {einsum: E}\n") {
  return "workload:\n  iteration_space_shape: " + constraints +
         "\n  einsums:\n  - name: E\n    tensor_accesses:\n    - {name: A, projection: " +
         projection + "}\n    - {name: B, projection: [m], output: True}\n" + mapping;
}

looptrace::SpecError load2_error(const std::string& workload, const std::string& mapping) {
  return spec_error([&] { th::compile_text2(workload, mapping); });
}

looptrace::SpecError load1_error(const std::string& text) {
  return spec_error([&] { th::compile_text(text); });
}

}  // namespace

TEST_CASE("errors: YAML and Jinja errors name the file, line and column") {
  auto e = load2_error("workload:\n  einsums: [a, b\n  x: 1\n", kMapping);
  CHECK(e.where().file == "workload.yaml");
  CHECK(e.where().line == 3);
  CHECK(e.where().column > 0);
  CHECK(contains(e.message(), "invalid YAML"));

  e = spec_error([] { th::spec_text("workload:\n  x: {{ 1 + }}\n"); });
  CHECK(e.where().file == "spec.yaml");
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 6);
  CHECK(contains(e.message(), "end of tag"));

  e = spec_error([] { th::spec_text("a: 1\n{% for i in range(3) %}\nb: {{ undefined_thing }}\n{% endfor %}\n"); });
  CHECK(e.where().line == 3);
  CHECK(contains(e.message(), "undefined_thing"));
}

TEST_CASE("errors: a misspelt key or tag gets the nearest valid one") {
  std::string w = kWorkload;
  w.replace(w.find("tensor_accesses"), 15, "tensor_acesses");
  auto e = load2_error(w, kMapping);
  CHECK(e.where().file == "workload.yaml");
  CHECK(e.where().line == 5);
  CHECK(e.where().column == 5);
  CHECK(contains(e.message(), "unknown key 'tensor_acesses'"));
  CHECK(contains(e.message(), "did you mean 'tensor_accesses'?"));
  CHECK(contains(e.message(), "expected one of: name, tensor_accesses"));

  e = load2_error(kWorkload, mapping_with("!Temporal {rank_variable: m, tile_shap: 1}"));
  CHECK(e.where().line == 3);
  CHECK(contains(e.message(), "did you mean 'tile_shape'?"));

  e = load2_error(kWorkload, mapping_with("!Temporl {rank_variable: m, tile_shape: 1}"));
  CHECK(e.where().line == 3);
  CHECK(contains(e.message(), "unknown node tag '!Temporl'"));
  CHECK(contains(e.message(), "did you mean 'Temporal'?"));
}

TEST_CASE("errors: the column of an expression error is the offending character") {
  // "    - {name: B, projection: {M: m*n}, output: True}": 'm*n' starts at column 33.
  std::string w = kWorkload;
  w.replace(w.find("projection: [m], output"), 15, "projection: {M: m*n}");
  auto e = load2_error(w, kMapping);
  CHECK(e.where().line == 7);
  CHECK(e.where().column == 34);  // the '*'
  CHECK(contains(e.message(), "'m*n'"));
  CHECK(contains(e.message(), "not affine"));

  // Quoted: the quote is skipped.
  e = load1_error(spec_with("[\"0 <= m < 4 + \"]", "[m]"));
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 41);  // just past the text (28 + 13), where an operand is missing
  CHECK(contains(e.message(), "'0 <= m < 4 + '"));

  // A concise Einsum: a tensor named twice with other indices is read as AccelForge
  // reads it (the last), with a warning at the Einsum.
  const looptrace::Spec spec = th::spec_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                                             "  - \"Z[m] = A[m] * A[M: m + 1]\"\n" +
                                             std::string("mapping:\n  nodes:\n  - !Compute {einsum: Z}\n"));
  REQUIRE(spec.warnings.size() == 1);
  CHECK(spec.warnings[0].where.line == 4);
  CHECK(contains(spec.warnings[0].message, "tensor A appears twice with different indices"));
  REQUIRE(spec.workload.einsums[0].accesses.size() == 2);
  CHECK(spec.workload.einsums[0].accesses[0].projection[0].constant == 1);
}

TEST_CASE("errors: an Einsum string with a name beside it is named after its output, as AccelForge names it") {
  const looptrace::Spec spec = th::spec_text(
      "workload:\n  rank_sizes: {M: 4}\n  einsums:\n  - {einsum: \"Y[m] = X[m]\", name: Foo}\n"
      "mapping:\n  nodes:\n  - !Compute {einsum: Y}\n");
  CHECK(spec.workload.einsums[0].name == "Y");
  REQUIRE(spec.warnings.size() == 1);
  CHECK(contains(spec.warnings[0].message, "after its output, 'Y'; its name 'Foo' is not used"));
}

TEST_CASE("errors: a key given twice is refused, not silently dropped (regression)") {
  auto e = load2_error(kWorkload, mapping_with("!Temporal {rank_variable: m, tile_shape: 1, tile_shape: 2}"));
  CHECK(e.where().file == "mapping.yaml");
  CHECK(e.where().line == 3);
  CHECK(contains(e.message(), "key 'tile_shape' appears twice in a !Temporal node"));

  e = load1_error(kWorkload + "workload:\n  einsums: []\n" + kMapping);
  CHECK(e.where().line == 8);
  CHECK(contains(e.message(), "key 'workload' appears twice"));

  e = load1_error(spec_with("{m: 0 <= m < 4, m: 0 <= m < 8}", "[m]"));
  CHECK(contains(e.message(), "key 'm' appears twice in iteration_space_shape"));

  e = load1_error(spec_with("{m: 0 <= m < 4}", "{M: m, M: m}"));
  CHECK(contains(e.message(), "key 'M' appears twice in the projection of tensor 'A'"));
}

TEST_CASE("errors: a key that is a list or a mapping is refused (regression)") {
  auto e = load1_error("workload:\n  ? [a, b]\n  : 1\n" + kMapping);
  CHECK(e.where().line == 2);
  CHECK(contains(e.message(), "a key in the workload must be a single value"));
  e = load1_error("{a: 1}: 2\n");
  CHECK(contains(e.message(), "a key in a spec file must be a single value"));
}

TEST_CASE("errors: tile_shape and initial_tile_shape must be positive integers") {
  for (const char* bad : {"0", "-3"}) {
    auto e = load2_error(kWorkload, mapping_with(std::string("!Temporal {rank_variable: m, tile_shape: ") + bad + "}"));
    CHECK(e.where().line == 3);
    CHECK(contains(e.message(), std::string("tile_shape must be a positive integer, not ") + bad));
  }
  auto e = load2_error(kWorkload, mapping_with("!Temporal {rank_variable: m, tile_shape: 2.5}"));
  CHECK(contains(e.message(), "tile_shape must be an integer, not '2.5'"));
  e = load2_error(kWorkload, mapping_with("!Temporal {rank_variable: m, tile_shape: 99999999999999999999}"));
  CHECK(e.where().line == 3);
  CHECK(contains(e.message(), "tile_shape must be an integer below 2^63, not '99999999999999999999'"));
  e = load2_error(kWorkload, mapping_with("!Spatial {rank_variable: m, tile_shape: 1, initial_tile_shape: 0}"));
  CHECK(contains(e.message(), "initial_tile_shape must be a positive integer, not 0"));
  e = load2_error(kWorkload, mapping_with("!Temporal {rank_variable: m, tile_shape: [1]}"));
  CHECK(contains(e.message(), "tile_shape must be a single value"));
}

TEST_CASE("errors: a schedule of more than 2^63 timesteps says so") {
  std::string w = "workload:\n  iteration_space_shape: {a: 0 <= a < 4000000000, b: 0 <= b < 4000000000, "
                  "c: 0 <= c < 4000000000}\n  einsums:\n  - Z[a, b, c] = X[a]\n";
  std::string m = "mapping:\n  nodes:\n  - !Temporal {rank_variable: a, tile_shape: 1}\n"
                  "  - !Temporal {rank_variable: b, tile_shape: 1}\n"
                  "  - !Temporal {rank_variable: c, tile_shape: 1}\n  - !Compute {einsum: Z}\n";
  auto e = load2_error(w, m);
  CHECK(e.where().file == "mapping.yaml");
  CHECK(contains(e.message(), "more than 2^63 timesteps"));
}

TEST_CASE("errors: negative or empty extents, negative coordinates, empty tensors") {
  auto e = load1_error(spec_with("{m: 4 <= m < 2}", "[m]"));
  CHECK(contains(e.message(), "rank variable 'm' of Einsum 'E' has an empty range"));
  e = load1_error(spec_with("{m: 0 <= m < 4}", "{M: m - 1}"));
  CHECK(e.where().line == 6);
  CHECK(contains(e.message(), "reaches negative coordinates"));
  e = load1_error(spec_with("{m: 0 <= m < 4}", "[m, z]"));
  CHECK(contains(e.message(), "'z'"));
  CHECK(contains(e.message(), "unbounded"));
  e = load1_error("workload:\n  rank_sizes: {M: 0}\n  einsums:\n  - Z[m] = X[m]\nmapping: {nodes: []}\n");
  CHECK(e.where().line == 2);
  CHECK(contains(e.message(), "rank size of 'M' must be positive, not 0"));
}

TEST_CASE("errors: 64-bit overflow in projections and sizes is reported (regression)") {
  // size - 1 - constant overflowed (UBSan) in the rank-size bound.
  auto e = load1_error("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  rank_sizes: {M: 5}\n"
                       "  einsums:\n  - name: E\n    tensor_accesses:\n"
                       "    - {name: A, projection: {M: m - 9223372036854775807}}\n"
                       "    - {name: B, projection: [m], output: True}\nmapping:\n  nodes:\n  - !Compute {einsum: E}\n");
  CHECK(e.where().line == 7);
  CHECK(contains(e.message(), "overflows 64 bits against its rank size 5"));
  // A coefficient of -2^63 (whose negation once overflowed) is refused where it is
  // written: -2^63 has no positive counterpart to print back (found by fuzz_expression).
  e = load1_error("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  rank_sizes: {M: 5}\n"
                  "  einsums:\n  - name: E\n    tensor_accesses:\n"
                  "    - {name: A, projection: {M: -9223372036854775807*m - m}}\n"
                  "    - {name: B, projection: [m], output: True}\nmapping:\n  nodes:\n  - !Compute {einsum: E}\n");
  CHECK(e.where().line == 7);
  CHECK(contains(e.message(), "integer overflow"));
  CHECK_THROWS_AS(looptrace::parse_affine("o - 4611686018427387904 - 4611686018427387904"), looptrace::ExpressionError);
  CHECK(looptrace::parse_affine("- 4611686018427387904 - 4611686018427387903").constant == INT64_MIN + 1);
  // A sum of large terms overflowed 128 bits in the tensor's shape.
  e = load1_error(spec_with("{a: 0 <= a < 1000000000, b: 0 <= b < 1000000000, c: 0 <= c < 1000000000, "
                            "d: 0 <= d < 1000000000, m: 0 <= m < 2}",
                            "{X: 9223372036854775807*a + 9223372036854775807*b + 9223372036854775807*c + "
                            "9223372036854775807*d}"));
  CHECK(contains(e.message(), "tensor 'A'"));
  // More than 2^63 elements.
  e = load1_error(spec_with("{m: 0 <= m < 2000000000000000000, n: 0 <= n < 2000000000000000000}", "[m, n]"));
  CHECK(contains(e.message(), "tensor 'A' has more than 2^63 elements"));
  // A huge coefficient on a variable of extent 1 fits every id but not the folded
  // coefficient a leaf multiplies by.
  e = load1_error(spec_with("{m: 0 <= m < 4, z: 0 <= z < 1, y: 0 <= y < 1000}",
                            "{X: 9223372036854775807*z, Y: y}"));
  CHECK(contains(e.message(), "element ids of tensor 'A' in Einsum 'E' overflow 64 bits"));
  // Interval propagation over chained huge coefficients overflowed 128 bits (UBSan).
  // y reaches 2^80, so 9223372036854775807*y passes 2^127.
  e = load1_error(spec_with("[\"0 <= x < 9223372036854775807\", \"0 <= y <= 131072*x\", "
                            "\"0 <= z <= 9223372036854775807*y\", \"0 <= m < 3\"]",
                            "[m, x, y, z]"));
  CHECK(contains(e.message(), "rank variable 'x' of Einsum 'E' has an extent too large"));
}

TEST_CASE("errors: an inner loop under a far larger tile compiles at once (regression: hang)") {
  // The outer tile is 10^12 wide, so the inner loop has 10^12 iterations, all but four
  // of them past the extent; shapes were computed by visiting each one.
  auto s = th::compile_text2(kWorkload, "mapping:\n  nodes:\n"
                                        "  - !Temporal {rank_variable: m, tile_shape: 1000000000000}\n"
                                        "  - !Temporal {rank_variable: m, tile_shape: 1}\n"
                                        "  - !Compute {einsum: E}\n");
  CHECK(s.n_timesteps == 1000000000000);
  looptrace::TraceOptions o;
  o.max_timesteps = 6;
  auto rows = th::collect(s, o);
  CHECK(rows.size() == 4 * 3 + 4);  // t = 0..3 each touch 3 of A and 1 of B
}

TEST_CASE("errors: resource limits") {
  // One timestep's tile larger than --max-tile-points.
  auto s = th::compile_text(spec_with("{m: 0 <= m < 3000, n: 0 <= n < 3000}", "[m, n]"));
  looptrace::TraceOptions o;
  o.max_tile_points = 1000;
  auto e = spec_error([&] { th::collect(s, o); });
  CHECK(e.where().line > 0);
  CHECK(contains(e.message(), "more than the limit of 1000 (--max-tile-points)"));

  // Jinja loops are bounded in total.
  e = spec_error([] {
    th::spec_text("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n");
  });
  CHECK(e.where().line == 1);
  CHECK(contains(e.message(), "more than 1000000 loop iterations in total"));
  // Jinja nesting is bounded.
  std::string nested;
  for (int i = 0; i < 150; ++i) nested += "{% if 1 %}";
  e = spec_error([&] { th::spec_text(nested); });
  CHECK(contains(e.message(), "nested too deeply"));
  // So is what a template can render.
  e = spec_error([] { th::spec_text("{% for i in range(200000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}\n"); });
  CHECK(contains(e.message(), "larger than 8 MiB"));
}

TEST_CASE("errors: deeply nested YAML is refused, not a stack overflow") {
  for (const char* open : {"[", "{a: "}) {
    std::string text = "workload: ";
    for (int i = 0; i < 100000; ++i) text += open;
    auto e = spec_error([&] { th::spec_text(text); });
    CHECK(e.where().file == "spec.yaml");
    CHECK(e.where().line == 1);
    CHECK(contains(e.message(), "nested"));
  }
  // Within yaml-cpp's limit, the mapping's own depth limit applies.
  std::string deep = kWorkload + "mapping:\n  nodes:\n";
  std::string m = "!Compute {einsum: E}";
  for (int i = 0; i < 210; ++i) m = "!Nested {nodes: [" + m + "]}";
  auto e = load1_error(deep + "  - " + m + "\n");
  CHECK(contains(e.message(), "nested more than 200 levels deep"));
}

TEST_CASE("errors: YAML aliases cannot multiply the spec (regression: billion laughs)") {
  // 10^9 Compute nodes once the aliases are expanded, under `arch:` (read and ignored).
  std::string s = "workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n  - B[m] = A[m]\n"
                  "arch:\n  x0: &a0 !Compute {einsum: B}\n";
  for (int i = 1; i < 10; ++i) {
    const std::string n = std::to_string(i);
    s += "  x";
    s += n;
    s += ": &a";
    s += n;
    s += " !Sequential {nodes: [";
    for (int k = 0; k < 10; ++k) {
      s += k ? ", *a" : "*a";
      s += std::to_string(i - 1);
    }
    s += "]}\n";
  }
  s += "mapping:\n  nodes: [*a9]\n";
  auto e = load1_error(s);
  CHECK(contains(e.message(), "more than 500000 nodes once YAML aliases and includes are expanded"));
  CHECK(e.where().file == "spec.yaml");
  // About 123000 mapping nodes (370000 YAML nodes, the anchors defined in the mapping
  // itself) fit the YAML budget but not the mapping's own.
  s = kWorkload + "mapping:\n  nodes:\n  - &a0 !Compute {einsum: E}\n";
  for (int i = 1; i < 6; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    s += "  - &a" + std::to_string(i) + " !Sequential {nodes: [" + prev;
    for (int k = 1; k < 10; ++k) s += ", " + prev;
    s += "]}\n";
  }
  e = load1_error(s);
  CHECK(contains(e.message(), "more than 100000 nodes (do YAML aliases repeat a subtree?)"));
  // An alias of itself.
  e = load1_error(kWorkload + "mapping:\n  nodes: &n [!Nested {nodes: *n}]\n");
  CHECK(contains(e.message(), "nested more than 2500 levels deep (is an alias inside its own anchor?)"));
}

TEST_CASE("errors: the expression and concise parsers report columns inside the text") {
  auto col = [](auto&& f) -> std::size_t {
    try {
      f();
    } catch (const looptrace::ExpressionError& e) {
      return e.column();
    }
    return std::string::npos;
  };
  CHECK(col([] { looptrace::parse_affine("p + 99999999999999999999"); }) == 4);
  CHECK(col([] { looptrace::parse_affine("9223372036854775807 + 1"); }) == 20);
  CHECK(col([] { looptrace::parse_constraint("0 <= m < 4 and"); }) == 14);
  CHECK(col([] { looptrace::parse_concise_einsum("Z[m] = A[M: m //]"); }) == 16);
  CHECK(col([] { looptrace::parse_concise_einsum("Z[m] = A[m"); }) == 8);
}

TEST_CASE("errors: scalar tensors and constant ranks are traced (regression: heap overflow, "
          "missing accesses)") {
  // `s` (no ranks) had size 0 but wrote one record: a heap-buffer-overflow found by
  // fuzz_spec. A rank that reads no variable (`K: 2`) was never projected, so A had no
  // accesses at all.
  auto s = th::compile_text("workload:\n  iteration_space_shape: {m: 0 <= m < 4}\n  einsums:\n"
                            "  - \"Y[m] = A[m, K: 2] * s\"\nmapping:\n  nodes:\n"
                            "  - !Temporal {rank_variable: m, tile_shape: 1}\n  - !Compute {einsum: Y}\n");
  const int a = th::trace_index(s, "Y", "A"), scalar = th::trace_index(s, "Y", "s");
  REQUIRE(a >= 0);
  REQUIRE(scalar >= 0);
  auto rows = th::collect(s);
  auto n = th::per_trace(s, rows);
  CHECK(n[std::size_t(a)] == 4);
  CHECK(n[std::size_t(scalar)] == 4);
  CHECK(rows.size() == 12);
  for (const auto& [t, trace, element] : rows)
    if (int(trace) == a) CHECK(element == t * 3 + 2);  // A[t, 2] in shape [4, 3]
  CHECK(th::summary_counts(s, looptrace::summarize(s, {})) == n);
}

TEST_CASE("errors: inputs fuzz_spec and fuzz_jinja found (regressions: a hang, a leak)") {
  // yaml-cpp's LoadAll looped forever on this; a file is now one document read by Load.
  // yaml-cpp reads it as empty, so the spec has no workload.
  auto e = spec_error([] { th::spec_text("{{add_to_path(\".\")}}\n\n# c\n,19L{4 set N = 6144 %}      enames"); });
  CHECK(contains(e.message(), "no 'workload:' in the spec files spec.yaml (spec.yaml is empty)"));
  // A macro held its template's variables, which held the macro: a cycle that leaked
  // (ASan builds of this test see it); a render now breaks it when it ends.
  CHECK(looptrace::render_jinja("{% macro m(a, b=2) %}{{ a * b }}{% if a > 0 %}{{ m(a - 1) }}{% endif %}"
                                "{% endmacro %}{{ m(3, b=N) }}",
                                {{"N", 6}}, "t.yaml")
            .text == "18420");
}

TEST_CASE("errors: a null, empty or non-scalar mapping key is refused where it is written (regression)") {
  // `~: 128` once bound a reference to a null node in RankSizes::size_of (UBSan).
  auto e = load1_error("workload:\n  rank_sizes: {~: 128, M: 4}\n  einsums:\n  - \"Y[m] = X[m]\"\n"
                       "mapping:\n  nodes:\n  - !Compute {einsum: Y}\n");
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 16);
  CHECK(contains(e.message(), "a mapping key must be a name, not nothing (null)"));
  e = load1_error("workload:\n  rank_sizes:\n   : 2\n  einsums:\n  - \"Y[m] = X[m]\"\n");
  CHECK(e.where().line == 3);
  e = load1_error("workload:\n  rank_sizes: {\"\": 4}\n  einsums:\n  - \"Y[m] = X[m]\"\n");
  CHECK(contains(e.message(), "not an empty string"));
  // From a template value too: a dict with an empty key becomes YAML through the loader.
  e = spec_error([] { th::spec_text("workload: {{ {'': 1} }}\n"); });
  CHECK(contains(e.message(), "not an empty string"));
}

TEST_CASE("errors: a Storage node that names a tensor twice (regression: its windows counted twice)") {
  auto e = load1_error("workload:\n  rank_sizes: {M: 8, K: 3}\n  einsums:\n  - \"Y[m] = X[m, k]\"\n"
                       "mapping:\n  nodes:\n  - !Storage {component: DRAM, tensors: [X, Y]}\n"
                       "  - !Storage {component: Buf, tensors: [X, X, Y]}\n  - !Compute {einsum: Y}\n");
  CHECK(e.where().line == 8);
  CHECK(e.where().column == 44);
  CHECK(contains(e.message(), "names tensor 'X' twice"));
}

TEST_CASE("errors: spatial instances past the tile limit are refused before any allocation (regression)") {
  // 10^9 PEs once allocated 16 GB of tiles in `trace` and `iterations`.
  const std::string spec =
      "workload:\n  iteration_space_shape: {a: 0 <= a < 1000000000}\n  einsums:\n  - \"Y[a] = X[a]\"\n"
      "mapping:\n  nodes:\n  - !Storage {component: DRAM, tensors: [X, Y]}\n"
      "  - !Spatial {rank_variable: a, tile_shape: 1, component: PE}\n  - !Compute {einsum: Y}\n";
  const looptrace::Schedule s = th::compile_text(spec);
  auto e = spec_error([&] { looptrace::check_spatial_instances(s, 4'000'000); });
  CHECK(e.where().line == 9);
  CHECK(contains(e.message(), "!Spatial loop over 'a' (1000000000 instances)"));
  CHECK(contains(e.message(), "more than 4000000 spatial instances"));
  e = spec_error([&] { looptrace::AccessStream stream(s, {}); });
  CHECK(contains(e.message(), "--max-tile-points"));
  // Within the limit, or for another Einsum only, nothing is said.
  looptrace::check_spatial_instances(s, 1'000'000'000);
  looptrace::check_spatial_instances(s, 10, {"Other"});
}

TEST_CASE("errors: a mapping that computes nothing says so") {
  auto e = load2_error(kWorkload, "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 1}\n");
  CHECK(e.where().file == "mapping.yaml");
  CHECK(contains(e.message(), "the mapping computes nothing: it has no !Compute node (Einsums 'E' are unmapped)"));
  e = load2_error(kWorkload, "mapping:\n  nodes: []\n");
  CHECK(contains(e.message(), "computes nothing"));
}

TEST_CASE("errors: messages keep a NUL and show control bytes escaped") {
  CHECK(looptrace::printable(std::string("a\0b\x1b[31m\n\t\x7f\xc3\xa9", 13)) == "a\\x00b\\x1b[31m\\n\\t\\x7f\xc3\xa9");
  CHECK(looptrace::without_nul(std::string("x\0y\0", 4)) == "x\\x00y\\x00");
  // A NUL inside an Einsum string once cut the message at the NUL (what() is a C string).
  auto e = load1_error(std::string("workload:\n  rank_sizes: {M: 4}\n  einsums:\n  - \"Y[m] = X[m] + \\0Q\"\n"));
  CHECK(contains(e.message(), "found '\\x00'"));
}
