// Exact reuse (stack) distances of a line stream, and from them the miss-ratio curve
// (SEMANTICS "Caches"): a fully associative LRU cache of C lines misses exactly the
// cold accesses and those whose distance (distinct other lines since the line's last
// access) is >= C, so one pass gives every size at once.
//
//   ... | cache_lines(64) | reuse_distances() | cache(config)
//
// A bit per last-use time (set while it is some line's last use) and levels of counts
// over it (an entry per 128 times, then per 8 entries of the level below) count the
// lines used since: the bits of the last use's block, then a masked 8-lane sum a level,
// the same levels every access (no branch on the distance); each line's last use is
// kept in pages of 2^10 lines (4 KiB) made as lines are reached; times are renumbered
// when they run past eight times the lines seen, so memory follows the distinct lines
// (about 5 bytes each, and the histogram), not the trace.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "looptrace/stages/cache_lines.hpp"
#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

class ReuseDistances {
 public:
  explicit ReuseDistances(std::size_t tensors = 0);
  ReuseDistances(ReuseDistances&&) noexcept;
  ReuseDistances& operator=(ReuseDistances&&) noexcept;
  ~ReuseDistances();

  void run(std::span<const LineAccess> in);

  std::uint64_t accesses() const;
  std::uint64_t cold() const;  // first accesses (infinite distance)
  std::uint64_t lines() const;  // distinct lines
  // histogram()[d]: the accesses at distance d (cold ones excluded).
  const std::vector<std::uint64_t>& histogram() const;
  // Misses of a fully associative LRU cache of 2^k lines, k = 0, 1, ... until a size
  // holds every line (misses = cold): in total, and of one tensor's accesses.
  std::vector<std::uint64_t> misses_at_powers() const;
  std::vector<std::uint64_t> misses_at_powers(std::uint32_t tensor) const;
  std::uint64_t tensor_accesses(std::uint32_t tensor) const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

template <LineSource Up>
class ReuseTap : public ForwardingStage<ReuseTap<Up>, Up, LineAccess> {
 public:
  explicit ReuseTap(Up up)
      : ForwardingStage<ReuseTap<Up>, Up, LineAccess>(std::move(up)), d_(this->schedule().tensors.size()) {}

  std::span<const LineAccess> next_batch(std::int64_t until = kEndOfTime) {
    const std::span<const LineAccess> in = this->up_.next_batch(until);
    d_.run(in);
    return in;
  }
  const ReuseDistances& distances() const { return d_; }
  ReuseDistances& distances() { return d_; }

 private:
  ReuseDistances d_;
};

struct ReuseDistancesAdaptor : StageAdaptor {
  template <LineSource Up>
  ReuseTap<Up> operator()(Up up) const {
    return ReuseTap<Up>(std::move(up));
  }
};

// `lines | reuse_distances()`: the lines pass unchanged; read distances() at the end.
inline ReuseDistancesAdaptor reuse_distances() { return {}; }

}  // namespace looptrace
