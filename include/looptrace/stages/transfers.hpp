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

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "looptrace/error.hpp"
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

template <TrafficSource Up>
class Transfers : public Stage<Transfers<Up>, TransferRequest> {
 public:
  Transfers() = default;
  Transfers(Up up, TransferOptions options, AddressMap addresses)
      : up_(std::move(up)), options_(std::move(options)), addresses_(std::move(addresses)) {
    const Schedule& s = this->schedule();
    for (const auto& slot : up_.traffic().slots) {
      const int parent = s.parent(slot.storage, s.tensors[slot.tensor].name);
      if (parent >= 0 && s.storages[std::size_t(parent)].level == options_.level)
        child_slots_.push_back({slot.storage, slot.tensor});
    }
  }

  // The next requests before `until`, in time order; empty when there are none before
  // it. The windows upstream run ahead: a fill is known when its window closes.
  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime) {
    out_.clear();
    for (;;) {
      release(std::min(settled_, until));
      if (!out_.empty() || settled_ >= until) return out_;
      pull();
    }
  }
  std::int64_t next_timestep() const {
    const std::int64_t t = std::max<std::int64_t>(settled_, 0);
    return pending_.empty() ? t : std::min(t, pending_.top().timestep);
  }
  const StreamContext& context() const { return up_.context(); }
  const AddressMap& addresses() const { return addresses_; }

 private:
  struct Later {  // the heap's order: time, writes first, then ascending address
    bool operator()(const TransferRequest& a, const TransferRequest& b) const {
      if (a.timestep != b.timestep) return a.timestep > b.timestep;
      if (a.write != b.write) return !a.write;
      if (a.address != b.address) return a.address > b.address;
      // Two children asking for one line at once: a fixed order, or the heap's order
      // would depend on what else is pending and shards would not concatenate.
      if (a.child != b.child) return a.child > b.child;
      return a.tensor > b.tensor;
    }
  };
  bool is_child(const TileTraffic& t) const {
    for (const auto& [s, x] : child_slots_)
      if (s == t.storage && x == t.tensor) return true;
    return false;
  }
  void queue_lines(std::span<const std::int64_t> elements, std::int64_t t, bool write, const TileTraffic& w) {
    if (t < options_.report.from || t > options_.report.to || (t == options_.report.to && !options_.report_end))
      return;
    const std::uint64_t base = addresses_.base[w.tensor], size = addresses_.bytes[w.tensor];
    const std::uint64_t line = options_.line_bytes;
    std::uint64_t next = 0;  // elements ascend, so lines do: the first line not yet asked for
    for (std::int64_t e : elements) {
      const std::uint64_t a = base + std::uint64_t(e) * size;
      for (std::uint64_t l = std::max(a / line, next); l <= (a + size - 1) / line; ++l)
        pending_.push({t, l * line, write, w.storage, w.tensor});
      next = std::max(next, (a + size - 1) / line + 1);
    }
  }
  // Takes one batch of window events; `settled_` becomes the time before which every
  // request is known.
  void pull() {
    const auto events = up_.next_batch(kEndOfTime);
    if (events.empty()) {
      settled_ = kEndOfTime;
      return;
    }
    std::int64_t now = events.front().kind == TileTraffic::Kind::open ? events.front().start : events.front().end;
    for (const TileTraffic& t : events) {
      if (!is_child(t)) continue;
      if (t.kind == TileTraffic::Kind::open) {
        open_starts_.push_back(t.start);
        continue;
      }
      open_starts_.erase(std::find(open_starts_.begin(), open_starts_.end(), t.start));
      queue_lines(t.drained, t.end, true, t);
      queue_lines(t.filled, t.start, false, t);
    }
    // Nothing earlier than the oldest open child window's start can still come.
    for (std::int64_t s : open_starts_) now = std::min(now, s);
    settled_ = now;
  }
  void release(std::int64_t before) {
    while (!pending_.empty() && pending_.top().timestep < before) {
      out_.push_back(pending_.top());
      pending_.pop();
    }
  }

  Up up_;
  TransferOptions options_;
  AddressMap addresses_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> child_slots_;  // (node, tensor)
  std::vector<std::int64_t> open_starts_;  // of the child windows open now
  std::priority_queue<TransferRequest, std::vector<TransferRequest>, Later> pending_;
  std::vector<TransferRequest> out_;
  std::int64_t settled_ = std::numeric_limits<std::int64_t>::min();
};

// The transfers of `options.level` over a stream. Over window traffic collected with
// its elements (`window_traffic(true)`), it takes the windows as they come; over
// accesses, it follows the windows of the level's children itself.
struct TransfersAdaptor : StageAdaptor {
  TransferOptions options;
  bool given_children = false;
  std::vector<std::uint32_t> children;  // given: follow these nodes (else every child)
  std::vector<std::string> tensors;     // given: of these tensors (all when empty)

  template <TrafficSource Up>
  Transfers<Up> operator()(Up up) const {
    AddressMap addresses = AddressMap::make(up.schedule(), traced_tensors(up.schedule(), up.context()), options.align);
    return Transfers<Up>(std::move(up), options, std::move(addresses));
  }
  template <AccessSource Up>
  auto operator()(Up up) const {
    std::vector<std::uint32_t> nodes = given_children ? children : children_of(up.schedule(), options.level, tensors);
    return std::move(up) | tile_windows(std::move(nodes), tensors) | window_traffic(true) | *this;
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
  explicit TransferStream(BoxTransfers boxes) : engine_(std::move(boxes)) {}
  TransferStream(Enumerating e, std::string why) : engine_(std::move(e)), why_(std::move(why)) {}

  std::span<const TransferRequest> next_batch(std::int64_t until = kEndOfTime) {
    return std::visit([&](auto& e) { return e.next_batch(until); }, engine_);
  }
  std::int64_t next_timestep() const {
    return std::visit([](const auto& e) { return e.next_timestep(); }, engine_);
  }
  const StreamContext& context() const {
    return std::visit([](const auto& e) -> const StreamContext& { return e.context(); }, engine_);
  }
  const AddressMap& addresses() const {
    return std::visit([](const auto& e) -> const AddressMap& { return e.addresses(); }, engine_);
  }
  bool closed_form() const { return engine_.index() == 0; }
  // Why the accesses are followed: what the boxes could not give (empty when asked to).
  const std::string& enumerated_because() const { return why_; }

 private:
  std::variant<BoxTransfers, Enumerating> engine_;
  std::string why_;
};

// The requests between `options.level` and its children over the selection of `o`:
// --max-timesteps cuts the trace itself, while --from/--to and --shard keep the
// requests of the whole run that fall in that window (so shards concatenate). From
// the children's tiles as boxes, unless `options.enumerate` or a tile is not one.
// Throws SpecError for a sampled selection or a level with no Storage node.
inline auto transfer_pipeline(const Schedule& s, const TraceOptions& o, TransferOptions options) {
  check_transfer_options(options);
  if (o.sample_timesteps)
    throw SpecError("a transfer trace needs whole stretches of time: use --from/--to, --max-timesteps "
                    "or --shard, not --sample-timesteps");
  const std::vector<std::uint32_t> children = children_of(s, options.level, o.tensors);
  options.report = TimeSelection::from_options(o, s.n_timesteps).window;
  // The last drains happen as the trace ends; a window that stops earlier leaves
  // requests at its end to the window that starts there.
  options.report_end = options.report.to == std::min(s.n_timesteps, o.max_timesteps.value_or(s.n_timesteps));
  TraceOptions whole = o;  // the trace that runs the straddling windows whole
  const TimeRange run = transfer_trace_window(s, children, options.report);
  whole.shard.reset();
  whole.from = run.from, whole.to = run.to;
  using Enumerating = decltype(trace_pipeline(s, whole) | std::declval<TransfersAdaptor>());
  std::string why;
  if (!options.enumerate)
    if (auto boxes = BoxTransfers::make(s, o, options, &why)) return TransferStream<Enumerating>(std::move(*boxes));
  TransfersAdaptor a = transfers(std::move(options));
  a.given_children = true;
  a.children = children;
  a.tensors = o.tensors;
  return TransferStream<Enumerating>(trace_pipeline(s, whole) | a, std::move(why));
}

}  // namespace looptrace
