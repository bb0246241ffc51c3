// When each transfer request is issued, in cycles: `transfer_pipeline(...) |
// issue_cycles(timing)`. A request at timestep t may issue from cycle t x C on; with
// an issue rate (N requests per K cycles, as a DMA engine issues them) the requests
// queue in stream order, each taking the next free slot, so a window's burst spreads
// over cycles and may run past the next timestep's first cycle. Without a rate every
// request of a timestep is at its first cycle. Cycles never decrease.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/transfer_request.hpp"

namespace looptrace {

struct IssueTiming {
  std::int64_t cycles_per_timestep = 1;  // C
  std::int64_t requests = 0;             // N per K cycles; 0: no limit
  std::int64_t per_cycles = 1;           // K
  bool limited() const { return requests > 0; }
};

// "4" (4 requests a cycle), "1/8" (one every 8 cycles) or "0.5" as N/K; throws
// SpecError for anything else, zero, or more than 2^20 in either part.
IssueTiming parse_issue_rate(std::string_view text, std::int64_t cycles_per_timestep = 1);

struct IssuedTransfer {
  TransferRequest request;
  std::int64_t cycle;
};

// The issue cycle of each request in turn. The engine issues one request every K/N
// cycles: a request issues at its timestep's first cycle or, when the engine is still
// busy, when it is next free. O(1) state; no division unless a cycle boundary passes.
class IssueClock {
 public:
  explicit IssueClock(IssueTiming timing) : t_(timing) {}

  // Throws SpecError when the cycle passes 2^63 - 1.
  std::int64_t issue(std::int64_t timestep) {
    std::int64_t start;
    if (__builtin_mul_overflow(timestep, t_.cycles_per_timestep, &start)) fail(timestep);
    if (!t_.limited()) return start;
    // free_ + frac_ / N: when the engine may issue next.
    if (start > free_ || (start == free_ && frac_ == 0)) free_ = start, frac_ = 0;
    const std::int64_t cycle = free_;
    frac_ += t_.per_cycles;
    if (frac_ >= t_.requests) {
      if (__builtin_add_overflow(free_, frac_ / t_.requests, &free_)) fail(timestep);
      frac_ %= t_.requests;
    }
    return cycle;
  }

 private:
  [[noreturn]] static void fail(std::int64_t timestep);
  IssueTiming t_;
  std::int64_t free_ = 0, frac_ = 0;
};

template <Source Up>
  requires std::same_as<ValueOf<Up>, TransferRequest>
class IssueCycles : public ForwardingStage<IssueCycles<Up>, Up, IssuedTransfer> {
 public:
  IssueCycles(Up up, IssueTiming timing)
      : ForwardingStage<IssueCycles<Up>, Up, IssuedTransfer>(std::move(up)), clock_(timing) {}

  std::span<const IssuedTransfer> next_batch(std::int64_t until = kEndOfTime) {
    const auto in = this->up_.next_batch(until);
    buffer_.clear();
    for (const TransferRequest& r : in) buffer_.push_back({r, clock_.issue(r.timestep)});
    return buffer_;
  }

 private:
  IssueClock clock_;
  std::vector<IssuedTransfer> buffer_;
};

struct IssueCyclesAdaptor : StageAdaptor {
  IssueTiming timing;
  template <Source Up>
  IssueCycles<Up> operator()(Up up) const {
    return IssueCycles<Up>(std::move(up), timing);
  }
};

inline IssueCyclesAdaptor issue_cycles(IssueTiming timing = {}) { return {{}, timing}; }

}  // namespace looptrace
