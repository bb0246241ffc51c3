// Small text helpers every part of the library and the CLI shares.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace looptrace {

// The words with `separator` between each two: join({"A", "B"}) is "A, B".
inline std::string join(const std::vector<std::string>& words, std::string_view separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += separator;
    out += words[i];
  }
  return out;
}

}  // namespace looptrace
