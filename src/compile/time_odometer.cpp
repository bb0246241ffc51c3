#include "looptrace/compile/time_odometer.hpp"

#include <algorithm>

namespace looptrace {

TimeOdometer::TimeOdometer(std::int64_t base, std::span<const TimeLevel> levels) : base_(base) {
  levels_.reserve(levels.size());
  for (const TimeLevel& l : levels) levels_.push_back({l});
  seek(first_time());
}

std::int64_t TimeOdometer::size() const {
  std::int64_t n = 1;
  for (const auto& l : levels_) n *= l.count;
  return n;
}

std::int64_t TimeOdometer::first_time() const {
  return time_at(base_, levels_, [](std::size_t) { return std::int64_t(0); });
}

std::int64_t TimeOdometer::last_time() const {
  return time_at(base_, levels_, [&](std::size_t l) { return levels_[l].count - 1; });
}

void TimeOdometer::seek(std::int64_t target) {
  done_ = false;
  std::int64_t x = target - base_;  // what is left of target below the current level
  std::int64_t t = base_;
  for (std::size_t l = 0; l < levels_.size(); ++l) {
    const TimeLevel& lv = levels_[l];
    std::int64_t j = x <= 0 ? 0 : std::min(x / lv.period, lv.count - 1);
    levels_[l].j = j;
    t += j * lv.period + lv.offset;
    x -= j * lv.period + lv.offset;
  }
  t_ = t;
  // The greedy decode gives the last time <= target, or the first one when target
  // comes before it; one step finishes the job.
  if (t_ < target) advance();
}

std::size_t TimeOdometer::advance_innermost(std::int64_t n) {
  if (!levels_.empty() && n > 1) {
    levels_.back().j += n - 1;
    t_ += (n - 1) * levels_.back().period;
  }
  return advance();
}

std::size_t TimeOdometer::advance() {
  for (std::size_t l = levels_.size(); l-- > 0;) {
    const TimeLevel& lv = levels_[l];
    if (levels_[l].j + 1 < lv.count) {
      ++levels_[l].j;
      t_ += lv.period;
      return l;
    }
    t_ -= levels_[l].j * lv.period;
    levels_[l].j = 0;
  }
  done_ = true;
  return levels_.size();
}

}  // namespace looptrace
