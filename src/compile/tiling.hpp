// The tile cut of SEMANTICS "Time", written once for the compiler (loop counts,
// shapes, overflow checks), the leaf iterations and the closed-form counts: a loop
// with first tile `initial` and stride `stride` cuts the tile it is given, [lo, hi),
// into [lo, lo + initial), [lo + initial, lo + initial + stride), ..., each clipped
// to hi. Internal (not installed).
#pragma once

#include <algorithm>
#include <cstdint>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/mapping.hpp"

namespace looptrace::tiling {

// Tile sizes past any extent (extents stay below 2^61) act alike; capping them keeps
// tile arithmetic inside 64 bits.
inline constexpr std::int64_t kTileCap = std::int64_t(1) << 61;

inline std::int64_t stride_of(const MappingNode& loop) { return std::min(loop.tile_shape, kTileCap); }
inline std::int64_t initial_of(const MappingNode& loop) {
  return std::min(loop.initial_tile_shape.value_or(loop.tile_shape), kTileCap);
}

// How many tiles a loop cuts a tile of size `given` into: the first j whose sub-tile
// is empty (at least 1: a loop runs once over an empty tile too).
template <class Int = std::int64_t>
Int tile_count(std::int64_t given, std::int64_t initial, std::int64_t stride) {
  return given <= initial ? Int(1) : 1 + (Int(given) - initial + stride - 1) / stride;
}
template <class Int = std::int64_t>
Int tile_count(std::int64_t given, const LoopLevel& l) {
  return tile_count<Int>(given, l.initial_tile_shape, l.tile_shape);
}

// The first j >= 1 whose sub-tile of a tile of size `given` is not a full stride.
template <class Int = std::int64_t>
Int first_not_full(std::int64_t given, const LoopLevel& l) {
  return given >= l.initial_tile_shape ? (Int(given) - l.initial_tile_shape) / l.tile_shape + 1 : Int(1);
}

// Where sub-tile j starts and ends relative to the tile it is cut from, unclipped.
template <class Int = std::int64_t>
Int sub_start(const LoopLevel& l, std::int64_t j) {
  return j == 0 ? Int(0) : Int(l.initial_tile_shape) + Int(j - 1) * l.tile_shape;
}
template <class Int = std::int64_t>
Int sub_end(const LoopLevel& l, std::int64_t j) {
  return j == 0 ? Int(l.initial_tile_shape) : Int(l.initial_tile_shape) + Int(j) * l.tile_shape;
}

// Sub-tile j of `given` (anything with lo and hi), clipped to it; empty (lo >= hi)
// past its end. Int: the width of the arithmetic (__int128 where j may be huge).
template <class Int = std::int64_t, class Range>
Range sub_tile(const Range& given, const LoopLevel& l, std::int64_t j) {
  const Int width = Int(given.hi) - given.lo, start = sub_start<Int>(l, j);
  if (start >= width) return {given.hi, given.hi};
  return {given.lo + std::int64_t(start), given.lo + std::int64_t(std::min(width, sub_end<Int>(l, j)))};
}

}  // namespace looptrace::tiling
