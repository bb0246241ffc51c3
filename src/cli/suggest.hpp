// Misspelt subcommands and options, named with the closest real one.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace looptrace::cli {

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is near enough to be what was meant
// (always the nearest when `always` is set).
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates,
                                   bool always = false);

// An error message for the first unknown subcommand or option in argv, if any: the
// command line's words are checked against what `app` and its subcommands define.
std::optional<std::string> unknown_argument(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace looptrace::cli
