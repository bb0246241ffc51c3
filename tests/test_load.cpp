#include <doctest/doctest.h>

#include <string>

#include "helpers.hpp"
#include "looptrace/spec/load.hpp"

using looptrace::load_spec_text;
using looptrace::NodeKind;
using looptrace::Spec;

namespace {

const char* kMapping = R"(
mapping:
  nodes:
  - !Compute {einsum: E}
)";

const char* kWorkload = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m], output: True}
)";

// The error that loading (workload, mapping) throws.
looptrace::SpecError load_error(const std::string& workload, const std::string& mapping) {
  return th::spec_error([&] { th::spec_text2(workload, mapping); });
}

}  // namespace

TEST_CASE("load: the verbose form with list and dict projections") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape:
    p: 0 <= p < 8
    r: 0 <= r < 3
  bits_per_value: {All: 8}
  persistent_tensors: [W]
  einsums:
  - name: Conv
    is_copy_operation: False
    tensor_accesses:
    - {name: I, projection: {P: p + r}, persistent: True, bits_per_value: 4}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
)", kMapping);
  REQUIRE(s.workload.einsums.size() == 1);
  const auto& e = s.workload.einsums[0];
  CHECK(e.name == "Conv");
  REQUIRE(e.accesses.size() == 3);
  CHECK(e.accesses[0].tensor == "I");
  CHECK(e.accesses[0].ranks == std::vector<std::string>{"P"});
  CHECK(e.accesses[0].projection[0].str() == "p + r");
  CHECK_FALSE(e.accesses[0].is_output);
  CHECK(e.accesses[1].ranks == std::vector<std::string>{"R"});  // the upper-cased variable
  CHECK(e.accesses[2].is_output);
  CHECK(e.rank_variables == std::vector<std::string>{"p", "r"});
  CHECK(s.workload.constraints.size() == 2);
  CHECK(e.where.file == "workload.yaml");
  CHECK(e.where.line == 9);
}

TEST_CASE("load: a list projection entry with several letters keeps them all, upper-cased") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {n0: 0 <= n0 < 2, m: 0 <= m < 3}
  einsums:
  - name: E
    tensor_accesses:
    - {name: T, projection: [m, n0], output: True}
)", kMapping);
  CHECK(s.workload.einsums[0].accesses[0].ranks == std::vector<std::string>{"M", "N0"});
}

TEST_CASE("load: the concise string form names the Einsum after its output, output last") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {ny: 0 <= ny < 3, nz: 0 <= nz < 4}
  einsums:
  - Z[nz] = Y[ny] * C[ny, nz]
)", kMapping);
  const auto& e = s.workload.einsums.at(0);
  CHECK(e.name == "Z");
  REQUIRE(e.accesses.size() == 3);
  CHECK(e.accesses[0].tensor == "Y");
  CHECK(e.accesses[1].tensor == "C");
  CHECK(e.accesses[1].ranks == std::vector<std::string>{"NY", "NZ"});
  CHECK(e.accesses[2].tensor == "Z");
  CHECK(e.accesses[2].is_output);
  CHECK_FALSE(e.accesses[0].is_output);
  CHECK(e.rank_variables == std::vector<std::string>{"ny", "nz"});
}

TEST_CASE("load: the `einsum:` form with other keys, mixing list and named ranks") {
  const Spec s = th::spec_text2(R"(
workload:
  einsums:
  - einsum: "O[p] = I[P: p + r] * W[r]"
    iteration_space_shape: ["0 <= p < 6", "0 <= r < 2"]
    rank_sizes: {P: 7}
    renames: {input: I}
)", kMapping);
  const auto& e = s.workload.einsums.at(0);
  CHECK(e.name == "O");
  CHECK(e.accesses[0].tensor == "I");
  CHECK(e.accesses[0].ranks == std::vector<std::string>{"P"});
  CHECK(e.accesses[0].projection[0].str() == "p + r");
  CHECK(e.accesses[2].tensor == "O");
  CHECK(e.constraints.size() == 2);
  CHECK(e.rank_sizes.at("P") == 7);
  CHECK(e.rank_variables == std::vector<std::string>{"p", "r"});
}

TEST_CASE("load: `einsum:` with a `name:` renames the Einsum") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  einsums:
  - {einsum: "B[m] = A[m]", name: Copy}
)", kMapping);
  CHECK(s.workload.einsums.at(0).name == "Copy");
}

TEST_CASE("load: Jinja defines drive loops, conditionals and defaults") {
  const std::string text = R"(
workload:
  {% set M = M | default(5) %}
  iteration_space_shape:
    m: 0 <= m < {{M}}
  einsums:
  {% for i in range(N) %}
  - name: E{{i}}
    tensor_accesses:
    - {name: T{{i}}, projection: [m]}
    - {name: T{{i + 1}}, projection: [m], output: True}
  {% endfor %}
mapping:
  nodes:
  {% if N > 1 %}
  - !Sequential
    nodes:
    {% for i in range(N) %}
    - !Compute {einsum: E{{i}}}
    {% endfor %}
  {% else %}
  - !Compute {einsum: E0}
  {% endif %}
)";
  const Spec three = th::spec_text(text, {{"N", std::int64_t(3)}});
  REQUIRE(three.workload.einsums.size() == 3);
  CHECK(three.workload.einsums[2].name == "E2");
  CHECK(three.workload.einsums[2].accesses[1].tensor == "T3");
  REQUIRE(three.mapping.root.children.size() == 1);
  CHECK(three.mapping.root.children[0].kind == NodeKind::Sequential);
  CHECK(three.mapping.root.children[0].children.size() == 3);
  CHECK(looptrace::compile_schedule(three).n_timesteps == 3);
  CHECK(three.workload.constraints.at(0).text == "0 <= m < 5");

  const Spec one = th::spec_text(text, {{"N", std::int64_t(1)}, {"M", std::int64_t(9)}});
  CHECK(one.workload.einsums.size() == 1);
  CHECK(one.mapping.root.children.at(0).kind == NodeKind::Compute);
  CHECK(one.workload.constraints.at(0).text == "0 <= m < 9");
}

TEST_CASE("load: every node tag and its fields") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 8, n: 0 <= n < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m], output: True}
  - name: F
    tensor_accesses:
    - {name: B, projection: [m]}
    - {name: C, projection: [m], output: True}
)", R"(
mapping:
  nodes:
  - !Storage {tensors: [A, B], component: DRAM}
  - !Reservation {}
  - !Temporal {rank_variable: m, tile_shape: 4, initial_tile_shape: 2, component: X}
  - !Spatial {rank_variable: n, tile_shape: 1, name: PEs, component: Array}
  - !Toll {}
  - !TextBox {}
  - !Nested
    nodes:
    - !Pipeline
      nodes:
      - !Compute {einsum: E, component: MAC}
      - !Parallel
        nodes:
        - !Sequential
          nodes:
          - !Compute {einsum: F}
)");
  const auto& n = s.mapping.root.children;
  REQUIRE(n.size() == 7);
  CHECK(s.mapping.root.kind == NodeKind::Nested);
  CHECK(n[0].kind == NodeKind::Storage);
  CHECK(n[0].tensors == std::vector<std::string>{"A", "B"});
  CHECK(n[0].component == "DRAM");
  CHECK(n[1].kind == NodeKind::Ignored);
  CHECK(n[1].tag == "Reservation");
  CHECK(n[2].kind == NodeKind::Temporal);
  CHECK(n[2].rank_variable == "m");
  CHECK(n[2].tile_shape == 4);
  REQUIRE(n[2].initial_tile_shape.has_value());
  CHECK(*n[2].initial_tile_shape == 2);
  CHECK(n[2].is_loop());
  CHECK(n[3].kind == NodeKind::Spatial);
  CHECK(n[3].name == "PEs");
  CHECK(n[3].component == "Array");
  CHECK_FALSE(n[3].initial_tile_shape.has_value());
  CHECK(n[4].kind == NodeKind::Ignored);
  CHECK(n[5].kind == NodeKind::Ignored);
  CHECK(n[6].kind == NodeKind::Nested);
  const auto& pipe = n[6].children.at(0);
  CHECK(pipe.kind == NodeKind::Pipeline);
  CHECK(pipe.is_split());
  CHECK(pipe.children.at(0).kind == NodeKind::Compute);
  CHECK(pipe.children.at(0).einsum == "E");
  CHECK(pipe.children.at(0).component == "MAC");
  CHECK(pipe.children.at(1).kind == NodeKind::Parallel);
  CHECK(pipe.children.at(1).children.at(0).kind == NodeKind::Sequential);
  CHECK(n[2].where.file == "mapping.yaml");
  CHECK(n[2].where.line == 6);
  CHECK(std::string(looptrace::node_kind_name(NodeKind::Pipeline)) == "Pipeline");
}

TEST_CASE("load: the first file that gives a top-level key wins, with a warning naming both") {
  const Spec s = load_spec_text({{"a.yaml", std::string(kWorkload) + kMapping + "arch: {x: 1}\n"},
                                 {"b.yaml", R"(
renames: {anything: goes}
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 2}
  - !Compute {einsum: E}
)"}});
  // a.yaml's mapping (one Compute), as AccelForge's Spec.from_yaml keeps the first.
  REQUIRE(s.mapping.root.children.size() == 1);
  CHECK(s.mapping.root.children[0].where.file == "a.yaml");
  CHECK(s.workload.where.file == "a.yaml");
  CHECK(s.has_mapping);
  CHECK(s.files == std::vector<std::string>{"a.yaml", "b.yaml"});
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].where.file == "b.yaml");
  CHECK(s.warnings[0].where.line == 3);
  CHECK(th::contains(s.warnings[0].message, "top-level key 'mapping' is ignored here: a.yaml (line 9) gives it first"));
  CHECK(s.warnings[0].str().rfind("b.yaml:3:1: warning: ", 0) == 0);
}

TEST_CASE("load error: invalid YAML names file:line") {
  const auto e = th::spec_error([] {
    load_spec_text({{"bad.yaml", "workload:\n  einsums: [a, b\nmapping: {}\n"}});
  });
  CHECK(th::contains(e.message(), "invalid YAML"));
  CHECK(e.where().file == "bad.yaml");
  CHECK(e.where().line == 3);  // where the unclosed flow sequence is found out
  CHECK(th::contains(e.what(), "bad.yaml:3"));
}

TEST_CASE("load error: invalid YAML (a tab in the indentation) names file:line") {
  const auto e = th::spec_error([] {
    load_spec_text({{"tab.yaml", "workload:\n  einsums:\n\t- x\n"}});
  });
  CHECK(e.where().file == "tab.yaml");
  CHECK(e.where().line >= 2);
  CHECK(e.where().line <= 3);
}

TEST_CASE("load error: an unknown key suggests the nearest one") {
  const auto e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: E
    tensor_acceses:
    - {name: A, projection: [m], output: True}
)", kMapping);
  CHECK(th::contains(e.message(), "unknown key 'tensor_acceses'"));
  CHECK(th::contains(e.message(), "did you mean 'tensor_accesses'"));
  CHECK(e.where().file == "workload.yaml");
  CHECK(e.where().line == 6);
}

TEST_CASE("load error: unknown keys in a node and in a tensor access") {
  auto e = load_error(kWorkload, R"(
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shap: 1}
  - !Compute {einsum: E}
)");
  CHECK(th::contains(e.message(), "did you mean 'tile_shape'"));
  CHECK(e.where().line == 4);
  e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m], outptu: True}
)", kMapping);
  CHECK(th::contains(e.message(), "unknown key 'outptu'"));
  CHECK(th::contains(e.message(), "did you mean 'output'"));
  CHECK(e.where().line == 7);
  // A key far from every known one gets no suggestion, but still the list.
  e = load_error(R"(
workload:
  zzzzzzzzzzzz: 1
  einsums: []
)", kMapping);
  CHECK(th::contains(e.message(), "unknown key 'zzzzzzzzzzzz'"));
  CHECK_FALSE(th::contains(e.message(), "did you mean"));
  CHECK(th::contains(e.message(), "einsums"));
}

TEST_CASE("load error: an unknown tag, and a node with no tag") {
  auto e = load_error(kWorkload, R"(
mapping:
  nodes:
  - !Temporl {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: E}
)");
  CHECK(th::contains(e.message(), "unknown node tag '!Temporl'"));
  CHECK(th::contains(e.message(), "did you mean 'Temporal'"));
  CHECK(e.where().file == "mapping.yaml");
  CHECK(e.where().line == 4);
  e = load_error(kWorkload, R"(
mapping:
  nodes:
  - {einsum: E}
)");
  CHECK(th::contains(e.message(), "needs a tag"));
  CHECK(e.where().line == 4);
}

TEST_CASE("load error: missing fields") {
  struct Case {
    const char* mapping;
    const char* message;
    int line;
  };
  const Case cases[] = {
      {"mapping:\n  nodes:\n  - !Temporal {rank_variable: m}\n  - !Compute {einsum: E}\n",
       "needs 'tile_shape'", 3},
      {"mapping:\n  nodes:\n  - !Temporal {tile_shape: 1}\n  - !Compute {einsum: E}\n",
       "needs 'rank_variable'", 3},
      {"mapping:\n  nodes:\n  - !Compute {component: MAC}\n", "needs 'einsum'", 3},
      {"mapping:\n  nodes:\n  - !Storage {component: DRAM}\n  - !Compute {einsum: E}\n",
       "needs 'tensors'", 3},
      {"mapping:\n  nodes:\n  - !Sequential {}\n", "needs 'nodes'", 3},
      {"mapping: {}\n", "needs 'nodes'", 1},
  };
  for (const auto& c : cases) {
    CAPTURE(c.mapping);
    const auto e = th::spec_error([&] { load_spec_text({{"w.yaml", kWorkload}, {"m.yaml", c.mapping}}); });
    CHECK(th::contains(e.message(), c.message));
    CHECK(e.where().file == "m.yaml");
    CHECK(e.where().line == c.line);
  }
  auto e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, output: True}
)", kMapping);
  CHECK(th::contains(e.message(), "needs a 'projection'"));
  CHECK(e.where().line == 7);
  e = load_error("workload:\n  einsums:\n  - tensor_accesses: []\n", kMapping);
  CHECK(th::contains(e.message(), "needs a 'name'"));
  e = th::spec_error([] { load_spec_text({{"w.yaml", kWorkload}}); });
  CHECK(th::contains(e.message(), "no 'mapping:'"));
  e = th::spec_error([] { load_spec_text({{"m.yaml", kMapping}}); });
  CHECK(th::contains(e.message(), "no 'workload:'"));
}

TEST_CASE("load error: tile_shape and initial_tile_shape must be positive") {
  struct Case {
    const char* loop;
    const char* message;
  };
  const Case cases[] = {
      {"{rank_variable: m, tile_shape: 0}", "tile_shape must be a positive integer, not 0"},
      {"{rank_variable: m, tile_shape: -2}", "tile_shape must be a positive integer, not -2"},
      {"{rank_variable: m, tile_shape: 1, initial_tile_shape: 0}",
       "initial_tile_shape must be a positive integer, not 0"},
      {"{rank_variable: m, tile_shape: two}", "tile_shape must be an integer, not 'two'"},
      {"{rank_variable: m, tile_shape: 1.5}", "tile_shape must be an integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.loop);
    const auto e = load_error(kWorkload, std::string("mapping:\n  nodes:\n  - !Temporal ") + c.loop +
                                             "\n  - !Compute {einsum: E}\n");
    CHECK(th::contains(e.message(), c.message));
    CHECK(e.where().line == 3);
  }
}

TEST_CASE("load error: a non-affine projection names the column of the operator's operand") {
  const auto e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4, n: 0 <= n < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: {M: m*n}, output: True}
)", kMapping);
  CHECK(th::contains(e.message(), "not affine"));
  CHECK(e.where().line == 7);
  CHECK(e.where().column > 30);  // inside the expression, not at the start of the line
}

TEST_CASE("load error: a list projection entry must be a single variable") {
  const auto e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m + 1], output: True}
)", kMapping);
  CHECK(th::contains(e.message(), "one rank variable"));
  CHECK(e.where().line == 7);
}

TEST_CASE("load error: an Einsum defined twice") {
  const auto e = load_error(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - B[m] = A[m]
  - B[m] = C[m]
)", kMapping);
  CHECK(th::contains(e.message(), "defined twice"));
  CHECK(e.where().line == 6);
}

TEST_CASE("load error: the line of an error after a Jinja loop is the template's line") {
  // The loop renders 3 entries of 3 lines each, so the rendered text is longer than the
  // template; the error must still point at template line 10.
  const std::string text =
      "workload:\n"                                                        // 1
      "  iteration_space_shape: {m: 0 <= m < 4}\n"                          // 2
      "  einsums:\n"                                                       // 3
      "  {% for i in range(N) %}\n"                                        // 4
      "  - name: E{{i}}\n"                                                 // 5
      "    tensor_accesses:\n"                                             // 6
      "    - {name: T{{i}}, projection: [m], output: True}\n"              // 7
      "  {% endfor %}\n"                                                   // 8
      "  - name: Bad\n"                                                    // 9
      "    tensor_acceses: []\n"                                           // 10
      "mapping:\n  nodes:\n  - !Compute {einsum: E0}\n";
  const auto e = th::spec_error([&] { th::spec_text(text, {{"N", std::int64_t(3)}}, "tpl.yaml"); });
  CHECK(th::contains(e.message(), "did you mean 'tensor_accesses'"));
  CHECK(e.where().file == "tpl.yaml");
  CHECK(e.where().line == 10);
}

TEST_CASE("load error: a mapping error inside a Jinja loop points at the loop body's line") {
  const std::string text =
      "workload:\n"                                                        // 1
      "  iteration_space_shape: {m: 0 <= m < 4}\n"                          // 2
      "  einsums:\n"                                                       // 3
      "  - B[m] = A[m]\n"                                                  // 4
      "mapping:\n"                                                         // 5
      "  nodes:\n"                                                         // 6
      "  {% for i in range(4) %}\n"                                        // 7
      "  - !Temporal {rank_variable: m, tile_shape: {{ 1 - i }}}\n"         // 8
      "  {% endfor %}\n"                                                   // 9
      "  - !Compute {einsum: B}\n";                                        // 10
  // The second iteration renders tile_shape 0.
  const auto e = th::spec_error([&] { th::spec_text(text, {}, "tpl.yaml"); });
  CHECK(th::contains(e.message(), "tile_shape must be a positive integer, not 0"));
  CHECK(e.where().line == 8);
}

TEST_CASE("load error: an undefined Jinja variable names the template line") {
  const auto e = th::spec_error([] {
    th::spec_text("workload:\n  einsums:\n  {% for i in range(NOPE) %}\n  {% endfor %}\n", {}, "t.yaml");
  });
  CHECK(e.where().file == "t.yaml");
  CHECK(e.where().line == 3);
  CHECK(th::contains(e.message(), "NOPE"));
}
