#include "looptrace/stages/issue_cycles.hpp"

#include <charconv>
#include <numeric>
#include <string>

namespace looptrace {

namespace {

constexpr std::int64_t kMaxPart = std::int64_t(1) << 20;

bool whole(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

IssueTiming parse_issue_rate(std::string_view text, std::int64_t cycles_per_timestep) {
  const std::string shown(text);
  auto fail = [&]() -> IssueTiming {
    throw SpecError("--issue-rate takes requests per cycle as N, N/K (N requests every K cycles) or a decimal "
                    "such as 0.25, each part from 1 to 1048576, not '" + shown + "'");
  };
  IssueTiming t;
  t.cycles_per_timestep = cycles_per_timestep;
  std::int64_t n = 0, k = 1;
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    if (!whole(text.substr(0, slash), n) || !whole(text.substr(slash + 1), k)) return fail();
  } else if (const auto dot = text.find('.'); dot != std::string_view::npos) {
    const std::string_view ints = text.substr(0, dot), fraction = text.substr(dot + 1);
    if (fraction.empty() || fraction.size() > 6 || (!ints.empty() && !whole(ints, n)) || n < 0 || n > kMaxPart)
      return fail();  // (bounded before it is scaled by up to 10^6)
    std::int64_t f = 0;
    if (!whole(fraction, f) || fraction.find_first_not_of("0123456789") != std::string_view::npos) return fail();
    for (std::size_t i = 0; i < fraction.size(); ++i) n *= 10, k *= 10;
    n += f;
  } else if (!whole(text, n)) {
    return fail();
  }
  const std::int64_t g = n > 0 && k > 0 ? std::gcd(n, k) : 1;
  n /= g, k /= g;
  if (n < 1 || k < 1 || n > kMaxPart || k > kMaxPart) return fail();
  t.requests = n, t.per_cycles = k;
  return t;
}

void IssueClock::fail(std::int64_t timestep) {
  throw SpecError("the issue cycle of a request at timestep " + std::to_string(timestep) +
                  " passes 2^63 - 1: lower --cycles-per-timestep or raise --issue-rate");
}

}  // namespace looptrace
