// `looptrace describe`: the Einsums, tensors and (with a mapping) compiled LoopTree of a
// spec, as AccelForge reads it: one JSON object, or an indented tree (--format text).
#include <unistd.h>

#include <iostream>

#include "common.hpp"
#include "looptrace/sinks/describe.hpp"
#include "looptrace/sinks/output.hpp"

namespace looptrace::cli {

void add_describe_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "describe", "Print the Einsums, tensors and (with a mapping) the compiled LoopTree of a spec as JSON");
  struct Args {
    std::vector<std::string> files;
    std::vector<std::string> defines;
    std::string format = "json";
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("files", args->files, "Spec files (YAML, may be Jinja templates); a mapping is optional")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-D,--define", args->defines, "Set a template variable: -D KEY=VALUE (repeatable)");
  cmd->add_option("--format", args->format, "json (one object) or text (an indented tree)")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "text"}));
  cmd->callback([args] {
    Defines vars;
    for (const auto& d : args->defines) {
      auto [key, value] = parse_define(d);
      vars[key] = std::move(value);  // a later -D of the same name wins
    }
    LoadOptions options;
    options.require_mapping = false;
    const Spec spec = load_spec(args->files, vars, options);
    print_warnings(spec);
    const SpecDescription d = describe_spec(spec);
    OutputBuffer out(STDOUT_FILENO);  // a failed write is an error (exit 1), EPIPE is not
    out.write(args->format == "text" ? describe_text(d) : describe_json(d) + "\n");
    out.flush();
  });
}

}  // namespace looptrace::cli
