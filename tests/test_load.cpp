#include <doctest/doctest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "helpers.hpp"
#include "looptrace/frontend/load.hpp"

using looptrace::load_spec_text;
using looptrace::NodeKind;
using looptrace::Spec;

namespace {

// The messages of a spec's warnings that contain `text`, in order.
std::vector<std::string> warnings_with(const looptrace::Spec& s, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& w : s.warnings)
    if (th::contains(w.message, text)) out.push_back(w.message);
  return out;
}

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

TEST_CASE("load: `einsum:` with a `name:` is named after its output, as AccelForge names it (with a warning)") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  einsums:
  - {einsum: "B[m] = A[m]", name: Copy}
)", kMapping);
  CHECK(s.workload.einsums.at(0).name == "B");
  CHECK(std::any_of(s.warnings.begin(), s.warnings.end(), [](const looptrace::SpecWarning& w) {
    return w.message.find("its name 'Copy' is not used") != std::string::npos;
  }));
}

TEST_CASE("load: a bits_per_value key that names no tensor is warned about, with what it leaves unsized") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  bits_per_value: {B: 16, "A | C": 4, Nope: 8}
  einsums:
  - {einsum: "B[m] = A[m]"}
)", kMapping);
  const std::vector<std::string> said = warnings_with(s, "bits_per_value key");
  // 'A | C': A is a tensor, C is not; Nope is none. A and B have sizes, nothing is left.
  REQUIRE(said.size() == 2);
  CHECK(th::contains(said[0], "key 'A | C': 'C' is no tensor of the workload"));
  CHECK(th::contains(said[1], "key 'Nope': 'Nope' is no tensor"));
  CHECK(!th::contains(said[1], "without a size"));
  CHECK(s.workload.bits_per_value_of("A") == 4);
}

TEST_CASE("load: bits_per_value keys that size one tensor twice are warned about (AccelForge rejects them)") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  bits_per_value: {All: 8, "A | C": 4, C: 12}
  einsums:
  - {einsum: "B[m] = A[m]"}
  - {einsum: "C[m] = B[m]"}
)", kMapping);
  const std::vector<std::string> said = warnings_with(s, "both size");
  REQUIRE(said.size() == 2);
  CHECK(th::contains(said[0], "keys 'All' and 'A | C' both size 'A', 'C': AccelForge rejects keys that overlap"));
  CHECK(th::contains(said[1], "keys 'All' and 'C' both size 'C'"));  // against the first key that sized it
  // The most specific wins.
  CHECK(s.workload.bits_per_value_of("A") == 4);
  CHECK(s.workload.bits_per_value_of("B") == 8);
  CHECK(s.workload.bits_per_value_of("C") == 12);
}

TEST_CASE("load: bits_per_value's Other sizes every tensor no other key names, as AccelForge's") {
  const Spec s = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  bits_per_value: {B: 16, Other: 8}
  einsums:
  - {einsum: "B[m] = A[m]"}
  - {einsum: "C[m] = B[m]"}
)", kMapping);
  CHECK(s.workload.bits_per_value_of("B") == 16);
  CHECK(s.workload.bits_per_value_of("A") == 8);
  CHECK(s.workload.bits_per_value_of("C") == 8);
  for (const auto& w : s.warnings) CHECK_MESSAGE(!th::contains(w.message, "bits_per_value"), w.message);
  // With All, Other names nothing: All less every other key's tensors is empty.
  const Spec all = th::spec_text2(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 2}
  bits_per_value: {All: 16, Other: 8}
  einsums:
  - {einsum: "B[m] = A[m]"}
)", kMapping);
  CHECK(all.workload.bits_per_value_of("A") == 16);
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
renames: {einsums: []}
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

// ---------------------------------------------------------------- AccelForge's dialect

namespace {

namespace fs = std::filesystem;

// A scratch folder of spec files, removed afterwards.
class Files {
 public:
  Files() {
    static int counter = 0;
    root_ = fs::temp_directory_path() / ("looptrace-load-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(root_);
  }
  ~Files() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = root_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

 private:
  fs::path root_;
};

Spec load_files(const std::vector<std::string>& files, const looptrace::Defines& vars = {}) {
  looptrace::LoadOptions options;
  options.require_mapping = false;
  return looptrace::load_spec(files, vars, options);
}

looptrace::SpecError load_files_error(const std::vector<std::string>& files, const looptrace::Defines& vars = {}) {
  return th::spec_error([&] { load_files(files, vars); });
}

// One in-memory file; a mapping is optional.
Spec workload_text(const std::string& text, const looptrace::Defines& vars = {},
                   const std::string& name = "w.yaml") {
  looptrace::LoadOptions options;
  options.require_mapping = false;
  return load_spec_text({{name, text}}, vars, options);
}

std::vector<std::string> einsum_names(const Spec& s) {
  std::vector<std::string> out;
  for (const auto& e : s.workload.einsums) out.push_back(e.name);
  return out;
}

std::int64_t extent(const Spec& s, const std::string& einsum, const std::string& var) {
  const auto box = looptrace::einsum_box(s.workload, *s.workload.find_einsum(einsum));
  for (std::size_t i = 0; i < box.variables.size(); ++i)
    if (box.variables[i] == var) return box.extent[i];
  return -1;
}

}  // namespace

TEST_CASE("load: include() with !include_loaded, add_to_path(), <<< of included rank sizes") {
  Files f;
  const std::string main = f.write("main.yaml", R"({{ add_to_path("lib") }}
{% set A = include("attn.yaml", "") %}
{% set F = include("ff.yaml", "workload") %}
workload:
  rank_sizes:
    <<<: [{{A}}.workload.rank_sizes, {{F}}.rank_sizes]
  einsums:
  - {{A}}.workload.einsums
  - {{F}}.einsums
)");
  f.write("lib/attn.yaml", "workload:\n  rank_sizes: {M: {{ M }}, K: 4}\n  einsums:\n  - \"Y[m] = X[m, k]\"\n");
  f.write("lib/ff.yaml", "workload:\n  rank_sizes: {M: 999, N: 2}\n  einsums:\n  - \"Z[m, n] = Y[m] * W[n]\"\n");
  const Spec s = load_files({main}, {{"M", 8}});
  // The included lists nest in `einsums`; they are read in order.
  CHECK(einsum_names(s) == std::vector<std::string>{"Y", "Z"});
  // A list under <<< merges in order: the first file's M (8) wins over ff's 999.
  CHECK(s.workload.rank_sizes == std::map<std::string, std::int64_t>{{"K", 4}, {"M", 8}, {"N", 2}});
  CHECK(extent(s, "Y", "k") == 4);
  CHECK(extent(s, "Z", "m") == 8);
  CHECK(extent(s, "Z", "n") == 2);
  // Nodes keep the file they were written in.
  CHECK(s.workload.einsums[0].where.file == f.path("lib/attn.yaml"));
  CHECK(s.workload.einsums[0].where.line == 4);
  CHECK(s.warnings.empty());
}

TEST_CASE("load: includes resolve relative to the including file, then add_to_path folders") {
  Files f;
  const std::string main = f.write("main.yaml", "{% set S = include('sub/a.yaml') %}\nworkload: {{ S }}.workload\n");
  f.write("sub/a.yaml", "{% set B = include('b.yaml') %}\nworkload: {{ B }}.workload\n");
  f.write("sub/b.yaml", "workload:\n  rank_sizes: {M: 3}\n  einsums: [\"FromSub[m] = A[m]\"]\n");
  f.write("b.yaml", "workload:\n  rank_sizes: {M: 3}\n  einsums: [\"FromTop[m] = A[m]\"]\n");
  CHECK(einsum_names(load_files({main})) == std::vector<std::string>{"FromSub"});
  // Found both next to the file and in an add_to_path() folder: include() wants one.
  const std::string both = f.write("sub/both.yaml", "{{ add_to_path('..') }}{% set B = include('b.yaml') %}\nworkload: {{ B }}.workload\n");
  const auto e = load_files_error({both});
  CHECK(e.where().file == both);
  CHECK(e.where().line == 1);
  CHECK(th::contains(e.message(), "include('b.yaml') matches 2 files"));
  CHECK(th::contains(e.message(), "use include_all() for several"));
}

TEST_CASE("load: an include cycle is an error naming the chain, not a hang") {
  Files f;
  const std::string a = f.write("a.yaml", "{% set B = include('b.yaml') %}\nworkload: {{ B }}.workload\n");
  f.write("b.yaml", "\n{% set A = include('a.yaml') %}\nworkload: {{ A }}.workload\n");
  const auto e = load_files_error({a});
  CHECK(e.where().file == f.path("b.yaml"));
  CHECK(e.where().line == 2);
  CHECK(th::contains(e.message(), "include cycle: " + a + ", which includes " + f.path("b.yaml") + ", which includes " +
                                      f.path("a.yaml")));
  CHECK(th::contains(e.message(), "(included from " + a + ":1:1)"));
  const std::string self = f.write("self.yaml", "{{ include_text('self.yaml') }}\n");
  CHECK(th::contains(load_files_error({self}).message(), "include cycle"));
}

TEST_CASE("load: include_all() of a glob gives a list; nested Einsum lists flatten in order") {
  Files f;
  f.write("parts/p1.yaml", "einsums:\n- \"B[m] = A[m]\"\n- \"C[m] = B[m]\"\n");
  f.write("parts/p2.yaml", "einsums:\n- \"D[m] = C[m]\"\n");
  const std::string main = f.write("main.yaml", R"({% set P = include_all("parts/*.yaml", "einsums") %}
workload:
  rank_sizes: {M: 5}
  einsums:
  - "A[m] = Z[m]"
  - {{ P }}
)");
  const Spec s = load_files({main});
  CHECK(einsum_names(s) == std::vector<std::string>{"A", "B", "C", "D"});
  CHECK(th::contains(load_files_error({f.write("none.yaml", "{% set P = include_all('nothing/*.yaml') %}\n")}).message(),
                     "cannot find 'nothing/*.yaml'"));
}

TEST_CASE("load: include_text() pastes text; errors in it point into the pasted file") {
  Files f;
  f.write("frag.yaml", "workload:\n  rank_sizes: {M: 2}\n  einsums:\n  - name: E\n    tensor_acceses: []\n");
  const std::string main = f.write("main.yaml", "# pasted below\n{{ include_text('frag.yaml') }}\n");
  const auto e = load_files_error({main});
  CHECK(e.where().file == f.path("frag.yaml"));
  CHECK(e.where().line == 5);
  CHECK(e.where().column == 5);
  CHECK(th::contains(e.message(), "unknown key 'tensor_acceses' in an Einsum (did you mean 'tensor_accesses'?)"));
  CHECK(th::contains(e.message(), "(included from " + main + ":2:1)"));
  // Pasted text is rendered with the includer's variables (inherit_parse_data).
  f.write("frag2.yaml", "workload:\n  rank_sizes: {M: {{ SIZE }}}\n  einsums: [\"E[m] = A[m]\"]\n");
  const std::string main2 = f.write("main2.yaml", "{% set SIZE = 6 %}\n{{ include_text('frag2.yaml') }}\n");
  CHECK(extent(load_files({main2}), "E", "m") == 6);
}

TEST_CASE("load: find_path(), find_paths(), path_exists() and cwd() as AccelForge defines them") {
  Files f;
  f.write("lib/cell.txt", "x");
  const std::string dir = fs::weakly_canonical(f.path("")).string();
  const std::string main = f.write("main.yaml", R"({{ add_to_path('lib') }}
{% assert cwd() == ROOT, cwd() %}
{% assert find_path('cell.txt') == ROOT ~ '/lib/cell.txt', find_path('cell.txt') %}
{% assert find_paths('lib/*.txt') == [ROOT ~ '/lib/cell.txt'] %}
{% assert path_exists('cell.txt') and not path_exists('nope.txt') %}
workload:
  rank_sizes: {M: 1}
  einsums: ["E[m] = A[m]"]
)");
  CHECK(einsum_names(load_files({main}, {{"ROOT", dir}})) == std::vector<std::string>{"E"});
  const std::string missing = f.write("missing.yaml", "\n{{ find_path('cel.txt') }}\n");
  const auto e = load_files_error({missing});
  CHECK(e.where().line == 2);
  CHECK(th::contains(e.message(), "cannot find 'cel.txt'; looked for " + f.path("cel.txt")));
}

TEST_CASE("load: << merges shallowly, <<< recursively (mappings merge, lists join), !nomerge opts out") {
  const Spec deep = workload_text(R"(
workload:
  <<<: {rank_sizes: {M: 2, N: 3}, einsums: ["A[m] = B[m]"]}
  rank_sizes: {M: 5}
  einsums: ["C[m, n] = A[m]"]
)", {}, "w.yaml");
  CHECK(einsum_names(deep) == std::vector<std::string>{"C", "A"});  // the node's own list first
  CHECK(deep.workload.rank_sizes == std::map<std::string, std::int64_t>{{"M", 5}, {"N", 3}});

  const Spec shallow = workload_text(R"(
arch:
  w: &w {rank_sizes: {M: 2, N: 3}, einsums: ["A[m] = B[m]"]}
workload:
  <<: *w
  rank_sizes: {M: 5, N: 1}
)", {}, "w.yaml");
  CHECK(einsum_names(shallow) == std::vector<std::string>{"A"});  // taken whole from the anchor
  CHECK(shallow.workload.rank_sizes == std::map<std::string, std::int64_t>{{"M", 5}, {"N", 1}});

  const Spec kept = workload_text(R"(
workload:
  <<<: {rank_sizes: {M: 2}, einsums: ["A[m] = B[m]"]}
  einsums: !nomerge ["C[m] = A[m]"]
)", {}, "w.yaml");
  CHECK(einsum_names(kept) == std::vector<std::string>{"C"});

  auto e = th::spec_error([] { workload_text("workload:\n  <<: {a: 1}\n  <<<: {b: 2}\n", {}, "w.yaml"); });
  CHECK(th::contains(e.message(), "only one '<<' or '<<<' key"));
  e = th::spec_error([] { workload_text("workload:\n  einsums: []\n  <<<: 3\n", {}, "w.yaml"); });
  CHECK(th::contains(e.message(), "'<<<' (at w.yaml:3:3) needs a mapping or a list of mappings"));
}

TEST_CASE("load: rank sizes are expressions: 128*32, 512 // 3, ceil(256*2/X), spec variables") {
  const Spec s = workload_text(R"(
variables:
  size_v: 2 * 3
workload:
  rank_sizes:
    M: 128*32
    N: 512 // 3
    X: {{ [8, 512] | min }}
    XT: ceil(256*2/X)
    V: size_v
    F: 6.0
  einsums: ["Z[m, n, x, xt, v, f] = A[m]"]
)", {}, "w.yaml");
  CHECK(s.workload.rank_sizes == std::map<std::string, std::int64_t>{
                                     {"F", 6}, {"M", 4096}, {"N", 170}, {"V", 6}, {"X", 8}, {"XT", 64}});
  struct Case {
    const char* size;
    const char* message;
  };
  const Case cases[] = {
      {"512/2", "rank size of 'M' must be an integer, not 256.0 (float, from '512/2'); use // for integer division"},
      {"'12'", "rank size of 'M' is a quoted string ('12'); write a number or an expression"},
      {"Q * 2", "rank size of 'M' ('Q * 2'): name 'Q' is not defined"},
      {"M + 1", "rank size of 'M' depends on itself (M -> M)"},
      {"0", "rank size of 'M' must be positive, not 0"},
      {"3 +", "rank size of 'M' ('3 +'): unexpected end of tag"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.size);
    const auto e = th::spec_error([&] {
      workload_text(std::string("workload:\n  rank_sizes:\n    M: ") + c.size + "\n  einsums: [\"Z[m] = A[m]\"]\n", {}, "w.yaml");
    });
    CHECK(th::contains(e.message(), c.message));
    CHECK(e.where().line == 3);
    CHECK(e.where().column == 8);
  }
  // A name close to a rank size gets a suggestion.
  const auto e = th::spec_error([] {
    workload_text("workload:\n  rank_sizes: {XX: 4, M: ceil(8 / XY)}\n  einsums: [\"Z[m] = A[m]\"]\n", {}, "w.yaml");
  });
  CHECK(th::contains(e.message(), "name 'XY' is not defined (did you mean 'XX'?)"));
}

TEST_CASE("load: concise Einsums with + and a tensor named twice; `einsum:` with tensor_accesses") {
  const Spec s = workload_text(R"(
workload:
  rank_sizes: {B: 1, D: 4, N: 2}
  einsums:
  - "H[b, d, n] = HX[b, d, n] + HH[b, d, n]"
  - "L[b, d] = DX[b, d] * DX[b, d]"
  - einsum: "Y[b, d] = L[b, d] * W[d]"
    tensor_accesses:
    - {name: W, bits_per_value: 4, persistent: True}
)", {}, "w.yaml");
  REQUIRE(s.workload.einsums.size() == 3);
  CHECK(s.workload.einsums[0].accesses.size() == 3);  // HX, HH read; H written
  REQUIRE(s.workload.einsums[1].accesses.size() == 2);  // DX read once
  CHECK(s.workload.einsums[1].accesses[0].tensor == "DX");
  CHECK(s.workload.einsums[2].accesses[1].tensor == "W");
  auto e = th::spec_error([] {
    workload_text("workload:\n  rank_sizes: {D: 4}\n  einsums:\n  - einsum: \"Y[d] = W[d]\"\n    tensor_accesses:\n"
                  "    - {name: W, projection: [d]}\n", {}, "w.yaml");
  });
  CHECK(th::contains(e.message(), "tensor 'W' already has its projection from the Einsum 'Y[d] = W[d]'"));
  CHECK(e.where().line == 6);
  e = th::spec_error([] {
    workload_text("workload:\n  rank_sizes: {D: 4}\n  einsums:\n  - einsum: \"Y[d] = W[d]\"\n    tensor_accesses:\n"
                  "    - {name: Q, bits_per_value: 8}\n", {}, "w.yaml");
  });
  CHECK(th::contains(e.message(), "tensor 'Q' is not in the Einsum 'Y[d] = W[d]'"));
}

TEST_CASE("load: top-level keys are AccelForge's Spec keys; files read are named") {
  auto e = th::spec_error([] { workload_text("worklaod:\n  einsums: []\n", {}, "w.yaml"); });
  CHECK(e.where().file == "w.yaml");
  CHECK(e.where().line == 1);
  CHECK(th::contains(e.message(), "unknown top-level key 'worklaod' in w.yaml (did you mean 'workload'?)"));
  CHECK(th::contains(e.message(), "a spec's top-level keys are: arch, config, mapper, mapping, model, renames"));
  // Item 7 of issue 12: an empty file, a file holding only a mapping.
  e = th::spec_error([] { load_spec_text({{"empty.yaml", ""}, {"m.yaml", kMapping}}); });
  CHECK(e.message() == "no 'workload:' in the spec files empty.yaml, m.yaml (empty.yaml is empty)");
  e = th::spec_error([] { load_spec_text({{"w.yaml", kWorkload}, {"c.yaml", "# only a comment\n"}}); });
  CHECK(e.message() == "no 'mapping:' in the spec files w.yaml, c.yaml (c.yaml is empty)");
  const Spec twice = load_spec_text({{"a.yaml", std::string(kWorkload) + kMapping}, {"a.yaml", "junk: ["}});
  REQUIRE(twice.warnings.size() == 1);
  CHECK(twice.warnings[0].message == "the file is given twice; it is read once");
}

TEST_CASE("load: a -D that no file uses is warned about, with the nearest used name") {
  const std::string text = "{% set M = M | default(4) %}workload:\n  rank_sizes: {M: {{ M }}}\n  einsums: [\"E[m] = A[m]\"]\n";
  looptrace::LoadOptions options;
  options.require_mapping = false;
  const Spec s = load_spec_text({{"w.yaml", text}}, {{"MM", 3}, {"M", 2}}, options);
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].message == "-D MM is not used by any file");  // M is a -D too, so no suggestion
  CHECK(s.workload.rank_sizes.at("M") == 2);
  const Spec t = load_spec_text({{"w.yaml", text}}, {{"m", 3}}, options);
  REQUIRE(t.warnings.size() == 1);
  CHECK(t.warnings[0].message == "-D m is not used by any file (did you mean 'M'?)");
  CHECK(t.warnings[0].str() == "warning: -D m is not used by any file (did you mean 'M'?)");
}

TEST_CASE("load: errors inside included files say which file included them") {
  Files f;
  const std::string main = f.write("main.yaml", "\n{% set P = include('part.yaml', '', N=N) %}\nworkload: {{ P }}.workload\n");
  f.write("part.yaml", "{% assert N > 2, 'N must exceed 2' %}\nworkload:\n  einsums: [\"E[m] = A[{{ undefined_x }}]\"]\n");
  auto e = load_files_error({main}, {{"N", 1}});
  CHECK(e.where().file == f.path("part.yaml"));
  CHECK(e.where().line == 1);
  CHECK(e.message() == "{% assert %} failed: N must exceed 2 (included from " + main + ":2:1)");
  e = load_files_error({main}, {{"N", 3}});
  CHECK(e.where().line == 3);
  CHECK(e.message() == "undefined variable 'undefined_x' (included from " + main + ":2:1)");
  const std::string bad = f.write("bad.yaml", "{% set P = include('part2.yaml') %}\nworkload: {{ P }}.workloads\n");
  f.write("part2.yaml", "workload:\n  einsums: []\n");
  e = load_files_error({bad});
  CHECK(e.where().file == bad);
  CHECK(e.where().line == 2);
  CHECK(th::contains(e.message(), "!include_loaded bad_0.workloads: no key 'workloads' in " + f.path("part2.yaml") +
                                      ":1:1 (included from " + bad + ":1:1) (it has: workload) (did you mean 'workload'?)"));
}

TEST_CASE("load: one YAML document per file ('---' starts a second one)") {
  const Spec one = workload_text("# a comment\n--- \nworkload: {rank_sizes: {M: 2}, einsums: [\"E[m] = A[m]\"]}\n");
  CHECK(einsum_names(one) == std::vector<std::string>{"E"});
  const auto e = th::spec_error([] { workload_text("workload: {einsums: []}\n---\nmapping: {nodes: []}\n"); });
  CHECK(e.where().line == 2);
  CHECK(e.message() == "a spec file holds one YAML document, not several ('---')");
}

TEST_CASE("load: Jinja's {% from %} and {% include %} read files next to the file (AccelForge's loader)") {
  Files f;
  f.write("lib/_convention.yaml", R"({% if N_EINSUMS is defined %}
  {% assert N_EINSUMS <= 8, "N_EINSUMS must be <= 8" %}
{% endif %}
{% set TENSOR_NAMES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" %}
{%- macro tensor_name(i) -%}
  {% if i == 0 %}
    {{- TENSOR_NAMES[8] -}}
  {% else %}
    {{- TENSOR_NAMES[i-1] -}}
  {% endif %}
{%- endmacro -%})");
  f.write("lib/_tail.yaml", "  - \"Z[m] = {{ tensor_name(N) }}[m]\"\n");
  const std::string main = f.write("lib/w.yaml", R"({% from "_convention.yaml" import tensor_name %}
workload:
  rank_sizes: {M: 4}
  einsums:
  {% for i in range(N) %}
  - "{{ tensor_name(i + 1) }}[m] = {{ tensor_name(i) }}[m]"
  {% endfor %}
{% include "_tail.yaml" %}
)");
  CHECK(einsum_names(load_files({main}, {{"N", 3}})) == std::vector<std::string>{"A", "B", "C", "Z"});
  CHECK(load_files({main}, {{"N", 3}}).workload.einsums[0].accesses[0].tensor == "I");
  // Jinja's loader looks in the file's folder only.
  const std::string up = f.write("lib/up.yaml", "{% include '../x.yaml' %}\n");
  CHECK(th::contains(load_files_error({up}).message(), "template '../x.yaml' is not found"));
}
