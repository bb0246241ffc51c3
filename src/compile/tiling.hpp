// The tile cut of SEMANTICS "Time", written once for the compiler (loop counts,
// shapes, overflow checks), the leaf iterations and the closed-form counts: a loop
// with first tile `initial` and stride `stride` cuts the tile it is given, [lo, hi),
// into [lo, lo + initial), [lo + initial, lo + initial + stride), ..., each clipped
// to hi. Every consumer (the compiler, the leaf iterations, the closed-form counts and
// movement boxes) cuts tiles through these functions. Internal (not installed).
#pragma once

#include <algorithm>
#include <cstdint>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/interval.hpp"
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

// How many of a loop's iterations a tile of size `given` keeps: tile_count, capped at
// the loop's count (a loop bound by a larger tile runs on over empty sub-tiles).
template <class Int = std::int64_t>
Int tiles_within(std::int64_t given, const LoopLevel& l) {
  const Int n = tile_count<Int>(given, l);
  return n < l.count ? n : Int(l.count);
}

// The first j >= 1 whose sub-tile of a tile of size `given` is not a full stride.
template <class Int = std::int64_t>
Int first_not_full(std::int64_t given, const LoopLevel& l) {
  return given >= l.initial_tile_shape ? (Int(given) - l.initial_tile_shape) / l.tile_shape + 1 : Int(1);
}

// Whether sub-tile j, of `size` points, is a whole stride like the one before it: from
// there on, each full sub-tile is the one before it translated by a stride.
inline bool whole_stride(const LoopLevel& l, std::int64_t j, std::int64_t size) {
  return size == l.tile_shape && (j >= 1 || l.initial_tile_shape == l.tile_shape);
}

// For a sub-tile j that is a whole stride of a tile of size `given`: how many of the
// loop's sub-tiles from j on (j included) are, each translating the one before.
template <class Int = std::int64_t>
Int whole_strides_from(std::int64_t given, const LoopLevel& l, std::int64_t j) {
  const Int until = first_not_full<Int>(given, l);
  return (until < l.count ? until : Int(l.count)) - j;
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

// The union of sub-tiles `digits` (j in [digits.from, digits.to), not empty) of
// `given`, clipped to it; empty (from >= to) past its end. Int: the width of the
// arithmetic (__int128 where j may be huge).
template <class Int = std::int64_t>
Interval sub_tiles(const Interval& given, const LoopLevel& l, const Interval& digits) {
  const Int width = Int(given.to) - given.from, start = sub_start<Int>(l, digits.from);
  if (start >= width) return {given.to, given.to};
  const Int end = sub_end<Int>(l, digits.to - 1);
  return {given.from + std::int64_t(start), given.from + std::int64_t(end < width ? end : width)};
}

// Sub-tile j of `given`, clipped to it.
template <class Int = std::int64_t>
Interval sub_tile(const Interval& given, const LoopLevel& l, std::int64_t j) {
  return sub_tiles<Int>(given, l, Interval::point(j));
}

}  // namespace looptrace::tiling
