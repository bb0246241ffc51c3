// The core of the stream, with no dependency on the spec front end or the schedule:
// the 24-byte record the stages pass around, a batch of them, and a range of time
// (TimeRange, from interval.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "looptrace/interval.hpp"  // TimeRange

namespace looptrace {

// A time after every timestep: the `until` of a pull that wants everything.
inline constexpr std::int64_t kEndOfTime = INT64_MAX;

// `trace` indexes Schedule::traces. `multiplicity` is how many points of the leaf's tile
// touch the element at that timestep (saturating at 2^32 - 1): a projection yields the
// multiset of (point, tensor) pairs this way, and dedup merges equal elements.
struct AccessRecord {
  std::int64_t timestep;
  std::int64_t element;
  std::uint32_t trace;
  std::uint32_t multiplicity;
};
static_assert(sizeof(AccessRecord) == 24);

// Records in time order; `deduplicated`: each element appears once per (timestep,
// trace), in ascending order (what the dedup stage guarantees).
struct AccessBatch {
  std::span<const AccessRecord> records;
  bool deduplicated = false;  // the safe default: a later dedup() does its work

  auto begin() const { return records.begin(); }
  auto end() const { return records.end(); }
  std::size_t size() const { return records.size(); }
  bool empty() const { return records.empty(); }
  const AccessRecord& operator[](std::size_t i) const { return records[i]; }
  const AccessRecord& back() const { return records.back(); }
};

// The earlier and the later of two timesteps (what the stages ask of std::min and
// std::max, without including <algorithm> in every user's build).
constexpr std::int64_t earlier(std::int64_t a, std::int64_t b) { return b < a ? b : a; }
constexpr std::int64_t later(std::int64_t a, std::int64_t b) { return a < b ? b : a; }

}  // namespace looptrace
