// "Did you mean ...?": the one spelling rule of the CLI (subcommands, options) and the
// spec (keys, tags, variables, Jinja names, files).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace looptrace {

// Edits (insert, delete, substitute, swap two neighbours: "tarce") that turn a into b,
// letters compared without case; words that differ in case only are one edit apart
// (n_einsums and N_EINSUMS), so a case slip is the strongest hint.
std::size_t edit_distance(std::string_view a, std::string_view b);

// How many edits a suggestion for `word` may be away: a third of the word, at least 2.
std::size_t near_enough(std::string_view word);

// The candidate nearest to `word` other than `word` itself (ties: the first in
// alphabetical order), if it is at most `max_edits` away (no limit when `max_edits`
// is npos).
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates,
                                   std::size_t max_edits);
inline std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  return closest(word, candidates, near_enough(word));
}

}  // namespace looptrace
