// Projection of a leaf's tiles into accesses. At each computing timestep,
// every point of the tile is projected into every tensor the Einsum accesses; the
// result is the multiset of (point, tensor) pairs, as records whose multiplicities sum
// to the number of points, tensor by tensor in the Einsum's access order.
//
// When each leaf variable feeds at most one rank of a tensor (a separable projection,
// decided once when compiling) the image is a product of per-rank sets: emitted in
// row-major order, ascending, each element once with its multiplicity in closed form.
// Otherwise the points are projected one by one, unsorted, one record per point: the
// dedup() stage merges them. Along a run of the innermost loop where the tile only
// translates, a timestep's records are copied forward with shifted elements instead of
// being projected again, so cost per timestep stays small.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/options.hpp"
#include "looptrace/stages/leaf_iterations.hpp"
#include "looptrace/stages/pipeline.hpp"

namespace looptrace {

// A stage's output buffer: growing it hands out records to be written next, left
// uninitialized (std::vector would zero them first, and touch every page of a fresh
// allocation: a pipeline made per layer paid that each time).
class RecordBuffer {
 public:
  RecordBuffer() = default;
  RecordBuffer(const RecordBuffer& other);
  RecordBuffer(RecordBuffer&& other) noexcept;
  RecordBuffer& operator=(RecordBuffer other) noexcept;
  ~RecordBuffer() { delete[] data_; }

  AccessRecord* grow(std::size_t n) {
    if (size_ + n > capacity_) reserve(size_ + n);
    AccessRecord* at = data_ + size_;
    size_ += n;
    return at;
  }
  void clear() { size_ = 0; }
  std::size_t size() const { return size_; }
  AccessRecord* data() { return data_; }
  const AccessRecord* data() const { return data_; }

 private:
  void reserve(std::size_t n);  // capacity >= n, keeping the records

  AccessRecord* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

class Project : public Stage<Project> {
 public:
  Project() = default;
  // `runs`: where every traced tensor of the leaf is separable and traced once, a record
  // stands for `multiplicity` consecutive elements from `element` (a run along the last
  // rank), each accessed once; elsewhere records are elements as usual (dedup(true)
  // then makes their multiplicities 1). What a consumer of the elements alone (the
  // caches' lines) takes, at a record per run instead of per element.
  explicit Project(LeafIterations tiles, std::int64_t max_tile_points = kDefaultMaxTilePoints,
                   std::size_t batch_records = kDefaultBatchRecords, bool runs = false);

  AccessBatch next_batch(std::int64_t until = kEndOfTime);
  std::int64_t next_timestep() const { return tiles_.next_timestep(); }
  void seek(std::int64_t t) { tiles_.seek(t); }
  const StreamContext& context() const { return tiles_.context(); }

  // Projects only into the traces whose mask entry is true (per Schedule::traces);
  // whether any is left.
  bool restrict_traces(const std::vector<bool>& enabled);

 private:
  struct TensorState {
    const LeafTensor* spec = nullptr;
    const TensorInfo* info = nullptr;
    bool enabled = true;
    std::vector<std::vector<std::pair<int, std::int64_t>>> rank_terms;  // [rank]: (variable, coefficient)
    std::vector<IntervalSet> rank_sets;            // separable: the image along each rank
    std::vector<std::vector<std::uint32_t>> rank_weights;  // rank of several variables: points per value
    std::vector<std::int64_t> rank_cardinality;
    std::vector<std::int64_t> element_coefficient;  // per variable: element is affine in the point
    std::int64_t element_constant = 0;
    std::vector<int> used_variables, unused_variables;
    bool weighted = false;                 // some rank reads several variables
    std::int64_t size = 0;                 // points per timestep (records, unless runs)
    std::int64_t records = 0;              // records per timestep
    std::uint32_t base_multiplicity = 1;   // points per record from the variables it ignores
    // emit_runs()' records are a function of rank_sets alone (and the timestep): the last
    // ones are kept, and given again where the sets did not change since (a weight tile
    // a register holds while tokens stream past it). `version` counts project_rank().
    std::uint64_t version = 0, memo_version = ~std::uint64_t(0);
    std::vector<AccessRecord> memo;
  };
  static constexpr std::int64_t kMemoRecords = 4096;  // (memory follows a tile's runs)

  void plan();
  void refresh();
  void project_rank(TensorState& ts, std::size_t rank);
  void project_one(const TensorState& ts, int v, std::int64_t k, std::int64_t c, IntervalSet& out) const;
  void project_sum(const TensorState& ts, const std::vector<std::pair<int, std::int64_t>>& terms, std::int64_t c,
                   IntervalSet& out, std::vector<std::uint32_t>& weights);
  static void convolve(const std::vector<std::uint64_t>& counts, std::int64_t from, std::vector<std::uint64_t>& next,
                       std::int64_t next_from, const Interval& iv, std::int64_t k);
  void emit(TensorState& ts);
  SpecError too_large(const TensorState& ts, std::int64_t points) const;
  void emit_separable(const TensorState& ts, AccessRecord* out) const;
  void emit_points(const TensorState& ts, AccessRecord* out) const;
  void emit_runs(const TensorState& ts, AccessRecord* out) const;
  void copy_forward(std::size_t block_start, std::int64_t period, std::int64_t steps);

  LeafIterations tiles_;
  std::int64_t max_tile_points_ = kDefaultMaxTilePoints;
  std::size_t batch_records_ = kDefaultBatchRecords;
  std::vector<TensorState> tensors_;
  std::vector<std::vector<std::pair<int, int>>> level_ranks_;  // per level: (tensor, rank) to re-project
  bool reproject_all_ = true;
  bool unique_ = true;  // every enabled tensor separable and traced once: no dedup needed
  bool runs_ = false;   // records as runs where unique_
  RecordBuffer buffer_;
  // The last block's runs of records of one tensor: (records, element shift per step).
  std::vector<std::pair<std::size_t, std::int64_t>> block_runs_;
  std::vector<std::uint64_t> scratch_;
};

struct ProjectAdaptor : StageAdaptor {
  std::int64_t max_tile_points = kDefaultMaxTilePoints;
  std::size_t batch_records = kDefaultBatchRecords;
  bool runs = false;

  Project operator()(LeafIterations tiles) const {
    return Project(std::move(tiles), max_tile_points, batch_records, runs);
  }
  LeafSet<Project> operator()(LeafSet<LeafIterations> set) const { return map_leaves(std::move(set), *this); }
};

// `leaves(schedule) | project()`: tiles to accesses, one stage per leaf.
inline ProjectAdaptor project(std::int64_t max_tile_points = kDefaultMaxTilePoints,
                              std::size_t batch_records = kDefaultBatchRecords, bool runs = false) {
  ProjectAdaptor a;
  a.max_tile_points = max_tile_points;
  a.batch_records = batch_records;
  a.runs = runs;
  return a;
}

}  // namespace looptrace
