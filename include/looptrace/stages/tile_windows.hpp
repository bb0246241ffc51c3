// Tile windows. A Storage node keeps one tile of each of its tensors for as
// long as the subtree below it runs (SEMANTICS "Tile windows"). This stage follows the
// windows of the Storage nodes of one memory level (or of every level) along the access
// stream: each pull yields either the window events of one timestep (closes, then
// opens) or a batch of accesses that all lie inside the windows open now, so a consumer
// knows, for every access, the window that holds it: holder(trace), window(storage).
// Windows are clipped to the traced window (a prefix, a [from, to) window or a shard);
// windows with no access are still opened and closed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/compile/window_walk.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

inline constexpr std::uint32_t kNoStorage = 0xffffffffu;

struct WindowEvent {
  enum class Kind : std::uint8_t { open, close };
  Kind kind;
  std::uint32_t storage;    // Schedule::storages
  std::int64_t start, end;  // the window [start, end), clipped
};

// One batch: the window events of one timestep, or accesses inside the open windows.
struct TileStep {
  std::span<const WindowEvent> events;
  AccessBatch accesses;
  bool empty() const { return events.empty() && accesses.empty(); }
  bool done() const { return empty(); }  // after a pull with no horizon
};

// Stages over tile steps (tap, keep_if, transform, a BatchStage of yours) work on their
// accesses; the window events pass as they are.
template <>
struct BatchTraits<TileStep> {
  using value_type = AccessRecord;
  static std::span<const AccessRecord> values(const TileStep& s) { return s.accesses.records; }
  static TileStep rebuilt(const TileStep& from, std::span<const AccessRecord> values, bool same_elements) {
    if (!from.events.empty()) return from;
    return {{}, BatchTraits<AccessBatch>::rebuilt(from.accesses, values, same_elements)};
  }
};

// The element-wise view of the same stream, for range consumers.
struct TileEvent {
  enum class Kind : std::uint8_t { open, close, access };
  Kind kind;
  std::uint32_t storage;    // open/close: the node; access: the node holding it (kNoStorage: none)
  std::int64_t start, end;  // the window of `storage` ([0, 0) for kNoStorage)
  AccessRecord access;      // kind == access
};

// The Storage nodes a TileWindows stage follows, and which one holds each trace.
struct WindowPlan {
  std::vector<std::uint32_t> storages;  // tracked nodes, tree order
  std::vector<int> holder;              // per trace: the innermost tracked node holding it, or -1
  std::vector<std::string> tensors;     // the tensors followed (empty: all)

  // The nodes at `level` (every level if empty) holding one of `tensors` (all if empty).
  static WindowPlan make(const Schedule& schedule, const std::string& level,
                         const std::vector<std::string>& tensors);
  // These nodes; a trace's holder is the innermost of them above its leaf.
  static WindowPlan of(const Schedule& schedule, std::vector<std::uint32_t> storages,
                       const std::vector<std::string>& tensors);
};

// The windows of one Storage node in time order, clipped to a traced window.
class WindowCursor {
 public:
  WindowCursor() = default;
  WindowCursor(const Schedule& schedule, std::uint32_t storage, TimeRange clip);

  std::uint32_t storage() const { return storage_; }
  bool is_open() const { return open_; }
  const TimeRange& current() const { return current_; }  // while open
  // When this node's next event happens: its close while open, else its next open.
  std::int64_t next_event() const { return open_ ? current_.to : next_start_; }
  void open();   // at next_start()
  void close();  // at current().to

 private:
  void find_next();
  std::uint32_t storage_ = 0;
  WindowWalk walk_;
  bool open_ = false;
  TimeRange current_;
  std::int64_t next_start_ = kEndOfTime;
};

// A source of tile-window batches (TileStep), and the plan of the windows it follows.
template <class S>
concept TileWindowSource = Source<S> && std::same_as<BatchOf<S>, TileStep> && requires(const S& s) {
  { s.windows() } -> std::convertible_to<const WindowPlan&>;
};

// Windows cannot seek: the stage over them is not a SeekableSource.
template <AccessSource Up>
class TileWindows : public Stage<TileWindows<Up>, TileEvent> {
 public:
  TileWindows() = default;
  TileWindows(Up up, WindowPlan plan) : up_(std::move(up)), plan_(std::move(plan)) {
    const TimeRange& clip = up_.context().window;  // the selected window, whatever came between
    for (std::uint32_t s : plan_.storages) cursors_.emplace_back(this->schedule(), s, clip);
    if (!cursors_.empty()) cursor_of_.assign(this->schedule().storages.size(), -1);
    for (std::size_t i = 0; i < cursors_.size(); ++i) cursor_of_[cursors_[i].storage()] = int(i);
  }

  // The window events of the next timestep with one, or the accesses before it.
  TileStep next_batch(std::int64_t until = kEndOfTime) {
    std::int64_t t = kEndOfTime;
    for (const WindowCursor& c : cursors_) t = earlier(t, c.next_event());
    const AccessBatch b = up_.next_batch(earlier(t, until));
    if (!b.empty() || t >= until) return {{}, b};
    events_.clear();
    for (WindowCursor& c : cursors_)
      if (c.is_open() && c.current().to == t) {
        events_.push_back({WindowEvent::Kind::close, c.storage(), c.current().from, c.current().to});
        c.close();
      }
    for (WindowCursor& c : cursors_)
      if (!c.is_open() && c.next_event() == t) {
        c.open();
        events_.push_back({WindowEvent::Kind::open, c.storage(), c.current().from, c.current().to});
      }
    return {events_, {}};
  }
  std::int64_t next_timestep() const {
    std::int64_t t = up_.next_timestep();
    for (const WindowCursor& c : cursors_) t = earlier(t, c.next_event());
    return t;
  }

  // The tracked node holding a trace's accesses, or -1.
  int holder(std::uint32_t trace) const { return plan_.holder[trace]; }
  // The window of a tracked node open now (empty if none).
  TimeRange window(std::uint32_t storage) const {
    const int c = storage < cursor_of_.size() ? cursor_of_[storage] : -1;
    return c >= 0 && cursors_[std::size_t(c)].is_open() ? cursors_[std::size_t(c)].current() : TimeRange{};
  }
  const WindowPlan& windows() const { return plan_; }
  const StreamContext& context() const { return up_.context(); }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }

  std::span<const TileEvent> next_values() {
    values_.clear();
    const TileStep step = next_batch(kEndOfTime);
    for (const WindowEvent& e : step.events)
      values_.push_back({e.kind == WindowEvent::Kind::open ? TileEvent::Kind::open : TileEvent::Kind::close,
                         e.storage, e.start, e.end, {}});
    for (const AccessRecord& r : step.accesses) {
      const int h = holder(r.trace);
      const TimeRange w = h >= 0 ? window(std::uint32_t(h)) : TimeRange{};
      values_.push_back({TileEvent::Kind::access, h >= 0 ? std::uint32_t(h) : kNoStorage, w.from, w.to, r});
    }
    return values_;
  }

 private:
  Up up_;
  WindowPlan plan_;
  std::vector<WindowCursor> cursors_;
  std::vector<int> cursor_of_;  // per storage node: its cursor, or -1
  std::vector<WindowEvent> events_;
  std::vector<TileEvent> values_;
};

struct TileWindowsAdaptor : StageAdaptor {
  std::string level;
  bool by_nodes = false;             // follow `nodes`, whatever their level
  std::vector<std::uint32_t> nodes;
  std::vector<std::string> tensors;
  template <AccessSource Up>
  TileWindows<Up> operator()(Up up) const {
    const Schedule& s = up.schedule();
    WindowPlan plan = by_nodes ? WindowPlan::of(s, nodes, tensors) : WindowPlan::make(s, level, tensors);
    return TileWindows<Up>(std::move(up), std::move(plan));
  }
};

// `... | tile_windows("GlobalBuffer")`: the windows of one level's Storage nodes (every
// level's when `level` is empty) that hold one of `tensors` (all when empty).
inline TileWindowsAdaptor tile_windows(std::string level = {}, std::vector<std::string> tensors = {}) {
  TileWindowsAdaptor a;
  a.level = std::move(level);
  a.tensors = std::move(tensors);
  return a;
}
// `... | tile_windows(nodes, tensors)`: the windows of these Storage nodes; a trace's
// holder is the innermost of them above its leaf.
inline TileWindowsAdaptor tile_windows(std::vector<std::uint32_t> nodes, std::vector<std::string> tensors = {}) {
  TileWindowsAdaptor a;
  a.by_nodes = true;
  a.nodes = std::move(nodes);
  a.tensors = std::move(tensors);
  return a;
}

}  // namespace looptrace
