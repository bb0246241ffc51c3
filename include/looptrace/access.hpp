// What the engine yields: one access of one tensor element at one timestep, as the
// compact record the stages pass around in batches, and as the user-facing Access.
#pragma once

#include <boost/container/static_vector.hpp>

#include <cstdint>
#include <span>
#include <string_view>

#include "looptrace/record.hpp"
#include "looptrace/schedule.hpp"

namespace looptrace {

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
