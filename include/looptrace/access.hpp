// What the engine yields: one access of one tensor element at one timestep, as the
// compact record the stages pass around in batches, and as the user-facing Access.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "looptrace/record.hpp"
#include "looptrace/compile/schedule.hpp"

namespace looptrace {

// Per-rank coordinates of an element, unravelled on demand (derivable from `element`
// and the tensor's shape, so the hot path never stores them).
// compile_schedule refuses tensors of more ranks, so they fit inline.
inline constexpr std::size_t kMaxRanks = 16;
namespace detail {
[[noreturn]] void too_many_ranks(std::size_t ranks);  // throws std::length_error
}  // namespace detail

class Coordinates {
 public:
  // Only the first size() entries are ever written or read: unravelling a record costs
  // its ranks, not kMaxRanks.
  Coordinates() = default;
  explicit Coordinates(std::size_t n) : size_(n) {  // zeros; n <= kMaxRanks or it throws
    if (n > kMaxRanks) detail::too_many_ranks(n);
    for (std::size_t r = 0; r < n; ++r) v_[r] = 0;
  }
  Coordinates(const Coordinates& other) : size_(other.size_) {
    for (std::size_t r = 0; r < size_; ++r) v_[r] = other.v_[r];
  }
  Coordinates& operator=(const Coordinates& other) {
    size_ = other.size_;
    for (std::size_t r = 0; r < size_; ++r) v_[r] = other.v_[r];
    return *this;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t& operator[](std::size_t r) { return v_[r]; }
  std::int64_t operator[](std::size_t r) const { return v_[r]; }
  std::int64_t& back() { return v_[size_ - 1]; }
  std::int64_t back() const { return v_[size_ - 1]; }
  std::int64_t* begin() { return v_; }
  std::int64_t* end() { return v_ + size_; }
  const std::int64_t* begin() const { return v_; }
  const std::int64_t* end() const { return v_ + size_; }
  const std::int64_t* data() const { return v_; }
  operator std::span<const std::int64_t>() const { return {v_, size_}; }
  friend bool operator==(const Coordinates& a, const Coordinates& b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t r = 0; r < a.size_; ++r)
      if (a.v_[r] != b.v_[r]) return false;
    return true;
  }
  // Row-major: the last rank varies fastest. More than kMaxRanks ranks throw.
  friend Coordinates unravel(std::int64_t element, std::span<const std::int64_t> shape) {
    if (shape.size() > kMaxRanks) detail::too_many_ranks(shape.size());
    Coordinates c;
    c.size_ = shape.size();
    for (std::size_t r = shape.size(); r-- > 0;) {
      c.v_[r] = element % shape[r];
      element /= shape[r];
    }
    return c;
  }

 private:
  std::size_t size_ = 0;
  std::int64_t v_[kMaxRanks];
};
Coordinates unravel(std::int64_t element, std::span<const std::int64_t> shape);

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
