// What each tile window moves (SEMANTICS "Data movement"). Over the tile
// windows of every level, it keeps the tile of each (Storage node, tensor) in its open
// window and, when the window closes, yields its size, its fills (elements whose first
// access in the window is a read: they arrive from the parent) and its drains (elements
// written: they go back at the end). An access updates the innermost node that holds
// its tensor, and goes up to the parents only when it changes what that node knew, so
// outer levels pay per element of a tile, not per access. Within one timestep reads
// come before writes. Memory grows with the tiles, never with the trace.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "looptrace/stages/tile_windows.hpp"

namespace looptrace {

// The elements one (Storage node, tensor) holds in its open window, each with how it
// first arrived and whether it was written: a byte per element, in pages of 256
// elements taken from a pool as the window touches them and given back when it
// closes, so memory follows the largest tile (tensors too large for a page table use
// a hash table instead).
class TileSet {
 public:
  TileSet() = default;
  explicit TileSet(std::int64_t tensor_size);

  // Records an access; true when the element's state changed (it is new to the window,
  // or written for the first time), so the parent must hear of it too.
  bool touch(std::int64_t element, bool write) {
    std::uint8_t& s = state(element);
    if (s == 0) {
      s = std::uint8_t(kSeen | (write ? kWritten : kReadFirst));
      touched_.push_back(element);
      return true;
    }
    if (write && !(s & kWritten)) {
      s |= kWritten;
      return true;
    }
    return false;
  }

  struct Tally {
    std::int64_t tile = 0, fills = 0, drains = 0;
  };
  // Ends the window: its counts and, when asked, the filled and drained elements in
  // ascending order. The set is empty afterwards.
  Tally close(std::vector<std::int64_t>* filled = nullptr, std::vector<std::int64_t>* drained = nullptr);

 private:
  static constexpr std::uint8_t kSeen = 1, kReadFirst = 2, kWritten = 4;
  static constexpr int kPageBits = 8;
  static constexpr std::int64_t kPage = std::int64_t(1) << kPageBits;
  static constexpr std::int64_t kEmpty = -1;
  std::uint8_t& state(std::int64_t element) {
    if (!paged_) return hashed(element);
    const std::size_t p = std::size_t(element >> kPageBits);
    std::int32_t page = pages_[p];
    if (page < 0) page = take_page(p);
    return arena_[std::size_t(page) * kPage + std::size_t(element & (kPage - 1))];
  }
  std::int32_t take_page(std::size_t p);
  std::uint8_t& hashed(std::int64_t element);
  std::uint8_t hashed_find(std::int64_t element) const;
  std::uint8_t& insert(std::int64_t element);
  std::size_t find_slot(std::int64_t element) const;
  void rehash(std::size_t capacity);

  bool paged_ = true;
  std::vector<std::int32_t> pages_;      // per page of the tensor: its page in the arena, or -1
  std::vector<std::uint8_t> arena_;      // pages in use or free, kPage bytes each
  std::vector<std::int32_t> free_pages_;
  std::vector<std::size_t> window_pages_;  // pages of the tensor this window took
  std::vector<std::int64_t> keys_;    // hashed: open addressing, linear probing
  std::vector<std::uint8_t> values_;
  std::size_t mask_ = 0;
  std::vector<std::int64_t> touched_;  // this window's elements, in arrival order
  std::vector<std::size_t> slots_;     // close(), hashed: where they sit in the table
};

// One (Storage node, tensor) window: opened (no counts yet) or closed (with them).
struct TileTraffic {
  enum class Kind : std::uint8_t { open, close };
  Kind kind;
  std::uint32_t storage;    // Schedule::storages
  std::uint32_t tensor;     // Schedule::tensors
  std::int64_t start, end;  // the window, clipped to the traced window
  std::int64_t tile = 0, fills = 0, drains = 0;
  std::span<const std::int64_t> filled, drained;  // when collected: ascending elements
};

// Which (node, tensor) tiles the stage keeps, and the chain of them each trace updates.
struct TrafficPlan {
  struct Slot {
    std::uint32_t storage, tensor;
  };
  std::vector<Slot> slots;
  std::vector<std::vector<int>> slots_of_storage;  // per Schedule::storages entry
  std::vector<std::vector<int>> chain;             // per trace: slots, innermost first
  std::vector<bool> writes;                        // per trace: is_output
  bool reads_and_writes_meet = false;              // some tensor is read and written

  static TrafficPlan make(const Schedule& schedule, const std::vector<std::uint32_t>& storages,
                          const std::vector<std::string>& tensors);
};

// A source of window traffic (TileTraffic batches), and its (node, tensor) slots.
template <class S>
concept TrafficSource = Source<S> && std::same_as<BatchOf<S>, std::span<const TileTraffic>> &&
                        requires(const S& s) {
                          { s.traffic() } -> std::convertible_to<const TrafficPlan&>;
                        };

template <TileWindowSource Up>
class WindowTraffic : public Stage<WindowTraffic<Up>, TileTraffic> {
 public:
  WindowTraffic() = default;
  // `collect`: also hand out the filled and drained elements of each window.
  WindowTraffic(Up up, bool collect)
      : up_(std::move(up)),
        plan_(TrafficPlan::make(this->schedule(), up_.windows().storages, up_.windows().tensors)),
        collect_(collect) {
    for (const auto& slot : plan_.slots) sets_.emplace_back(this->schedule().tensors[slot.tensor].size);
    last_.assign(this->schedule().traces.size(), -1);
  }

  // The next window events (all at one timestep before `until`); empty when there are
  // none before it.
  std::span<const TileTraffic> next_batch(std::int64_t until = kEndOfTime) {
    for (;;) {
      const TileStep step = up_.next_batch(until);
      if (step.empty()) {  // every access before `until` is in
        flush_writes();
        return {};
      }
      if (!step.accesses.empty()) {
        take(step.accesses);
        continue;
      }
      flush_writes();  // every access before this timestep is in
      const auto out = on_events(step.events);
      if (!out.empty()) return out;  // (events of nodes with no traced tensor give none)
    }
  }
  std::int64_t next_timestep() const { return up_.next_timestep(); }
  const StreamContext& context() const { return up_.context(); }
  const TrafficPlan& traffic() const { return plan_; }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }

 private:
  // take() and touch() run per access: inlined into the stage that pulls, whatever
  // the compiler's budget (out of line, transfers ran 25% slower).
  [[gnu::always_inline]] void take(const AccessBatch& batch) {
    for (const AccessRecord& r : batch) {
      if (plan_.chain[r.trace].empty()) continue;
      if (!deferred_.empty() && deferred_.front().timestep != r.timestep) flush_writes();
      if (plan_.writes[r.trace] && plan_.reads_and_writes_meet) deferred_.push_back(r);  // after this timestep's reads
      else touch(r);
    }
  }
  [[gnu::always_inline]] void touch(const AccessRecord& r) {
    // The same trace touching the same element again changes nothing in this window.
    if (last_[r.trace] == r.element) return;
    last_[r.trace] = r.element;
    const bool write = plan_.writes[r.trace];
    for (int slot : plan_.chain[r.trace])
      if (!sets_[std::size_t(slot)].touch(r.element, write)) break;
  }
  void flush_writes() {
    for (const AccessRecord& r : deferred_) touch(r);
    deferred_.clear();
  }
  std::span<const TileTraffic> on_events(std::span<const WindowEvent> events) {
    last_.assign(last_.size(), -1);  // windows change: every touch counts again
    out_.clear();
    filled_.clear(), drained_.clear();
    // Elements go to per-event vectors first: spans into them stay valid once all are in.
    std::size_t n_closes = 0;
    for (const WindowEvent& e : events)
      if (e.kind == WindowEvent::Kind::close) n_closes += plan_.slots_of_storage[e.storage].size();
    if (collect_) filled_.resize(n_closes), drained_.resize(n_closes);
    std::size_t k = 0;
    for (const WindowEvent& e : events)
      for (int slot : plan_.slots_of_storage[e.storage]) {
        TileTraffic t{e.kind == WindowEvent::Kind::open ? TileTraffic::Kind::open : TileTraffic::Kind::close,
                      e.storage, plan_.slots[std::size_t(slot)].tensor, e.start, e.end, 0, 0, 0, {}, {}};
        if (t.kind == TileTraffic::Kind::close) {
          const TileSet::Tally tally = sets_[std::size_t(slot)].close(collect_ ? &filled_[k] : nullptr,
                                                                      collect_ ? &drained_[k] : nullptr);
          t.tile = tally.tile, t.fills = tally.fills, t.drains = tally.drains;
          if (collect_) t.filled = filled_[k], t.drained = drained_[k];
          ++k;
        }
        out_.push_back(t);
      }
    return out_;
  }

  Up up_;
  TrafficPlan plan_;
  bool collect_ = false;
  std::vector<TileSet> sets_;  // per slot
  std::vector<AccessRecord> deferred_;  // writes of the current timestep
  std::vector<std::int64_t> last_;      // per trace: the element it touched last
  std::vector<TileTraffic> out_;
  std::vector<std::vector<std::int64_t>> filled_, drained_;
};

struct WindowTrafficAdaptor : StageAdaptor {
  bool collect = false;
  template <TileWindowSource Up>
  WindowTraffic<Up> operator()(Up up) const {
    return WindowTraffic<Up>(std::move(up), collect);
  }
};

// `... | tile_windows() | window_traffic()`: per (node, tensor) window, its tile, fills
// and drains; `collect_elements` also lists them (for transfer traces).
inline WindowTrafficAdaptor window_traffic(bool collect_elements = false) {
  WindowTrafficAdaptor a;
  a.collect = collect_elements;
  return a;
}

}  // namespace looptrace
