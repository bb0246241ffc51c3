// A k-way merge of per-leaf sources into global time order. Fused and
// pipelined leaves interleave; at one timestep leaves come in tree order. Each pull
// asks the first leaf for everything before the next leaf's turn, so an unfused
// schedule hands over whole batches of one leaf (without a copy) and pays no
// comparison per timestep. Works for any per-leaf source pulled with a horizon:
// accesses (Project, Dedup) and iterations (LeafIterations) alike.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

template <SeekableSource Src>
class MergeByTime : public Stage<MergeByTime<Src>, ValueOf<Src>> {
  using Batch = BatchOf<Src>;
  using Value = ValueOf<Src>;

 public:
  MergeByTime() = default;
  explicit MergeByTime(LeafSet<Src> set, std::size_t batch_records = kDefaultBatchRecords)
      : context_(std::move(set.context)), leaves_(std::move(set.leaves)), batch_records_(batch_records) {}

  Batch next_batch(std::int64_t until = kEndOfTime) {
    buffer_.clear();
    bool deduplicated = true;
    for (;;) {
      // The first leaf in (timestep, tree order); it may go on up to the next leaf's turn.
      std::size_t best = leaves_.size();
      std::int64_t best_t = until;
      for (std::size_t i = 0; i < leaves_.size(); ++i) {
        const std::int64_t t = leaves_[i].next_timestep();
        if (t < best_t) best = i, best_t = t;
      }
      if (best == leaves_.size()) break;
      std::int64_t limit = until;
      for (std::size_t i = 0; i < leaves_.size(); ++i) {
        if (i == best) continue;
        const std::int64_t t = leaves_[i].next_timestep();
        if (t != kEndOfTime) limit = earlier(limit, i < best ? t : t + 1);
      }
      Batch b = leaves_[best].next_batch(limit);
      const auto values = detail::values_of(b);
      if (values.empty()) continue;
      if (buffer_.empty() && values.size() * 2 >= batch_records_) return b;  // hand over, no copy
      buffer_.insert(buffer_.end(), values.begin(), values.end());
      if constexpr (std::is_same_v<Batch, AccessBatch>) deduplicated = deduplicated && b.deduplicated;
      if (buffer_.size() >= batch_records_) break;
    }
    if constexpr (std::is_same_v<Batch, AccessBatch>) return AccessBatch{buffer_, deduplicated};
    else return Batch(buffer_);
  }
  std::int64_t next_timestep() const {
    std::int64_t t = kEndOfTime;
    for (const Src& l : leaves_) t = earlier(t, l.next_timestep());
    return t;
  }
  void seek(std::int64_t t) {
    for (Src& l : leaves_) l.seek(t);
  }
  const StreamContext& context() const { return context_; }

  // Forwards the mask to every leaf and drops the leaves left with nothing to trace.
  bool restrict_traces(const std::vector<bool>& mask)
    requires RestrictableSource<Src>
  {
    std::erase_if(leaves_, [&](Src& l) { return !l.restrict_traces(mask); });
    return !leaves_.empty();
  }
  const std::vector<Src>& leaves() const { return leaves_; }

 private:
  StreamContext context_;
  std::vector<Src> leaves_;
  std::size_t batch_records_ = kDefaultBatchRecords;
  std::vector<Value> buffer_;
};

struct MergeByTimeAdaptor : StageAdaptor {
  std::size_t batch_records = kDefaultBatchRecords;
  template <SeekableSource Src>
  MergeByTime<Src> operator()(LeafSet<Src> set) const {
    return MergeByTime<Src>(std::move(set), batch_records);
  }
};

// `leaves(schedule) | ... | merge_by_time()`: one stream in time order.
inline MergeByTimeAdaptor merge_by_time(std::size_t batch_records = kDefaultBatchRecords) {
  MergeByTimeAdaptor a;
  a.batch_records = batch_records;
  return a;
}

}  // namespace looptrace
