// How stages compose. A stage is a lazy source of accesses that owns no trace: it
// yields AccessRecords in time order, in batches (the fast path) or one by one (an
// input range that range-v3 and std::ranges views accept). `source | adaptor` builds
// the next stage, so a pipeline reads like its description:
//
//   leaves(schedule) | project() | dedup() | merge_by_time() | select_time(sel)
//
// Stages before merge_by_time apply to each leaf of a LeafSet; the rest to one stream.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <span>
#include <utility>
#include <vector>

#include <boost/container/vector.hpp>
#include <range/v3/range/concepts.hpp>

#include "looptrace/access.hpp"
#include "looptrace/schedule.hpp"

namespace looptrace {

// The default bound on one timestep's records for one tensor (a batch holds a tile).
inline constexpr std::int64_t kDefaultMaxTilePoints = 4'000'000;
// How many records a stage gathers before it hands a batch on.
inline constexpr std::size_t kDefaultBatchRecords = 4096;

// A stage's output buffer: growing it leaves records uninitialized (they are written
// next), where std::vector would zero them first.
using RecordBuffer = boost::container::vector<AccessRecord>;
inline AccessRecord* grow(RecordBuffer& buffer, std::size_t n) {
  const std::size_t at = buffer.size();
  buffer.resize(at + n, boost::container::default_init);
  return buffer.data() + at;
}

// A source of accesses in time order, pulled with a horizon:
//  - next_batch(until): the next records with timestep < until, in order; an empty
//    batch means there are none before `until` (the source then stands at or past it);
//    a timestep of one leaf is never split across batches;
//  - next_timestep(): a lower bound on the next record's timestep (kEndOfTime: done);
//  - seek(t): go to the first access with timestep >= t, in O(depth), with no replay.
template <class S>
concept AccessSource = requires(S& s, const S& cs, std::int64_t t) {
  { s.next_batch(t) } -> std::same_as<AccessBatch>;
  { cs.next_timestep() } -> std::convertible_to<std::int64_t>;
  s.seek(t);
  { cs.schedule() } -> std::convertible_to<const Schedule&>;
};

// A stage that can be told which traces are wanted, so that it never computes the
// others (a filter pushes its mask upstream through every stage that forwards it).
template <class S>
concept RestrictableSource = AccessSource<S> && requires(S& s, const std::vector<bool>& mask) {
  s.restrict_traces(mask);
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
  const Schedule* schedule = nullptr;
  std::vector<S> leaves;
};

// Applies a per-leaf adaptor to every leaf of a set.
template <class S, class Adaptor>
auto map_leaves(LeafSet<S>&& set, const Adaptor& adaptor) {
  LeafSet<std::remove_cvref_t<decltype(adaptor(std::move(set.leaves.front())))>> out;
  out.schedule = set.schedule;
  out.leaves.reserve(set.leaves.size());
  for (S& s : set.leaves) out.leaves.push_back(adaptor(std::move(s)));
  return out;
}

// Makes a stage an input range of its records: range-for, range-v3 and std::ranges
// views all accept it (as a view: stages are cheap to move, copyable and default
// constructible, as range-v3 requires). Derived implements next_batch(kEndOfTime).
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

// The shared plumbing of a stage over an AccessSource: the range of its records.
template <class Derived>
class AccessStage : public BatchRange<AccessStage<Derived>> {
 public:
  std::span<const AccessRecord> next_values() {
    return static_cast<Derived*>(this)->next_batch(kEndOfTime).records;
  }
};

}  // namespace looptrace
