// The one half-open interval [from, to) of 64-bit integers: of timesteps (TimeRange),
// or of coordinates, elements and loop digits (Interval). One template, so that each
// operation is written once; two names, because a window of time and a range of
// coordinates are different things that must not be passed for each other (the tag is
// the unit, and costs nothing at run time).
#pragma once

#include <compare>
#include <cstdint>

namespace looptrace {

template <class Unit>
struct HalfOpen {
  std::int64_t from = 0, to = 0;  // [from, to)

  // The interval of the one value x, [x, x + 1).
  static constexpr HalfOpen point(std::int64_t x) { return {x, x + 1}; }

  constexpr bool empty() const { return from >= to; }
  constexpr std::int64_t size() const { return from < to ? to - from : 0; }
  constexpr bool contains(std::int64_t x) const { return from <= x && x < to; }
  // Whether `o` lies within this one, bounds and all (an empty `o` too).
  constexpr bool contains(const HalfOpen& o) const { return from <= o.from && o.to <= to; }
  constexpr HalfOpen shifted(std::int64_t by) const { return {from + by, to + by}; }

  // By from, then by to: windows sort by their start, sets of intervals are map keys.
  friend constexpr auto operator<=>(const HalfOpen&, const HalfOpen&) = default;
};

// The values in both: empty (from >= to) when they are disjoint.
template <class U>
constexpr HalfOpen<U> intersect(const HalfOpen<U>& a, const HalfOpen<U>& b) {
  return {a.from < b.from ? b.from : a.from, a.to < b.to ? a.to : b.to};
}

// Whether they share a value.
template <class U>
constexpr bool overlaps(const HalfOpen<U>& a, const HalfOpen<U>& b) {
  return a.from < b.to && b.from < a.to;
}

// How many values a set of disjoint intervals (a vector of them) holds.
template <class Set>
std::int64_t cardinality(const Set& set) {
  std::int64_t n = 0;
  for (const auto& x : set) n += x.size();
  return n;
}

// Adds `x` to a set kept sorted by `from` (a vector of intervals), merged into the last
// interval where the two overlap or touch; an empty `x` adds nothing.
template <class Set, class U>
void append_merged(Set& set, const HalfOpen<U>& x) {
  if (x.empty()) return;
  if (!set.empty() && set.back().to >= x.from) {
    if (set.back().to < x.to) set.back().to = x.to;
  } else {
    set.push_back(x);
  }
}

using TimeRange = HalfOpen<struct Timesteps>;  // timesteps
using Interval = HalfOpen<struct Coordinates>;  // coordinates, elements, loop digits

}  // namespace looptrace
