// How stages compose: the one protocol every stage speaks.
//
// A stage is a lazy source that owns no trace. It is pulled with a horizon:
//
//   next_batch(until)  the next batch of what it yields with timestep < until, in
//                      time order; an empty batch means there is nothing more before
//                      `until` (with until = kEndOfTime: the stream is done);
//   next_timestep()    a lower bound on the timestep of what comes next (kEndOfTime:
//                      done);
//   context()          the stream's facts (StreamContext): the schedule, the selected
//                      window, the traces that can appear. They travel with the stream,
//                      so a stage placed anywhere sees what the stages before it chose.
//
// Accesses come in AccessBatches; the tile-window stages yield batches of their own
// (TileStep, TileTraffic, TransferRequest) through the same call. Sources of accesses
// before the time selection also seek(t) (the first access with timestep >= t).
//
// `source | adaptor` builds the next stage, so a pipeline reads like its description:
//
//   leaves(schedule) | project() | dedup() | merge_by_time() | select_time(sel)
//     | keep_if(pred) | tile_windows("GlobalBuffer") | window_traffic() | transfers(o)
//
// Stages before merge_by_time apply to each leaf of a LeafSet; the rest to one stream.
// A stage that only changes batches derives from BatchStage<Derived, Up> and writes
// one function, `AccessBatch process(const AccessBatch&)`: the base forwards the rest
// (time, seeking, context, trace masks) and pulls again when process() leaves nothing,
// so a filter cannot end the stream by returning an empty batch.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <range/v3/range_fwd.hpp>

#include "looptrace/record.hpp"

namespace looptrace {

struct Schedule;

// How many records a stage gathers before it hands a batch on.
inline constexpr std::size_t kDefaultBatchRecords = 4096;

// What a stream knows about itself, from its first stage to its last. A stage that
// changes one of them (select_time the window, filter_traces the traces) holds its
// own copy; every other stage hands on its source's.
struct StreamContext {
  const Schedule* schedule = nullptr;
  TimeRange window;          // the selected window: what tile windows are clipped to
  std::vector<bool> traces;  // per Schedule::traces: whether it can appear (empty: all)

  bool traced(std::size_t trace) const { return traces.empty() || traces[trace]; }
};

// A stage of any kind: pulled with a horizon, it knows its stream's context.
template <class S>
concept Source = requires(S& s, const S& cs, std::int64_t t) {
  { s.next_batch(t).empty() } -> std::convertible_to<bool>;
  { cs.next_timestep() } -> std::convertible_to<std::int64_t>;
  { cs.context() } -> std::convertible_to<const StreamContext&>;
};

// What a source's next_batch() returns.
template <class S>
using BatchOf = decltype(std::declval<S&>().next_batch(std::int64_t(0)));

// A source that can go to the first of its items with timestep >= t, in O(depth).
template <class S>
concept SeekableSource = Source<S> && requires(S& s, std::int64_t t) { s.seek(t); };

// A source of accesses in time order; a timestep of one leaf is never split across
// batches.
template <class S>
concept AccessSource = Source<S> && std::same_as<BatchOf<S>, AccessBatch>;

// A source that can be told which traces are wanted, so that it never computes the
// others (a filter pushes its mask upstream through every stage that forwards it).
// Returns whether any of its traces is left.
template <class S>
concept RestrictableSource = Source<S> && requires(S& s, const std::vector<bool>& mask) {
  { s.restrict_traces(mask) } -> std::convertible_to<bool>;
};

// The base of every stage adaptor: `source | adaptor` calls adaptor(source).
struct StageAdaptor {};

template <class Source, class Adaptor>
  requires std::derived_from<std::remove_cvref_t<Adaptor>, StageAdaptor> &&
           std::invocable<const Adaptor&, Source&&>
auto operator|(Source&& source, const Adaptor& adaptor) {
  return adaptor(std::forward<Source>(source));
}

// One source per leaf of the schedule (in tree order) before they are merged.
template <class S>
struct LeafSet {
  StreamContext context;
  std::vector<S> leaves;
};

// Applies a per-leaf adaptor to every leaf of a set.
template <class S, class Adaptor>
auto map_leaves(LeafSet<S>&& set, const Adaptor& adaptor) {
  LeafSet<std::remove_cvref_t<decltype(adaptor(std::move(set.leaves.front())))>> out;
  out.context = std::move(set.context);
  out.leaves.reserve(set.leaves.size());
  for (S& s : set.leaves) out.leaves.push_back(adaptor(std::move(s)));
  return out;
}

// Makes a stage an input range of its values: range-for, range-v3 and std::ranges
// views all accept it (as a view: stages are cheap to move and copyable). Derived
// implements next_values(): the next values, empty at the end.
template <class Derived, class Value = AccessRecord>
class BatchRange : public ::ranges::view_base, public std::ranges::view_base {
 public:
  class iterator {
   public:
    using value_type = Value;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;
    using iterator_category = std::input_iterator_tag;

    iterator() = default;
    explicit iterator(Derived* stage) : stage_(stage) { fetch(); }
    const Value& operator*() const { return batch_[pos_]; }
    const Value* operator->() const { return &batch_[pos_]; }
    iterator& operator++() {
      if (++pos_ == batch_.size()) fetch();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.stage_ == nullptr; }

   private:
    void fetch() {
      pos_ = 0;
      batch_ = stage_->next_values();
      if (batch_.empty()) stage_ = nullptr;
    }
    Derived* stage_ = nullptr;
    std::span<const Value> batch_;
    std::size_t pos_ = 0;
  };

  iterator begin() { return iterator(static_cast<Derived*>(this)); }
  std::default_sentinel_t end() { return {}; }
};

namespace detail {
// The values of a batch, whether a stage hands out AccessBatches or plain spans.
inline std::span<const AccessRecord> values_of(const AccessBatch& b) { return b.records; }
template <class V>
std::span<const V> values_of(std::span<const V> b) { return b; }
}  // namespace detail

// The value type of a source's batches (AccessRecord for accesses).
template <class S>
using ValueOf = typename decltype(detail::values_of(std::declval<BatchOf<S>>()))::value_type;

// What every stage has: its schedule, and the range of its values.
template <class Derived, class Value = AccessRecord>
class Stage : public BatchRange<Derived, Value> {
 public:
  const Schedule& schedule() const { return *static_cast<const Derived&>(*this).context().schedule; }
  std::span<const Value> next_values() {
    return detail::values_of(static_cast<Derived&>(*this).next_batch(kEndOfTime));
  }
};

// A stage over one source that hands on everything it does not change: time, seeking,
// the context and trace masks. Derived writes next_batch(until) (and whatever else it
// changes; a member of Derived hides the base's).
template <class Derived, Source Up, class Value = ValueOf<Up>>
class ForwardingStage : public Stage<Derived, Value> {
 public:
  ForwardingStage() = default;
  explicit ForwardingStage(Up up) : up_(std::move(up)) {}

  std::int64_t next_timestep() const { return up_.next_timestep(); }
  void seek(std::int64_t t)
    requires SeekableSource<Up>
  {
    up_.seek(t);
  }
  const StreamContext& context() const { return up_.context(); }
  bool restrict_traces(const std::vector<bool>& mask)
    requires RestrictableSource<Up>
  {
    return up_.restrict_traces(mask);
  }
  const Up& upstream() const { return up_; }

 protected:
  Up up_;
};

// A stage that only changes batches of accesses: Derived writes
// `AccessBatch process(const AccessBatch& batch)` (never called with an empty batch; it
// may return one that views its own buffer, in time order, possibly empty). The base
// pulls until process() leaves something or the source has nothing before `until`.
template <class Derived, AccessSource Up>
class BatchStage : public ForwardingStage<Derived, Up> {
 public:
  using ForwardingStage<Derived, Up>::ForwardingStage;

  AccessBatch next_batch(std::int64_t until) {
    for (;;) {
      const AccessBatch in = this->up_.next_batch(until);
      if (in.empty()) return in;
      const AccessBatch out = static_cast<Derived&>(*this).process(in);
      if (!out.empty()) return out;
    }
  }
};

// The adaptor of a stage made of a source and one function (keep_if, transform, tap):
// `source | adaptor` builds Stage<Up, Fn>(source, fn).
template <template <class, class> class StageOf, class Fn>
struct FunctionAdaptor : StageAdaptor {
  Fn fn;
  template <AccessSource Up>
  StageOf<Up, Fn> operator()(Up up) const {
    return StageOf<Up, Fn>(std::move(up), fn);
  }
};

}  // namespace looptrace
