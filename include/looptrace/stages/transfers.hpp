// The transfer trace of one memory level L (SEMANTICS "Data movement"): in
// time order, what moves between L and its children (the Storage nodes whose parent
// for a tensor is at L). At a child window's start its fills are read from L; at its
// end its drains are written to L. Requests carry byte addresses (every traced tensor
// laid out in turn, each at the next multiple of `align`) and are coalesced to lines:
// one request per distinct line per fill or drain of one (node, tensor, window).
// At one timestep writes come before reads, then addresses ascend.
//
// A child window's fills are known only when it closes, so requests wait in a heap
// until no open child window can still add an earlier one: memory grows with the
// child tiles open at once, never with the trace.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/options.hpp"
#include "looptrace/stages/trace_pipeline.hpp"
#include "looptrace/stages/transfer_boxes.hpp"
#include "looptrace/stages/transfer_request.hpp"
#include "looptrace/stages/window_traffic.hpp"

namespace looptrace {

// The children of L: every Storage node that has, for a tensor, its parent at L.
std::vector<std::uint32_t> children_of(const Schedule& schedule, const std::string& level,
                                       const std::vector<std::string>& tensors);

// The traced window for transfers that cover [from, to) of the whole run exactly: the
// children's windows that straddle an edge, or end at `from` (their drains happen
// there), are taken whole.
TimeRange transfer_trace_window(const Schedule& schedule, const std::vector<std::uint32_t>& children,
                                TimeRange report);

// The tensors a context traces, in order of first trace (the order of the address map).
std::vector<std::string> traced_tensors(const Schedule& schedule, const StreamContext& context);

// What the Transfers stage does with the window traffic it pulls: each child window's
// fills and drains become line requests, which wait in a heap (ordered as the contract
// says: time, writes first, ascending address, then child and tensor) until no open
// child window can still add an earlier one.
class TransferQueue {
 public:
  TransferQueue() = default;
  TransferQueue(const Schedule& schedule, const TrafficPlan& plan, TransferOptions options, AddressMap addresses);

  // Takes one batch of window traffic (empty: the traffic is over).
  void take(std::span<const TileTraffic> events);
  // Every request is known before this time.
  std::int64_t settled() const { return settled_; }
  // Moves the requests before `before` to `out`, in order.
  void release(std::int64_t before, std::vector<TransferRequest>& out);
  std::int64_t next_timestep() const;
  const AddressMap& addresses() const { return addresses_; }

 private:
  int child_of(const TileTraffic& t) const;  // its index in child_slots_, or -1
  void queue_lines(std::span<const std::int64_t> elements, std::int64_t t, bool write, const TileTraffic& w);

  TransferOptions options_;
  AddressMap addresses_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> child_slots_;  // (node, tensor)
  std::vector<std::unordered_set<std::int64_t>> drained_before_;      // per child slot, with partial_sums
  std::vector<std::int64_t> read_back_;                                // one window's fills and read-backs
  std::vector<std::int64_t> open_starts_;  // of the child windows open now
  std::vector<TransferRequest> pending_;   // a heap, earliest on top
  std::vector<std::uint64_t> scratch_;     // one fill's or drain's addresses, sorted
  std::int64_t settled_ = -kEndOfTime - 1;
};

// The accesses a transfer trace of a cut stream needs and the stream does not carry.
// A window [from, to) or a shard looks at part of a run that goes on, and its
// transfers are the whole run's requests in that window (SEMANTICS "Data movement"):
// a child window that straddles an edge is run whole. So the parts of `run` before and
// after the stream's window come from the schedule, with the stream's traces; the
// stream's own accesses, as the stages before chose them, fill the window.
template <AccessSource Up>
class WidenedAccesses : public Stage<WidenedAccesses<Up>> {
  using Part = FilterTraces<TracePipeline>;

 public:
  WidenedAccesses(Up up, TimeRange run) : up_(std::move(up)), context_(up_.context()) {
    const Schedule& s = *context_.schedule;
    const TimeRange window = context_.window;
    if (run.from < window.from) before_.emplace(part(s, {run.from, window.from}));
    if (window.to < run.to) after_.emplace(part(s, {window.to, run.to}));
    context_.window = run;
  }

  AccessBatch next_batch(std::int64_t until = kEndOfTime) {
    if (stage_ == 0 && before_) {
      const AccessBatch b = before_->next_batch(until);
      if (!b.empty() || before_->next_timestep() < kEndOfTime) return b;
    }
    if (stage_ <= 1) {
      stage_ = 1;
      const AccessBatch b = up_.next_batch(until);
      if (!b.empty() || up_.next_timestep() < kEndOfTime) return b;
      stage_ = 2;
    }
    return after_ ? after_->next_batch(until) : AccessBatch{};
  }
  std::int64_t next_timestep() const {
    if (stage_ == 0 && before_ && before_->next_timestep() < kEndOfTime) return before_->next_timestep();
    if (stage_ <= 1 && up_.next_timestep() < kEndOfTime) return up_.next_timestep();
    return after_ ? after_->next_timestep() : kEndOfTime;
  }
  const StreamContext& context() const { return context_; }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }

 private:
  Part part(const Schedule& s, TimeRange range) const {
    TraceOptions o;
    o.from = range.from, o.to = range.to;
    std::vector<bool> traces = context_.traces;
    if (traces.empty()) traces.assign(s.traces.size(), true);
    return Part(trace_pipeline(s, o), std::move(traces));
  }

  Up up_;
  StreamContext context_;
  std::optional<Part> before_, after_;  // only where the run reaches past the window
  int stage_ = 0;  // 0: before the window, 1: the stream's own, 2: after it
};

template <TrafficSource Up>
class Transfers : public Stage<Transfers<Up>, TransferRequest> {
 public:
  Transfers() = default;
  Transfers(Up up, TransferOptions options, AddressMap addresses) : up_(std::move(up)) {
    queue_ = TransferQueue(this->schedule(), up_.traffic(), std::move(options), std::move(addresses));
  }

  // The next requests before `until`, in time order; empty when there are none before
  // it. The windows upstream run ahead: a fill is known when its window closes.
  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime) {
    out_.clear();
    for (;;) {
      queue_.release(earlier(queue_.settled(), until), out_);
      if (!out_.empty() || queue_.settled() >= until) return out_;
      queue_.take(up_.next_batch(kEndOfTime));
    }
  }
  std::int64_t next_timestep() const { return queue_.next_timestep(); }
  const StreamContext& context() const { return up_.context(); }
  const AddressMap& addresses() const { return queue_.addresses(); }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }

 private:
  Up up_;
  TransferQueue queue_;
  std::vector<TransferRequest> out_;
};

// Refuses (SpecError) a stream whose transfers are not defined: a sample of timesteps.
void check_transfer_stream(const StreamContext& context);

// Refuses (SpecError) what Timeloop's convention does not define, where `t` asks for
// it: a selection of time (it counts the whole run) and the enumeration.
void check_timeloop_transfers(const Schedule& schedule, const TraceOptions& o, const TransferOptions& t);

// The transfers of `options.level` over a stream, of the requests in the stream's
// window (a prefix ends the trace: its last drains are kept; a window [from, to) or a
// shard keeps the whole run's requests there, as `looptrace transfers` does). Over
// accesses it follows the windows of the level's children itself, and runs the child
// windows that straddle the stream's edges whole (WidenedAccesses). Over window traffic
// collected with its elements (`window_traffic(true)`) it takes the windows as they
// come, so that stream must not cut a run (its straddling windows would be clipped).
struct TransfersAdaptor : StageAdaptor {
  TransferOptions options;
  bool given_children = false;
  std::vector<std::uint32_t> children;  // given: follow these nodes (else every child)
  std::vector<std::string> tensors;     // given: of these tensors (all when empty)

  template <TrafficSource Up>
  Transfers<Up> operator()(Up up) const {
    const StreamContext& c = up.context();
    check_transfer_stream(c);
    refuse_timeloop();
    if (c.cuts_run())
      throw SpecError("transfers over window traffic of a stream cut to [" + std::to_string(c.window.from) + ", " +
                      std::to_string(c.window.to) + ") would clip the windows that straddle its edges: put " +
                      "transfers(options) straight after the accesses, which runs them whole");
    return over_traffic(std::move(up), options);
  }
  template <AccessSource Up>
  auto operator()(Up up) const {
    const Schedule& s = up.schedule();
    const StreamContext& c = up.context();
    check_transfer_stream(c);
    refuse_timeloop();
    std::vector<std::uint32_t> nodes = given_children ? children : children_of(s, options.level, tensors);
    TransferOptions o = options;
    const std::int64_t end = earlier(c.trace_end, s.n_timesteps);
    o.report = c.window;
    o.report_end = c.window.to >= end;  // the trace ends there: its last drains are in
    TimeRange run = transfer_trace_window(s, nodes, c.window);
    run.to = earlier(run.to, end);
    if (o.partial_sums && !run.empty()) run.from = 0;  // what earlier windows drained, from the trace's start
    auto traffic = WidenedAccesses<Up>(std::move(up), run) | tile_windows(std::move(nodes), tensors) |
                   window_traffic(true);
    return over_traffic(std::move(traffic), std::move(o));
  }

 private:
  void refuse_timeloop() const {
    if (options.convention == Convention::timeloop)
      throw SpecError("the Transfers stage follows SEMANTICS' fills and drains: Timeloop's convention comes from "
                      "transfer_pipeline(), in closed form");
  }
  template <TrafficSource Up>
  static Transfers<Up> over_traffic(Up up, TransferOptions o) {
    AddressMap addresses = AddressMap::make(up.schedule(), traced_tensors(up.schedule(), up.context()), o.align,
                                           o.layout, o.level);
    return Transfers<Up>(std::move(up), std::move(o), std::move(addresses));
  }
};

// `... | transfers(options)`: the requests between `options.level` and its children,
// of what the stream traces (options.report: which of them to keep).
inline TransfersAdaptor transfers(TransferOptions options) {
  TransfersAdaptor a;
  a.options = std::move(options);
  return a;
}

// A transfer trace from either engine: the boxes (BoxTransfers) or the accesses
// (`Enumerating`, a Transfers stage over a trace pipeline); the requests are the same.
template <class Enumerating>
class TransferStream : public Stage<TransferStream<Enumerating>, TransferRequest> {
 public:
  explicit TransferStream(BoxTransfers boxes) : boxes_(std::move(boxes)) {}
  TransferStream(Enumerating e, std::string why) : enumerating_(std::move(e)), why_(std::move(why)) {}

  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime) {
    return boxes_ ? boxes_->next_batch(until) : enumerating_->next_batch(until);
  }
  std::int64_t next_timestep() const { return boxes_ ? boxes_->next_timestep() : enumerating_->next_timestep(); }
  const StreamContext& context() const { return boxes_ ? boxes_->context() : enumerating_->context(); }
  const AddressMap& addresses() const { return boxes_ ? boxes_->addresses() : enumerating_->addresses(); }
  bool closed_form() const { return boxes_.has_value(); }
  // Why the accesses are followed: what the boxes could not give (empty when asked to).
  const std::string& enumerated_because() const { return why_; }

 private:
  std::optional<BoxTransfers> boxes_;  // one of the two engines
  std::optional<Enumerating> enumerating_;
  std::string why_;
};

// The requests between `options.level` and its children over the selection of `o`:
// --max-timesteps cuts the trace itself, while --from/--to and --shard keep the
// requests of the whole run that fall in that window (so shards concatenate). From
// the children's tiles as boxes, unless `options.enumerate` or a tile is not one.
// Throws SpecError for a sampled selection or a level with no Storage node.
inline auto transfer_pipeline(const Schedule& s, const TraceOptions& o, TransferOptions options) {
  check_transfer_options(options);
  check_timeloop_transfers(s, o, options);
  if (o.sample_timesteps) check_transfer_stream({.sampled = true});
  const std::vector<std::uint32_t> children = children_of(s, options.level, o.tensors);
  // The report window for the boxes; the enumerating stage takes it from its stream.
  options.report = TimeSelection::from_options(o, s.n_timesteps).window;
  // The last drains happen as the trace ends; a window that stops earlier leaves
  // requests at its end to the window that starts there.
  options.report_end = options.report.to == earlier(s.n_timesteps, o.max_timesteps.value_or(s.n_timesteps));
  using Enumerating = decltype(trace_pipeline(s, o) | std::declval<TransfersAdaptor>());
  std::string why;
  if (!options.enumerate)
    if (auto boxes = BoxTransfers::make(s, o, options, &why)) return TransferStream<Enumerating>(std::move(*boxes));
  TransfersAdaptor a = transfers(std::move(options));
  a.given_children = true;
  a.children = children;
  a.tensors = o.tensors;
  return TransferStream<Enumerating>(trace_pipeline(s, o) | a, std::move(why));
}

}  // namespace looptrace
