#include "looptrace/stages/time_selection.hpp"

#include <algorithm>
#include <random>
#include <unordered_set>

#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

// K distinct values of [0, n), uniformly, by Floyd's algorithm: O(K) work and memory
// whatever n is, deterministic for a seed.
std::vector<std::int64_t> sample_distinct(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unordered_set<std::int64_t> chosen;
  chosen.reserve(std::size_t(k) * 2);
  std::vector<std::int64_t> out;
  out.reserve(std::size_t(k));
  for (std::int64_t j = n - k; j < n; ++j) {
    std::int64_t t = std::uniform_int_distribution<std::int64_t>(0, j)(rng);
    if (!chosen.insert(t).second) {
      chosen.insert(j);
      t = j;
    }
    out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TimeSelection TimeSelection::from_options(const TraceOptions& o, std::int64_t n) {
  TimeSelection s;
  std::int64_t from = o.from.value_or(0), to = o.to.value_or(n);
  if (from < 0) throw SpecError("--from must not be negative, not " + std::to_string(from));
  if (o.to && to < from)
    throw SpecError("--to (" + std::to_string(to) + ") comes before --from (" +
                    std::to_string(from) + ")");
  if (o.max_timesteps) {
    if (*o.max_timesteps < 0)
      throw SpecError("--max-timesteps must not be negative, not " + std::to_string(*o.max_timesteps));
    to = std::min(to, *o.max_timesteps);
  }
  to = std::min(to, n);
  from = std::min(from, to);
  s.trace_end = o.max_timesteps ? std::clamp<std::int64_t>(*o.max_timesteps, 0, n) : n;
  s.sampled = o.sample_timesteps.has_value();
  s.window = {from, to};
  if (o.shard) {
    auto [index, count] = *o.shard;
    if (count <= 0 || index < 0 || index >= count)
      throw SpecError("--shard I/N needs 0 <= I < N, not " + std::to_string(index) + "/" +
                      std::to_string(count));
    __int128 len = to - from;
    std::int64_t a = from + std::int64_t(len * index / count);
    std::int64_t b = from + std::int64_t(len * (index + 1) / count);
    s.window = {a, b};
  }
  s.truncated = s.window.from > 0 || s.window.to < n;
  if (o.sample_timesteps) {
    std::int64_t k = *o.sample_timesteps;
    std::int64_t len = s.window.to - s.window.from;
    if (k < 0) throw SpecError("--sample-timesteps must not be negative");
    if (k > 100'000'000)  // the sample is held sorted in memory: 8 bytes a timestep
      throw SpecError("--sample-timesteps takes at most 100000000 timesteps; use --shard or "
                      "--from/--to for larger parts of the trace");
    if (k < len) s.truncated = true;
    k = std::min(k, len);
    for (std::int64_t t : sample_distinct(len, k, o.seed))
      s.ranges.push_back({s.window.from + t, s.window.from + t + 1});
  } else if (!s.window.empty()) {
    s.ranges.push_back(s.window);
  }
  return s;
}

}  // namespace looptrace

namespace looptrace {

std::size_t TimeSelection::first_range_after(std::int64_t t) const {
  return std::size_t(std::partition_point(ranges.begin(), ranges.end(), [&](const TimeRange& r) { return r.to <= t; }) -
                     ranges.begin());
}

}  // namespace looptrace
