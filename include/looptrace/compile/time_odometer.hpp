// The timesteps of a leaf (or the window starts of a storage level) as an odometer
// over temporal loops: t = base + sum_l (j_l * period_l + offset_l), j_l in [0, count_l).
// Advancing is amortized O(1); seeking to the first t >= T decodes the digits from T
// in O(depth), with no replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace looptrace {

struct TimeLevel {
  std::int64_t count = 1;   // iterations of this temporal loop
  std::int64_t period = 1;  // timesteps one iteration lasts
  std::int64_t offset = 0;  // timesteps between an iteration's start and the next level's
};

// The time of the iteration whose digit at level l is digit(l): base + sum_l (j_l *
// period_l + offset_l). It grows with every digit.
template <class Levels, class Digit>
std::int64_t time_at(std::int64_t base, const Levels& levels, Digit&& digit) {
  std::int64_t t = base;
  for (std::size_t l = 0; l < levels.size(); ++l) t += digit(l) * levels[l].period + levels[l].offset;
  return t;
}

class TimeOdometer {
 public:
  TimeOdometer() = default;
  TimeOdometer(std::int64_t base, std::span<const TimeLevel> levels);

  // Positions on the first t >= target (or done() if there is none).
  void seek(std::int64_t target);
  // Steps to the next t; returns the outermost level whose digit changed (levels()
  // when the odometer ran out and is now done()).
  std::size_t advance();
  // Steps n times (n >= 1) where the innermost digit has room for n - 1 more steps
  // without a carry; returns what the last step's advance() returns.
  std::size_t advance_innermost(std::int64_t n);
  std::int64_t innermost_remaining() const {  // steps before the innermost digit wraps
    return levels_.empty() ? 1 : levels_.back().count - levels_.back().j;
  }
  const TimeLevel& level(std::size_t l) const { return levels_[l]; }

  bool done() const { return done_; }
  std::int64_t time() const { return t_; }
  std::int64_t digit(std::size_t level) const { return levels_[level].j; }
  std::size_t levels() const { return levels_.size(); }
  // The number of distinct times (the product of counts).
  std::int64_t size() const;
  std::int64_t first_time() const;
  std::int64_t last_time() const;

 private:
  struct Level : TimeLevel {
    std::int64_t j = 0;  // the digit
  };
  // Allocated once, when the odometer is made; advancing and seeking allocate nothing.
  std::int64_t base_ = 0;
  std::vector<Level> levels_;
  std::int64_t t_ = 0;
  bool done_ = false;
};

}  // namespace looptrace
