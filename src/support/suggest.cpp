#include "suggest.hpp"

#include <algorithm>
#include <cctype>

namespace looptrace {

namespace {

char folded(char c) { return char(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment on case-folded letters, three rows (names are short, but
  // a file name or a key may not be).
  const std::size_t m = b.size();
  std::vector<std::size_t> before(m + 1), last(m + 1), row(m + 1);
  for (std::size_t j = 0; j <= m; ++j) last[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = folded(a[i - 1]) == folded(b[j - 1]) ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && folded(a[i - 1]) == folded(b[j - 2]) && folded(a[i - 2]) == folded(b[j - 1]))
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  const std::size_t d = last[m];
  const bool case_differs = !std::equal(a.begin(), a.end(), b.begin(), b.end()) &&
                            std::equal(a.begin(), a.end(), b.begin(), b.end(),
                                       [](char x, char y) { return folded(x) == folded(y); });
  return d + (case_differs ? 1 : 0);
}

std::size_t near_enough(std::string_view word) { return std::max<std::size_t>(2, word.size() / 3); }

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates,
                                   std::size_t max_edits) {
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    if (c == word) continue;
    const std::size_t d = edit_distance(word, c);
    if (!best || d < best_distance || (d == best_distance && c < *best)) best = &c, best_distance = d;
  }
  if (!best || (max_edits != std::string_view::npos && best_distance > max_edits)) return std::nullopt;
  return *best;
}

}  // namespace looptrace
