// Suggestions for misspelt subcommands and options (src/cli/suggest.cpp), on a small
// CLI11 app built here.
#include <doctest/doctest.h>

#include "../src/cli/suggest.hpp"

using looptrace::closest;
using looptrace::edit_distance;
using looptrace::cli::unknown_argument;

TEST_CASE("suggest: edit distance counts inserts, deletes, substitutions and swaps") {
  CHECK(edit_distance("trace", "trace") == 0);
  CHECK(edit_distance("--max-timestep", "--max-timesteps") == 1);  // a delete
  CHECK(edit_distance("tarce", "trace") == 1);                     // a swap
  CHECK(edit_distance("summry", "summary") == 1);
  CHECK(edit_distance("plot", "plat") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("n_einsums", "N_EINSUMS") == 1);  // case alone: one edit
  CHECK(edit_distance("n_einsum", "N_EINSUMS") == 1);   // letters compare without case
  CHECK(edit_distance("Storage", "storage") == 1);
}

TEST_CASE("suggest: the closest candidate only when near enough, unless asked") {
  const std::vector<std::string> subs{"summary", "trace", "plot", "iterations"};
  CHECK(closest("tarce", subs) == "trace");
  CHECK(closest("iteratons", subs) == "iterations");
  CHECK_FALSE(closest("movment", subs).has_value());
  CHECK(closest("movment", subs, std::string_view::npos).has_value());
  CHECK_FALSE(closest("x", {}).has_value());
  CHECK_FALSE(closest("trace", subs).has_value());  // the word itself is no suggestion
  CHECK(closest("plat", {"plot", "flat"}) == "flat");  // ties: alphabetical
}

TEST_CASE("suggest: unknown subcommands and options in a command line") {
  CLI::App app{"test"};
  std::string value;
  auto* trace = app.add_subcommand("trace", "");
  trace->add_option("--max-timesteps", value, "");
  trace->add_option("-D,--define", value, "");
  auto* summary = app.add_subcommand("summary", "");
  summary->add_option("--max-timesteps", value, "");
  summary->add_option("--format", value, "");
  auto args = [](std::initializer_list<const char*> a) { return std::vector<std::string>(a.begin(), a.end()); };

  CHECK_FALSE(unknown_argument(app, args({"trace", "f.yaml", "--max-timesteps", "3"})).has_value());
  CHECK_FALSE(unknown_argument(app, args({"trace", "f.yaml", "--max-timesteps=3", "-DN=4"})).has_value());
  CHECK_FALSE(unknown_argument(app, args({"trace", "--", "--odd-file-name.yaml"})).has_value());
  CHECK_FALSE(unknown_argument(app, args({"trace", "f.yaml", "--max-timesteps", "-1"})).has_value());
  CHECK(*unknown_argument(app, args({"trace", "f.yaml", "--max-timestep", "3"})) ==
        "unknown option '--max-timestep' for 'looptrace trace'; did you mean '--max-timesteps'? "
        "(see 'looptrace trace --help')");
  CHECK(*unknown_argument(app, args({"trace", "f.yaml", "--format", "csv"})) ==
        "unknown option '--format' for 'looptrace trace' (--format is an option of summary) "
        "(see 'looptrace trace --help')");
  CHECK(*unknown_argument(app, args({"tarce", "f.yaml"})) == "unknown subcommand 'tarce'; did you mean 'trace'?");
  CHECK(unknown_argument(app, args({"zzzzzzzzzz"}))->find("unknown subcommand 'zzzzzzzzzz'; the closest is") == 0);
}
