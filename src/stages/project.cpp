#include "looptrace/stages/project.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "looptrace/support/error.hpp"

namespace looptrace {

RecordBuffer::RecordBuffer(const RecordBuffer& other) {
  reserve(other.size_);
  std::copy(other.data_, other.data_ + other.size_, data_);
  size_ = other.size_;
}
RecordBuffer::RecordBuffer(RecordBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}
RecordBuffer& RecordBuffer::operator=(RecordBuffer other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
  return *this;
}
void RecordBuffer::reserve(std::size_t n) {
  if (n <= capacity_) return;
  const std::size_t capacity = std::max(n, capacity_ * 8 / 5);  // grows as boost::container::vector does
  AccessRecord* data = new AccessRecord[capacity];  // trivial: left uninitialized
  std::copy(data_, data_ + size_, data);
  delete[] data_;
  data_ = data, capacity_ = capacity;
}

namespace {

constexpr std::uint64_t kMaxMultiplicity = std::numeric_limits<std::uint32_t>::max();

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMaxMultiplicity / b ? kMaxMultiplicity : std::min(a * b, kMaxMultiplicity);
}

}  // namespace

Project::Project(LeafIterations tiles, std::int64_t max_tile_points, std::size_t batch_records, bool runs)
    : tiles_(std::move(tiles)), max_tile_points_(max_tile_points), batch_records_(batch_records), runs_(runs) {
  plan();
}

void Project::plan() {
  const Schedule& s = tiles_.schedule();
  const LeafSchedule& leaf = tiles_.leaf();
  const std::size_t n_vars = leaf.variables.size();
  for (const LeafTensor& lt : leaf.tensors) {
    TensorState ts;
    ts.spec = &lt;
    ts.info = &s.tensors[std::size_t(lt.tensor)];
    ts.element_coefficient.assign(n_vars, 0);
    for (std::size_t r = 0; r < lt.coefficients.size(); ++r) {
      std::vector<std::pair<int, std::int64_t>> terms;
      for (std::size_t v = 0; v < n_vars; ++v) {
        const std::int64_t c = lt.coefficients[r][v];
        if (c == 0) continue;
        terms.emplace_back(int(v), c);
        ts.element_coefficient[v] += c * ts.info->strides[r];
      }
      ts.element_constant += lt.constants[r] * ts.info->strides[r];
      ts.weighted = ts.weighted || terms.size() > 1;
      ts.rank_terms.push_back(std::move(terms));
    }
    for (std::size_t v = 0; v < n_vars; ++v) {
      const bool used = std::any_of(lt.coefficients.begin(), lt.coefficients.end(),
                                    [&](const auto& row) { return row[v] != 0; });
      (used ? ts.used_variables : ts.unused_variables).push_back(int(v));
    }
    const std::size_t ranks = lt.coefficients.size();
    ts.rank_sets.resize(ranks);
    ts.rank_weights.resize(ranks);
    ts.rank_cardinality.assign(ranks, 0);
    tensors_.push_back(std::move(ts));
  }
  // When level l is the outermost digit that moved, the ranks reading a variable tiled
  // at or inside it are projected again (level 0: every rank, constant ones too).
  const std::size_t levels = tiles_.levels();
  level_ranks_.assign(levels + 1, {});
  for (std::size_t l = 0; l <= levels; ++l)
    for (std::size_t k = 0; k < tensors_.size(); ++k)
      for (std::size_t r = 0; r < tensors_[k].rank_terms.size(); ++r) {
        bool moves = l == 0;
        for (const auto& [v, c] : tensors_[k].rank_terms[r])
          moves = moves || tiles_.deepest_level(std::size_t(v)) >= int(l);
        if (moves) level_ranks_[l].push_back({int(k), int(r)});
      }
  restrict_traces(std::vector<bool>(s.traces.size(), true));
}

bool Project::restrict_traces(const std::vector<bool>& enabled) {
  unique_ = true;
  std::vector<int> seen;
  for (auto& ts : tensors_) {
    ts.enabled = ts.enabled && enabled[std::size_t(ts.spec->trace)];
    if (!ts.enabled) continue;
    // A tensor accessed twice by one Einsum shares its trace: dedup merges the two.
    const bool repeated = std::find(seen.begin(), seen.end(), ts.spec->trace) != seen.end();
    seen.push_back(ts.spec->trace);
    unique_ = unique_ && ts.spec->separable && !repeated;
  }
  reproject_all_ = true;  // newly enabled tensors have no image yet
  return std::any_of(tensors_.begin(), tensors_.end(), [](const TensorState& ts) { return ts.enabled; });
}

void Project::refresh() {
  const std::size_t level = reproject_all_ ? 0 : tiles_.changed_level();
  reproject_all_ = false;
  if (level < level_ranks_.size())
    for (const auto& [k, r] : level_ranks_[level]) {
      TensorState& ts = tensors_[std::size_t(k)];
      if (ts.enabled && ts.spec->separable) project_rank(ts, std::size_t(r));
    }
  tiles_.acknowledge_changes();
  const auto& tile = tiles_.tile();
  for (auto& ts : tensors_) {
    if (!ts.enabled) continue;
    std::uint64_t base = 1;
    for (int v : ts.unused_variables) base = saturating_mul(base, std::uint64_t(cardinality(tile[std::size_t(v)])));
    ts.base_multiplicity = std::uint32_t(base);
    std::int64_t size = 1;
    if (ts.spec->separable) {
      for (std::int64_t c : ts.rank_cardinality) size *= c;
    } else {
      for (int v : ts.used_variables) {
        const std::int64_t n = cardinality(tile[std::size_t(v)]);
        if (size > max_tile_points_ / n) {
          size = max_tile_points_ + 1;
          break;
        }
        size *= n;
      }
    }
    ts.size = size;
    ts.records = size;
    if (runs_ && unique_ && !ts.rank_sets.empty()) {  // a run per interval of the last rank (per 2^32 - 1)
      std::int64_t runs = 0;
      const auto most = std::int64_t(kMaxMultiplicity);
      for (const auto& iv : ts.rank_sets.back()) runs += (iv.size() + most - 1) / most;
      for (std::size_t r = 0; r + 1 < ts.rank_sets.size(); ++r) runs *= ts.rank_cardinality[r];
      ts.records = size == 0 ? 0 : runs;
    }
  }
}

void Project::project_rank(TensorState& ts, std::size_t rank) {
  ++ts.version;
  IntervalSet& out = ts.rank_sets[rank];
  std::vector<std::uint32_t>& weights = ts.rank_weights[rank];
  const auto& terms = ts.rank_terms[rank];
  const std::int64_t c = ts.spec->constants[rank];
  out.clear();
  weights.clear();
  if (terms.empty()) out.push_back({c, c + 1});
  else if (terms.size() == 1) project_one(ts, terms[0].first, terms[0].second, c, out);
  else project_sum(ts, terms, c, out, weights);
  ts.rank_cardinality[rank] = cardinality(out);
}

// One variable: a bijection onto its image.
void Project::project_one(const TensorState& ts, int v, std::int64_t k, std::int64_t c, IntervalSet& out) const {
  const IntervalSet& set = tiles_.tile()[std::size_t(v)];
  if (k == 1) {
    for (const auto& iv : set) out.push_back(iv.shifted(c));
  } else if (k == -1) {
    for (auto iv = set.rbegin(); iv != set.rend(); ++iv) out.push_back({c - iv->to + 1, c - iv->from + 1});
  } else {  // spread out: one value per point, in ascending order
    const std::int64_t n = cardinality(set);
    if (n > max_tile_points_) throw too_large(ts, n);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t idx = k > 0 ? i : n - 1 - i, x = 0;  // the idx-th point of the set
      for (const auto& iv : set) {
        if (idx < iv.size()) {
          x = iv.from + idx;
          break;
        }
        idx -= iv.size();
      }
      out.push_back({c + k * x, c + k * x + 1});
    }
  }
}

// Several variables: the image is the support of a convolution of the variables'
// tiles, and the convolution itself counts the points behind each value.
void Project::project_sum(const TensorState& ts, const std::vector<std::pair<int, std::int64_t>>& terms,
                          std::int64_t c, IntervalSet& out, std::vector<std::uint32_t>& weights) {
  const auto& tile = tiles_.tile();
  std::int64_t lo = c, hi = c;  // the image lies in [lo, hi]
  for (const auto& [v, k] : terms) {
    const IntervalSet& set = tile[std::size_t(v)];
    const std::int64_t a = k * set.front().from, b = k * (set.back().to - 1);
    lo += std::min(a, b), hi += std::max(a, b);
  }
  if (hi - lo + 1 > max_tile_points_) throw too_large(ts, hi - lo + 1);
  // counts[i] holds the points reaching value from + i.
  std::vector<std::uint64_t>& counts = scratch_;
  counts.assign(1, 1);
  std::int64_t from = c;
  std::vector<std::uint64_t> next;
  for (const auto& [v, k] : terms) {
    const IntervalSet& set = tile[std::size_t(v)];
    const std::int64_t a = k * set.front().from, b = k * (set.back().to - 1);
    const std::int64_t next_from = from + std::min(a, b);
    next.assign(counts.size() + std::size_t(std::max(a, b) - std::min(a, b)), 0);
    for (const auto& iv : set) convolve(counts, from, next, next_from, iv, k);
    counts.swap(next);
    from = next_from;
  }
  // Counts were clamped only where they exceed 2^32 - 1, so no window sum wrapped.
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    const std::int64_t value = from + std::int64_t(i);
    append_merged(out, Interval::point(value));
    weights.push_back(std::uint32_t(std::min(counts[i], kMaxMultiplicity)));
  }
}

// Adds to `next` (values from next_from) the counts (values from `from`) shifted by
// k * x for every x of `iv`.
void Project::convolve(const std::vector<std::uint64_t>& counts, std::int64_t from, std::vector<std::uint64_t>& next,
                       std::int64_t next_from, const Interval& iv, std::int64_t k) {
  if (k == 1 || k == -1) {  // a sliding window over the interval
    const std::int64_t width = iv.to - iv.from;
    const std::int64_t start = from + (k == 1 ? iv.from : -(iv.to - 1)) - next_from;
    std::uint64_t window = 0;
    const std::int64_t n = std::int64_t(counts.size());
    for (std::int64_t i = 0; i < n + width - 1; ++i) {
      if (i < n) window += counts[std::size_t(i)];
      if (i - width >= 0) window -= counts[std::size_t(i - width)];
      std::uint64_t& cell = next[std::size_t(start + i)];
      cell = std::min(cell + window, kMaxMultiplicity);
    }
    return;
  }
  for (std::int64_t x = iv.from; x < iv.to; ++x)
    for (std::size_t i = 0; i < counts.size(); ++i) {
      std::uint64_t& cell = next[std::size_t(from + std::int64_t(i) + k * x - next_from)];
      cell = std::min(cell + counts[i], kMaxMultiplicity);
    }
}

SpecError Project::too_large(const TensorState& ts, std::int64_t points) const {
  // Non-separable sizes stop counting at the limit: say "more than" then.
  const bool capped = !ts.spec->separable && points > max_tile_points_;
  return SpecError(tiles_.leaf().where,
                   "one timestep of Einsum '" + tiles_.leaf().einsum + "' projects " +
                       (capped ? "more than " + std::to_string(max_tile_points_)
                               : std::to_string(points)) +
                       " points into tensor '" + ts.info->name + "', more than the limit of " +
                       std::to_string(max_tile_points_) + " (--max-tile-points)");
}

void Project::emit(TensorState& ts) {
  if (ts.size > max_tile_points_) throw too_large(ts, ts.size);
  AccessRecord* out = buffer_.grow(std::size_t(ts.records));
  if (runs_ && unique_) {
    if (ts.memo_version == ts.version && ts.memo.size() == std::size_t(ts.records)) {
      const std::int64_t t = tiles_.timestep();
      for (std::size_t i = 0; i < ts.memo.size(); ++i) out[i] = ts.memo[i], out[i].timestep = t;
      return;
    }
    emit_runs(ts, out);
    if (ts.records <= kMemoRecords) ts.memo.assign(out, out + ts.records), ts.memo_version = ts.version;
    else ts.memo_version = ~std::uint64_t(0), ts.memo.clear();
  } else if (ts.spec->separable) emit_separable(ts, out);
  else emit_points(ts, out);
}

void Project::emit_separable(const TensorState& ts, AccessRecord* out) const {
  const std::int64_t t = tiles_.timestep();
  const auto trace = std::uint32_t(ts.spec->trace);
  const std::uint32_t base = ts.base_multiplicity;
  const auto& strides = ts.info->strides;
  const std::size_t ranks = ts.rank_sets.size();
  if (ranks == 0) {
    *out = {t, 0, trace, base};
    return;
  }
  if (!ts.weighted) {
    // Row-major over the per-rank sets; the last rank (stride 1) is a contiguous run.
    auto walk = [&](auto&& self, std::size_t r, std::int64_t element) -> void {
      if (r + 1 == ranks) {
        for (const auto& iv : ts.rank_sets[r])
          for (std::int64_t x = iv.from; x < iv.to; ++x) *out++ = {t, element + x, trace, base};
        return;
      }
      for (const auto& iv : ts.rank_sets[r])
        for (std::int64_t x = iv.from; x < iv.to; ++x) self(self, r + 1, element + x * strides[r]);
    };
    walk(walk, 0, 0);
    return;
  }
  // The same walk, multiplying in the points behind each value of a weighted rank
  // (factors are at most 2^32 - 1, so one product fits in 64 bits before clamping).
  auto walk = [&](auto&& self, std::size_t r, std::int64_t element, std::uint64_t mult) -> void {
    const auto& weights = ts.rank_weights[r];
    std::size_t i = 0;
    if (r + 1 == ranks) {
      const auto m32 = std::uint32_t(mult);
      for (const auto& iv : ts.rank_sets[r]) {
        if (weights.empty()) {
          for (std::int64_t x = iv.from; x < iv.to; ++x) *out++ = {t, element + x, trace, m32};
        } else {
          for (std::int64_t x = iv.from; x < iv.to; ++x, ++i)
            *out++ = {t, element + x, trace, std::uint32_t(std::min(mult * weights[i], kMaxMultiplicity))};
        }
      }
      return;
    }
    for (const auto& iv : ts.rank_sets[r])
      for (std::int64_t x = iv.from; x < iv.to; ++x, ++i)
        self(self, r + 1, element + x * strides[r],
             weights.empty() ? mult : std::min(mult * weights[i], kMaxMultiplicity));
  };
  walk(walk, 0, 0, base);
}

// Row-major over the per-rank sets, one record per interval of the last rank (stride
// 1): its first element, and its length as the multiplicity.
void Project::emit_runs(const TensorState& ts, AccessRecord* out) const {
  const std::int64_t t = tiles_.timestep();
  const auto trace = std::uint32_t(ts.spec->trace);
  const auto& strides = ts.info->strides;
  const std::size_t ranks = ts.rank_sets.size();
  if (ranks == 0) {
    *out = {t, 0, trace, 1};
    return;
  }
  auto walk = [&](auto&& self, std::size_t r, std::int64_t element) -> void {
    if (r + 1 == ranks) {
      for (const auto& iv : ts.rank_sets[r])
        for (std::int64_t x = iv.from; x < iv.to; x += std::int64_t(kMaxMultiplicity))
          *out++ = {t, element + x, trace, std::uint32_t(std::min(iv.to - x, std::int64_t(kMaxMultiplicity)))};
      return;
    }
    for (const auto& iv : ts.rank_sets[r])
      for (std::int64_t x = iv.from; x < iv.to; ++x) self(self, r + 1, element + x * strides[r]);
  };
  walk(walk, 0, 0);
}

void Project::emit_points(const TensorState& ts, AccessRecord* out) const {
  const std::int64_t t = tiles_.timestep();
  const auto trace = std::uint32_t(ts.spec->trace);
  const std::uint32_t base = ts.base_multiplicity;
  const auto& tile = tiles_.tile();
  const auto& used = ts.used_variables;
  // Every point of the used variables, first variable outermost: one record each.
  auto walk = [&](auto&& self, std::size_t u, std::int64_t element) -> void {
    if (u == used.size()) {
      *out++ = {t, element, trace, base};
      return;
    }
    const std::size_t v = std::size_t(used[u]);
    const std::int64_t k = ts.element_coefficient[v];
    for (const auto& iv : tile[v])
      for (std::int64_t x = iv.from; x < iv.to; ++x) self(self, u + 1, element + k * x);
  };
  walk(walk, 0, ts.element_constant);
}

void Project::copy_forward(std::size_t block_start, std::int64_t period, std::int64_t steps) {
  const std::size_t block = buffer_.size() - block_start;
  buffer_.grow(block * std::size_t(steps));
  AccessRecord* base = buffer_.data() + block_start;
  // Record by record down the steps: each copy is the previous one shifted, so the
  // inner loop is two additions and a store.
  std::size_t k = 0;
  for (const auto& [n, delta] : block_runs_)
    for (std::size_t end = k + n; k < end; ++k) {
      AccessRecord r = base[k];
      AccessRecord* dst = base + k;
      for (std::int64_t i = 0; i < steps; ++i) {
        r.timestep += period, r.element += delta;
        dst += block;
        *dst = r;
      }
    }
}

AccessBatch Project::next_batch(std::int64_t until) {
  buffer_.clear();
  while (!tiles_.done() && tiles_.timestep() < until && buffer_.size() < batch_records_) {
    if (!tiles_.computes()) {
      tiles_.advance();
      continue;
    }
    refresh();
    const std::size_t block_start = buffer_.size();
    block_runs_.clear();
    const LeafIterations::Translation tr = tiles_.translation();
    for (auto& ts : tensors_) {
      if (!ts.enabled) continue;
      emit(ts);
      const std::int64_t delta = tr.variable < 0 ? 0 : ts.element_coefficient[std::size_t(tr.variable)] * tr.shift;
      block_runs_.emplace_back(std::size_t(ts.records), delta);
    }
    // Copy the block forward along the run where the tile only translates, as far as
    // `until` and the batch's room allow.
    std::int64_t steps = std::min(tr.steps, (until - 1 - tiles_.timestep()) / std::max<std::int64_t>(tr.period, 1));
    const std::size_t block = buffer_.size() - block_start;
    if (block > 0) {
      const std::size_t room = batch_records_ > buffer_.size() ? batch_records_ - buffer_.size() : 0;
      steps = std::min(steps, std::int64_t(room / block));
    }
    if (steps > 0) {
      if (block > 0) copy_forward(block_start, tr.period, steps);
      tiles_.advance_innermost(steps + 1);
    } else {
      tiles_.advance();
    }
  }
  return {{buffer_.data(), buffer_.size()}, unique_};
}

}  // namespace looptrace
