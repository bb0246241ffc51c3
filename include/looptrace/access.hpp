// What the engine yields: one access of one tensor element at one timestep, as the
// compact record the stages pass around in batches, and as the user-facing Access.
#pragma once

#include <boost/container/static_vector.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "looptrace/schedule.hpp"

namespace looptrace {

// A time after every timestep: the `until` of a pull that wants everything.
inline constexpr std::int64_t kEndOfTime = std::numeric_limits<std::int64_t>::max();

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
  bool deduplicated = true;

  auto begin() const { return records.begin(); }
  auto end() const { return records.end(); }
  std::size_t size() const { return records.size(); }
  bool empty() const { return records.empty(); }
  const AccessRecord& operator[](std::size_t i) const { return records[i]; }
  const AccessRecord& back() const { return records.back(); }
};

// Per-rank coordinates of an element, unravelled on demand (derivable from `element`
// and the tensor's shape, so the hot path never stores them).
inline constexpr std::size_t kMaxRanks = 16;
using Coordinates = boost::container::static_vector<std::int64_t, kMaxRanks>;

inline Coordinates unravel(std::int64_t element, std::span<const std::int64_t> shape) {
  Coordinates c(shape.size());
  for (std::size_t r = shape.size(); r-- > 0;) {
    c[r] = element % shape[r];
    element /= shape[r];
  }
  return c;
}
inline Coordinates unravel(std::int64_t element, const TensorInfo& tensor) {
  return unravel(element, std::span<const std::int64_t>(tensor.shape));
}

// The user-facing view of one access. Names and shape view the schedule, which must
// outlive it; `trace` indexes Schedule::traces.
struct Access {
  std::int64_t timestep = 0;
  std::string_view einsum;
  std::string_view tensor;
  bool is_output = false;
  std::int64_t element = 0;
  std::uint32_t trace = 0;
  std::uint32_t multiplicity = 1;
  std::span<const std::int64_t> shape;  // the tensor's, per rank

  Coordinates coords() const { return unravel(element, shape); }
};

inline Access make_access(const Schedule& s, const AccessRecord& r) {
  const TraceInfo& t = s.traces[r.trace];
  return {r.timestep, t.einsum, t.tensor, t.is_output, r.element,
          r.trace, r.multiplicity, s.tensors[std::size_t(t.tensor_index)].shape};
}

}  // namespace looptrace
