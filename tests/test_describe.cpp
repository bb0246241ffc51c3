// describe_spec: what `looptrace describe` prints, from the library. Values worked out
// by hand from SEMANTICS ("Time", "Accesses").
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "looptrace/sinks/describe.hpp"

using looptrace::DescribedNode;
using looptrace::describe_spec;
using looptrace::NodeKind;
using looptrace::SpecDescription;

namespace {

SpecDescription describe_text_spec(const std::string& text) {
  looptrace::LoadOptions options;
  options.require_mapping = false;
  return describe_spec(looptrace::load_spec_text({{"spec.yaml", text}}, {}, options));
}

const looptrace::DescribedTensor& tensor(const SpecDescription& d, const std::string& name) {
  for (const auto& t : d.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return d.tensors.front();
}

}  // namespace

TEST_CASE("describe: the conv1d: extents, nominal shapes, and the LoopTree's counts and durations") {
  const SpecDescription d = describe_text_spec(th::kConv1d);
  REQUIRE(d.einsums.size() == 1);
  CHECK(d.einsums[0].name == "Conv");
  CHECK(d.einsums[0].rank_variables == std::vector<std::pair<std::string, std::int64_t>>{{"p", 8}, {"r", 3}});
  CHECK(d.einsums[0].tensors == std::vector<std::pair<std::string, bool>>{{"I", false}, {"W", false}, {"O", true}});
  // I is only read: its shape is the readers' image, p + r <= 7 + 2.
  CHECK(tensor(d, "I").shape == std::vector<std::int64_t>{10});
  CHECK(tensor(d, "W").shape == std::vector<std::int64_t>{3});
  CHECK(tensor(d, "O").ranks == std::vector<std::string>{"P"});
  CHECK(tensor(d, "O").shape == std::vector<std::int64_t>{8});

  REQUIRE(d.mapping);
  CHECK(d.n_timesteps == 24);
  CHECK(d.mapping->duration == 24);
  const auto& n = d.mapping->children;
  REQUIRE(n.size() == 5);
  CHECK(n[0].kind == NodeKind::Storage);
  CHECK(n[0].level == "MainMemory");
  CHECK(n[0].tensors == std::vector<std::string>{"I", "W", "O"});
  CHECK(n[0].duration == 24);  // one window over everything
  CHECK(n[1].kind == NodeKind::Temporal);
  CHECK(n[1].rank_variable == "p");
  CHECK(n[1].iterations == 8);
  CHECK(n[1].iteration_duration == 3);
  CHECK(n[1].duration == 24);
  CHECK(n[2].level == "GlobalBuffer");
  CHECK(n[2].duration == 3);  // a window per p iteration
  CHECK(n[3].iterations == 3);
  CHECK(n[3].iteration_duration == 1);
  CHECK(n[4].kind == NodeKind::Compute);
  CHECK(n[4].einsum == "Conv");
  CHECK(n[4].duration == 1);
}

TEST_CASE("describe: splits add up or overlap; initial_tile_shape and enclosing tiles set the counts") {
  const SpecDescription d = describe_text_spec(th::kRowsWorkload + R"(
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 3, initial_tile_shape: 4}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 2}
      - !Compute {einsum: E}
    - !Storage {tensors: [A], component: Buf}
    - !Pipeline
      nodes:
      - !Nested
        nodes:
        - !Spatial {rank_variable: n, tile_shape: 1, name: X, component: PE}
        - !Compute {einsum: E}
      - !Nested
        nodes:
        - !Temporal {rank_variable: n, tile_shape: 1}
        - !Compute {einsum: E}
)");
  // m: extent 8 cut as [0, 4), [4, 7), [7, 8): 3 tiles. The inner m loop gets the
  // larger of 4 and 3 (4) and cuts it in 2. The Sequential: 2 + max(1, 4) = 6.
  const DescribedNode& outer = d.mapping->children.at(0);
  CHECK(outer.iterations == 3);
  CHECK(outer.initial_tile_shape == 4);
  CHECK(outer.iteration_duration == 6);
  CHECK(outer.duration == 18);
  CHECK(d.n_timesteps == 18);
  const DescribedNode& seq = d.mapping->children.at(1);
  CHECK(seq.kind == NodeKind::Sequential);
  CHECK(seq.duration == 6);
  CHECK(seq.children.at(0).children.at(0).iterations == 2);
  CHECK(seq.children.at(1).kind == NodeKind::Storage);
  CHECK(seq.children.at(1).duration == 6);  // under a split: spans the split
  const DescribedNode& pipe = seq.children.at(2);
  CHECK(pipe.duration == 4);
  const DescribedNode& spatial = pipe.children.at(0).children.at(0);
  CHECK(spatial.kind == NodeKind::Spatial);
  CHECK(spatial.iterations == 4);
  CHECK(spatial.duration == 1);  // spatial iterations add no time
  CHECK(pipe.children.at(1).children.at(0).duration == 4);
}

TEST_CASE("describe: nominal shapes intersect the writers' images; readers count only without writers") {
  const SpecDescription d = describe_text_spec(R"(
workload:
  rank_sizes: {M: 4}
  iteration_space_shape: {n: 0 <= n < 6, k: 0 <= k < 9}
  einsums:
  - "T[m] = A[m]"
  - "U[m] = T[M: n]"
  - "V[m] = T[M: k]"
  - einsum: "T2[m] = B[m]"
    name: Again
)");
  CHECK(tensor(d, "T").shape == std::vector<std::int64_t>{4});   // written by T only; the readers reach 6 and 9
  CHECK(tensor(d, "A").shape == std::vector<std::int64_t>{4});
  CHECK(d.einsums.at(3).name == "T2");  // AccelForge names a string Einsum after its output
  CHECK_FALSE(d.mapping);
  // AccelForge checks that every access of a tensor names the same ranks.
  const auto e = th::spec_error([] {
    describe_text_spec("workload:\n  rank_sizes: {M: 4, N: 4}\n  einsums:\n  - \"T[m] = A[m]\"\n  - \"U[n] = T[N: n]\"\n");
  });
  CHECK(e.where().line == 5);
  CHECK(e.message() == "tensor 'T' has ranks [N] in Einsum 'U' but [M] in Einsum 'T'; every access of a tensor names the same ranks");
}

TEST_CASE("describe: JSON and text renderings") {
  const SpecDescription d = describe_text_spec(th::kConv1d);
  const nlohmann::json j = nlohmann::json::parse(looptrace::describe_json(d));
  CHECK(j["einsums"][0]["name"] == "Conv");
  CHECK(j["einsums"][0]["rank_variables"]["p"] == 8);
  CHECK(j["einsums"][0]["tensors"][2] == nlohmann::json({{"name", "O"}, {"output", true}}));
  CHECK(j["tensors"]["I"]["shape"] == nlohmann::json::array({10}));
  CHECK(j["mapping"]["n_timesteps"] == 24);
  CHECK(j["mapping"]["kind"] == "Nested");
  CHECK(j["mapping"]["nodes"][1] == nlohmann::json({{"kind", "Temporal"}, {"rank_variable", "p"}, {"tile_shape", 1},
                                                    {"initial_tile_shape", 1}, {"iterations", 8},
                                                    {"iteration_duration", 3}, {"duration", 24}}));
  CHECK(j["mapping"]["nodes"][0]["level"] == "MainMemory");
  CHECK(looptrace::describe_json(d, -1).find('\n') == std::string::npos);
  const std::string text = looptrace::describe_text(d);
  CHECK(th::contains(text, "Einsums (1):\n  Conv  p=8 r=3  I, W -> O\n"));
  CHECK(th::contains(text, "Tensors (3):\n  I[P]  10\n  W[R]  3\n  O[P]  8\n"));
  CHECK(th::contains(text, "Mapping (24 timesteps):\n  Storage MainMemory: I, W, O  (windows of 24 timesteps)\n"
                           "  Temporal p  tile 1  8 iterations x 3 = 24 timesteps\n"));
  CHECK(th::contains(text, "    Storage GlobalBuffer: I, W, O  (windows of 3 timesteps)\n"
                           "    Temporal r  tile 1  3 iterations x 1 = 3 timesteps\n      Compute Conv on MAC\n"));
}

TEST_CASE("describe: n_timesteps agrees with compile_schedule over the corpus mappings") {
  struct Case {
    std::vector<std::string> files;
    looptrace::Defines vars;
  };
  const looptrace::Defines mm = {{"N_EINSUMS", 2}, {"M", 8}, {"KN", 4}};
  const Case cases[] = {
      {{"conv1d.workload.yaml", "conv1d.mapping.yaml"}, {}},
      {{"conv2d.workload.yaml", "conv2d.mapping.yaml"}, {}},
      {{"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"}, mm},
      {{"matmuls.yaml", "unfused_matmuls_to_simple.mapping.yaml"}, mm},
      {{"matvecs.yaml", "fused_matvecs_to_simple_tiled.mapping.yaml"}, {}},
      {{"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}, {}},
      {{"matmuls.yaml", "matmul_imperfect.mapping.yaml"}, {{"N_EINSUMS", 1}, {"M", 8}, {"KN", 7}}},
      {{"simple_fused.workload.yaml", "simple_fused.mapping.yaml"}, {}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.files[1]);
    std::vector<std::string> paths;
    for (const auto& f : c.files) paths.push_back(th::corpus_dir() + "/" + f);
    const looptrace::Spec spec = looptrace::load_spec(paths, c.vars);
    const SpecDescription d = describe_spec(spec);
    CHECK(d.n_timesteps == looptrace::compile_schedule(spec).n_timesteps);
    CHECK(d.mapping->duration == d.n_timesteps);
  }
}

namespace {

// ../shared/findings/stages/describe_ranks.yaml, with B reading T through `proj`.
std::string ranks_spec(const std::string& proj) {
  return R"(workload:
  iteration_space_shape: {m: 0 <= m < 2, n: 0 <= n < 2, k: 0 <= k < 2}
  einsums:
  - name: A
    tensor_accesses:
    - {name: X, projection: [m, n]}
    - {name: T, projection: [m, n], output: True}
  - name: B
    tensor_accesses:
    - {name: T, projection: )" + proj + R"(}
    - {name: Y, projection: [m, k], output: True}
mapping:
  nodes:
  - !Storage {tensors: [X, T, Y], component: MainMemory}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: n, tile_shape: 1}
      - !Compute {einsum: A}
    - !Nested
      nodes:
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: B}
)";
}

}  // namespace

TEST_CASE("describe, summary and trace: one check that a tensor's accesses name the same ranks (the front end)") {
  // AccelForge's Workload._validate refuses T as [M, N] in A and [M, K] in B. The front
  // end does, so no subcommand gets a Spec: describe used to refuse it alone.
  const auto e = th::spec_error([] { (void)th::spec_text(ranks_spec("[m, k]")); });
  CHECK(e.where().line == 10);
  CHECK(e.message() == "tensor 'T' has ranks [M, K] in Einsum 'B' but [M, N] in Einsum 'A'; every access of a tensor names the same ranks");
  // The order counts too (AccelForge compares the tuples).
  const auto swapped = th::spec_error([] { (void)th::spec_text(ranks_spec("{N: n, M: m}")); });
  CHECK(th::contains(swapped.message(), "has ranks [N, M] in Einsum 'B' but [M, N] in Einsum 'A'"));
  // T as [M, N] in both: describe and the compiler agree (A: 2 x 2, then B: 2 x 2).
  const looptrace::Spec spec = th::spec_text(ranks_spec("[m, n]"));
  const SpecDescription d = describe_spec(spec);
  const looptrace::Schedule s = looptrace::compile_schedule(spec);
  CHECK(d.n_timesteps == 8);
  CHECK(s.n_timesteps == 8);
  CHECK(tensor(d, "T").ranks == std::vector<std::string>{"M", "N"});
  CHECK(tensor(d, "T").shape == std::vector<std::int64_t>{2, 2});
  CHECK(s.tensors.at(std::size_t(s.find_tensor("T"))).shape == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("describe: the branches after a Nested node's continuation are compiled like the rest, for every subcommand") {
  // No path reaches the second Nested (the first Compute continues the root). describe
  // shows it; it used to fail there (its figures were never measured).
  const std::string head = R"(workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - "B[m] = A[m]"
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Compute {einsum: B}
  - !Nested
    nodes:
)";
  const looptrace::Spec spec = th::spec_text(head + R"(    - !Temporal {rank_variable: m, tile_shape: 2, initial_tile_shape: 3}
    - !Storage {tensors: [A], component: Buf}
    - !Temporal {rank_variable: m, tile_shape: 1}
    - !Compute {einsum: B}
)");
  const SpecDescription d = describe_spec(spec);
  CHECK(d.n_timesteps == 4);
  CHECK(looptrace::compile_schedule(spec).n_timesteps == 4);
  REQUIRE(d.mapping->children.size() == 3);
  // m < 4 cut as [0, 3), [3, 4): 2 tiles; the inner loop gets the larger tile, 3: 3 x 1.
  const DescribedNode& unreached = d.mapping->children[2];
  CHECK(unreached.duration == 6);
  REQUIRE(unreached.children.size() == 4);
  CHECK(unreached.children[0].iterations == 2);
  CHECK(unreached.children[0].initial_tile_shape == 3);
  CHECK(unreached.children[0].iteration_duration == 3);
  CHECK(unreached.children[0].duration == 6);
  CHECK(unreached.children[1].duration == 3);  // a Buf window per outer iteration
  CHECK(unreached.children[2].iterations == 3);
  CHECK(unreached.children[3].duration == 1);
  // A loop there over a variable B lacks: describe and the compiler (summary, trace)
  // refuse it alike; the compiler used to pass over it.
  const looptrace::Spec bad = th::spec_text(head + "    - !Temporal {rank_variable: q, tile_shape: 1}\n"
                                                   "    - !Compute {einsum: B}\n");
  const auto by_describe = th::spec_error([&] { (void)describe_spec(bad); });
  const auto by_compiler = th::spec_error([&] { (void)looptrace::compile_schedule(bad); });
  CHECK(by_compiler.where().line == 11);
  CHECK(th::contains(by_compiler.message(), "loop over rank variable 'q', but Einsum 'B'"));
  CHECK(by_describe.message() == by_compiler.message());
}

TEST_CASE("describe: the compiler checks every Einsum's box, mapped or not, as describe does") {
  // C is unmapped and q unbounded: describe always refused it; now the compiler does too.
  const looptrace::Spec spec = th::spec_text(R"(workload:
  iteration_space_shape: {m: 0 <= m < 4}
  einsums:
  - "B[m] = A[m]"
  - "C[q] = D[q]"
mapping:
  nodes:
  - !Compute {einsum: B}
)");
  const auto by_describe = th::spec_error([&] { (void)describe_spec(spec); });
  const auto by_compiler = th::spec_error([&] { (void)looptrace::compile_schedule(spec); });
  CHECK(th::contains(by_compiler.message(), "rank variable 'q' of Einsum 'C' is unbounded"));
  CHECK(by_describe.message() == by_compiler.message());
  CHECK(by_compiler.where().line == 5);
}
