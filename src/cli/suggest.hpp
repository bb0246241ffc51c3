// Misspelt subcommands and options, named with the closest real one.
#pragma once

#include <CLI/CLI.hpp>

#include "support/suggest.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace looptrace::cli {

// An error message for the first unknown subcommand or option in argv, if any: the
// command line's words are checked against what `app` and its subcommands define.
std::optional<std::string> unknown_argument(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace looptrace::cli
