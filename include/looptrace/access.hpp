// What the engine yields: one access of one tensor element at one timestep.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "looptrace/schedule.hpp"

namespace looptrace {

// The compact record stages pass around in batches; `trace` indexes Schedule::traces.
struct AccessRecord {
  std::int64_t timestep;
  std::int64_t element;
  std::uint32_t trace;
};

// Per-rank coordinates of an element, unravelled on demand (they are derivable from
// `element` and the tensor's shape, so the hot path never stores them).
struct Coordinates {
  static constexpr std::size_t kMaxRanks = 16;
  std::array<std::int64_t, kMaxRanks> values{};
  std::size_t size = 0;

  const std::int64_t* begin() const { return values.data(); }
  const std::int64_t* end() const { return values.data() + size; }
  std::int64_t operator[](std::size_t r) const { return values[r]; }
};

inline Coordinates unravel(std::int64_t element, const TensorInfo& tensor) {
  Coordinates c;
  c.size = tensor.shape.size();
  for (std::size_t r = c.size; r-- > 0;) {
    c.values[r] = element % tensor.shape[r];
    element /= tensor.shape[r];
  }
  return c;
}

// The user-facing view of one access.
struct Access {
  std::int64_t timestep = 0;
  std::string_view einsum;
  std::string_view tensor;
  bool is_output = false;
  std::int64_t element = 0;
  const TraceInfo* trace = nullptr;
  const TensorInfo* tensor_info = nullptr;

  Coordinates coords() const { return unravel(element, *tensor_info); }
};

inline Access make_access(const Schedule& s, const AccessRecord& r) {
  const TraceInfo& t = s.traces[r.trace];
  return {r.timestep, t.einsum, t.tensor, t.is_output, r.element, &t, &s.tensors[t.tensor_index]};
}

}  // namespace looptrace
