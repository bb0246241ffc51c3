// The transfer trace of a level in closed form: the source that `transfer_pipeline`
// uses unless told to enumerate. Each child window's fills and drains are boxes of the
// tensor (src/closed_form/movement_boxes.hpp), and a box's lines are written straight out in
// ascending order, row by row; the boxes of one timestep are merged (writes first,
// then addresses ascending, then child and tensor, as the contract orders them). No
// access is visited: the first request is out as soon as the schedule is compiled,
// and memory is O(children x depth x ranks), whatever the tensor and tile sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/transfer_request.hpp"

namespace looptrace {

class BoxTransfers {
 public:
  // The transfers of `options.level`, keeping the requests in `options.report` (and at
  // its end if `report_end`), windows cut by `o`'s prefix; nullopt (with the reason in
  // `why`) where a child's fills or drains are not unions of boxes. transfer_pipeline()
  // sets the report from `o`'s selection.
  static std::optional<BoxTransfers> make(const Schedule& schedule, const TraceOptions& o,
                                          const TransferOptions& options, std::string* why);
  BoxTransfers(BoxTransfers&&) noexcept;
  BoxTransfers& operator=(BoxTransfers&&) noexcept;
  ~BoxTransfers();

  // The next requests before `until`, in the contract's order; empty when none.
  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime);
  std::int64_t next_timestep() const;
  const StreamContext& context() const;
  const AddressMap& addresses() const;

 private:
  BoxTransfers();
  struct Impl;
  Impl* impl_ = nullptr;  // owned (kept opaque, so this header stays light)
};

}  // namespace looptrace
