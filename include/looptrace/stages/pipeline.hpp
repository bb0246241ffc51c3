// How stages compose: the one protocol every stage speaks.
//
// A stage is a lazy source that owns no trace. It is pulled with a horizon:
//
//   next_batch(until)  the next batch of what it yields with timestep < until, in
//                      time order; an empty batch means there is nothing more before
//                      `until` (with until = kEndOfTime, the default: the stream is
//                      done). Every stage, of accesses or of events, takes the same
//                      horizon the same way;
//   next_timestep()    a lower bound on the timestep of what comes next (kEndOfTime:
//                      done);
//   context()          the stream's facts (StreamContext): the schedule, the selected
//                      window, where the traced run ends, the traces that can appear.
//                      They travel with the stream, so a stage placed anywhere sees
//                      what the stages before it chose.
//
// Accesses come in AccessBatches; the tile-window stages yield batches of their own
// (TileStep, TileTraffic, TransferRequest) through the same call. A batch views its
// stage's buffer: it is valid until the next pull. A timestep of one leaf is never split
// across batches, but one timestep of the merged stream may be (several leaves compute
// at once), and a timestep's window events come in a batch before its accesses.
//
// `source | adaptor` builds the next stage, so a pipeline reads like its description:
//
//   leaves(schedule) | project() | dedup() | merge_by_time() | select_time(sel)
//     | keep_if(pred) | tile_windows("GlobalBuffer") | window_traffic() | transfers(o)
//
// Stages before merge_by_time apply to each leaf of a LeafSet; the rest to one stream.
// A stage that only changes batches derives from BatchStage<Derived, Up> and writes
// one function, `Batch process(const Batch&)`: the base forwards the rest (time, the
// context, what the stream kinds expose) and pulls again when process() leaves nothing,
// so a filter cannot end the stream by returning an empty batch. A `void finish()` of
// Derived is called once, when its source is exhausted (not when the consumer stops
// early), so an aggregating stage needs no flush by its caller.
//
// Push-downs: a trace filter tells its source which traces are wanted
// (restrict_traces) and a time selection seeks its source (seek), so that what they
// drop is never computed. A push-down passes a stage only if the stage declares that
// it commutes with it, and no user stage does by default:
//
//   static constexpr bool passes_trace_masks = true;  // dropping traces upstream of me changes nothing I do
//   static constexpr bool passes_seeks = true;        // skipping time upstream of me changes nothing I do
//
// Elsewhere the later stage drops what it does not want as it passes, so a stage never
// sees the effect of a stage after it (a tap before a filter sees every access).
//
// A pipeline is a range (range-for, range-v3 and std::ranges views), but not a view:
// a named pipeline is referenced by a view, never copied (its state stays in it, and
// `p.stage<T>()` reads a stage's state back after composition); std::ranges moves a
// temporary one into the view, range-v3 refuses a temporary (name it first).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

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
  // Where the traced run itself ends: the schedule's end, or a prefix's (a prefix cuts
  // the trace; a window [from, to) or a shard looks at part of a run that goes on).
  std::int64_t trace_end = kEndOfTime;
  bool sampled = false;  // the window holds a sample of single timesteps, not all of them

  bool traced(std::size_t trace) const { return traces.empty() || traces[trace]; }
  // Whether the stream looks at part of a run that goes on past its window.
  bool cuts_run() const { return window.from > 0 || window.to < trace_end; }
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
// others (a filter pushes its mask upstream through the stages that pass it).
// Returns whether any of its traces is left.
template <class S>
concept RestrictableSource = Source<S> && requires(S& s, const std::vector<bool>& mask) {
  { s.restrict_traces(mask) } -> std::convertible_to<bool>;
};

// Whether a stage declares that a push-down passes it (see the top of this file).
template <class S>
concept PassesTraceMasks = requires { requires bool(S::passes_trace_masks); };
template <class S>
concept PassesSeeks = requires { requires bool(S::passes_seeks); };

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
// views all accept it. Not a view: a view copies what it is given, and a pipeline's
// state (a stage's counts, its buffers) must stay where its owner can read it, so a
// view refers to a named pipeline (or, in std::ranges, owns a moved temporary).
// Derived implements next_values(): the next values, empty at the end.
template <class Derived, class Value = AccessRecord>
class BatchRange {
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

// What a stage can do with a batch of a kind: view its values, and make a batch of the
// same kind from values it kept or changed. Accesses and spans of events here; the tile
// steps in tile_windows.hpp (their accesses are the values; their events pass as they are).
template <class Batch>
struct BatchTraits;

template <>
struct BatchTraits<AccessBatch> {
  using value_type = AccessRecord;
  static std::span<const AccessRecord> values(const AccessBatch& b) { return b.records; }
  // `same_elements`: every value kept as it was (a filter), so `deduplicated` still holds.
  static AccessBatch rebuilt(const AccessBatch& from, std::span<const AccessRecord> values, bool same_elements) {
    return {values, same_elements && from.deduplicated};
  }
};

template <class V>
struct BatchTraits<std::span<const V>> {
  using value_type = V;
  static std::span<const V> values(std::span<const V> b) { return b; }
  static std::span<const V> rebuilt(std::span<const V>, std::span<const V> values, bool) { return values; }
};

namespace detail {
// The values of a batch, whether a stage hands out AccessBatches or plain spans.
template <class Batch>
auto values_of(const Batch& b) {
  return BatchTraits<Batch>::values(b);
}
template <class>
inline constexpr bool always_false = false;
}  // namespace detail

// The value type of a source's batches (AccessRecord for accesses).
template <class S>
using ValueOf = typename BatchTraits<BatchOf<S>>::value_type;

template <class Derived, class Value>
class Stage;

// A stage of a pipeline by its type, or by its class template (`p.stage<Counter>()`
// for a `template <class Up> class Counter`), walking up from `s`; for the function
// stages (tap, keep_if, transform) also the function, by its type. A compile error
// when the pipeline has none.
template <class T, class S>
auto& stage_of(S& s) {
  if constexpr (std::is_same_v<std::remove_const_t<S>, T>) return s;
  else if constexpr (requires { { s.function() } -> std::same_as<T&>; }) return s.function();
  else if constexpr (requires { s.upstream(); }) return stage_of<T>(s.upstream());
  else static_assert(detail::always_false<S>, "no stage of this type in the pipeline");
}
namespace detail {
template <template <class...> class T, class S>
inline constexpr bool is_instance_of = false;
template <template <class...> class T, class... A>
inline constexpr bool is_instance_of<T, T<A...>> = true;
}  // namespace detail
template <template <class...> class T, class S>
auto& stage_of(S& s) {
  if constexpr (detail::is_instance_of<T, std::remove_const_t<S>>) return s;
  else if constexpr (requires { s.upstream(); }) return stage_of<T>(s.upstream());
  else static_assert(detail::always_false<S>, "no stage of this template in the pipeline");
}

// What every stage has: its schedule, the range of its values, and its stages by type.
template <class Derived, class Value = AccessRecord>
class Stage : public BatchRange<Derived, Value> {
 public:
  const Schedule& schedule() const { return *static_cast<const Derived&>(*this).context().schedule; }
  std::span<const Value> next_values() {
    return detail::values_of(static_cast<Derived&>(*this).next_batch(kEndOfTime));
  }
  template <class T>
  auto& stage() {
    return stage_of<T>(static_cast<Derived&>(*this));
  }
  template <template <class...> class T>
  auto& stage() {
    return stage_of<T>(static_cast<Derived&>(*this));
  }
};

// A stage over one source that hands on everything it does not change: time, the
// context, and what the kind of stream exposes (the tile windows' plan, the window
// traffic's slots, the transfers' addresses). Seeks and trace masks pass only where
// Derived declares so (passes_seeks, passes_trace_masks). Derived writes
// next_batch(until) (and whatever else it changes; a member of Derived hides the
// base's).
template <class Derived, Source Up, class Value = ValueOf<Up>>
class ForwardingStage : public Stage<Derived, Value> {
 public:
  ForwardingStage() = default;
  explicit ForwardingStage(Up up) : up_(std::move(up)) {}

  std::int64_t next_timestep() const { return up_.next_timestep(); }
  // Templates, so that the constraints are checked where the call is made, with
  // Derived complete (clang 14 checks a plain member's constraint at once, and keeps it).
  template <class D = Derived>
    requires SeekableSource<Up> && PassesSeeks<D>
  void seek(std::int64_t t) {
    up_.seek(t);
  }
  const StreamContext& context() const { return up_.context(); }
  template <class D = Derived>
    requires RestrictableSource<Up> && PassesTraceMasks<D>
  bool restrict_traces(const std::vector<bool>& mask) {
    return up_.restrict_traces(mask);
  }
  decltype(auto) windows() const
    requires requires(const Up& u) { u.windows(); }
  {
    return up_.windows();
  }
  decltype(auto) traffic() const
    requires requires(const Up& u) { u.traffic(); }
  {
    return up_.traffic();
  }
  decltype(auto) addresses() const
    requires requires(const Up& u) { u.addresses(); }
  {
    return up_.addresses();
  }
  const Up& upstream() const { return up_; }
  Up& upstream() { return up_; }

 protected:
  Up up_;
};

// A stage that only changes batches: Derived writes `Batch process(const Batch& batch)`
// (never called with an empty batch; it may return one that views its own buffer, in
// time order, possibly empty), and optionally `void finish()`, called once when the
// source is exhausted. The base pulls until process() leaves something or the source
// has nothing before `until`.
template <class Derived, Source Up>
class BatchStage : public ForwardingStage<Derived, Up> {
 public:
  using Batch = BatchOf<Up>;
  using ForwardingStage<Derived, Up>::ForwardingStage;

  Batch next_batch(std::int64_t until = kEndOfTime) {
    for (;;) {
      const Batch in = this->up_.next_batch(until);
      if (in.empty()) {
        if constexpr (requires(Derived& d) { d.finish(); })
          if (!finished_ && this->up_.next_timestep() >= kEndOfTime) {
            finished_ = true;
            static_cast<Derived&>(*this).finish();
          }
        return in;
      }
      const Batch out = static_cast<Derived&>(*this).process(in);
      if (!out.empty()) return out;
    }
  }

 private:
  bool finished_ = false;
};

// The adaptor of a stage made of a source and one function (keep_if, transform, tap):
// `source | adaptor` builds Stage<Up, Fn>(source, fn), over a source of any batches.
template <template <class, class> class StageOf, class Fn>
struct FunctionAdaptor : StageAdaptor {
  Fn fn;
  template <Source Up>
  StageOf<Up, Fn> operator()(Up up) const {
    return StageOf<Up, Fn>(std::move(up), fn);
  }
};

// A plain function made into a pipeable stage, with no adaptor struct of its own:
// `auto one_einsum = make_stage([](auto up) { return OneEinsum(std::move(up), 1); });`
// then `... | one_einsum | ...` (range-v3's make_view_closure).
template <class F>
struct StageClosure : StageAdaptor {
  F f;
  template <class Up>
    requires std::invocable<const F&, Up&&>
  auto operator()(Up&& up) const {
    return f(std::forward<Up>(up));
  }
};
template <class F>
StageClosure<F> make_stage(F f) {
  return {{}, std::move(f)};
}

}  // namespace looptrace
