#include "looptrace/stages/leaf_source.hpp"

#include <algorithm>

namespace looptrace {

namespace {

// Appends [lo, hi) to a sorted set, merging it with the last interval when they touch.
void append(IntervalSet& s, std::int64_t lo, std::int64_t hi) {
  if (lo >= hi) return;
  if (!s.empty() && s.back().hi >= lo) s.back().hi = std::max(s.back().hi, hi);
  else s.push_back({lo, hi});
}

// Tile j of a loop that splits [lo, hi) into [0, initial), [initial, initial + stride), ...
Interval subtile(const Interval& given, const LoopLevel& loop, std::int64_t j) {
  std::int64_t start = j == 0 ? 0 : loop.initial_tile_shape + (j - 1) * loop.tile_shape;
  std::int64_t end = j == 0 ? loop.initial_tile_shape : start + loop.tile_shape;
  return {given.lo + start, std::min(given.hi, given.lo + end)};
}

// Sorted points to a set of intervals.
void points_to_set(std::vector<std::int64_t>& points, IntervalSet& out) {
  std::sort(points.begin(), points.end());
  out.clear();
  for (std::int64_t p : points) append(out, p, p + 1);
}

}  // namespace

LeafSource::LeafSource(const Schedule& schedule, const LeafSchedule& leaf,
                       std::vector<bool> enabled, std::int64_t max_tile_points)
    : schedule_(&schedule),
      leaf_(&leaf),
      odometer_(leaf.odometer()),
      max_tile_points_(max_tile_points),
      chains_(leaf.variables.size()),
      deepest_level_(leaf.variables.size(), -1),
      var_sets_(leaf.variables.size()) {
  for (const auto& loop : leaf.loops) {
    if (loop.variable < 0) continue;
    chains_[loop.variable].push_back(&loop);
    if (!loop.spatial) deepest_level_[loop.variable] = loop.time_level;
  }
  for (std::size_t k = 0; k < leaf.tensors.size(); ++k) {
    const LeafTensor& lt = leaf.tensors[k];
    TensorState ts;
    ts.spec = &lt;
    ts.info = &schedule.tensors[lt.tensor];
    ts.enabled = k < enabled.size() ? bool(enabled[k]) : true;
    ts.element_coefficient.assign(leaf.variables.size(), 0);
    ts.element_constant = 0;
    for (std::size_t r = 0; r < lt.coefficients.size(); ++r) {
      std::vector<std::pair<int, std::int64_t>> terms;
      for (std::size_t v = 0; v < lt.coefficients[r].size(); ++v) {
        std::int64_t c = lt.coefficients[r][v];
        if (c == 0) continue;
        terms.emplace_back(int(v), c);
        ts.element_coefficient[v] += c * ts.info->strides[r];
      }
      ts.element_constant += lt.constants[r] * ts.info->strides[r];
      ts.rank_terms.push_back(std::move(terms));
    }
    ts.rank_sets.resize(lt.coefficients.size());
    for (std::size_t v = 0; v < leaf.variables.size(); ++v)
      if (ts.element_coefficient[v] != 0 ||
          std::any_of(lt.coefficients.begin(), lt.coefficients.end(),
                      [&](const auto& row) { return row[v] != 0; }))
        ts.used_variables.push_back(int(v));
    ts.rank_cardinality.assign(lt.coefficients.size(), 0);
    tensors_.push_back(std::move(ts));
  }
  for (std::size_t v = 0; v < chains_.size(); ++v)
    simple_var_.push_back(std::none_of(chains_[v].begin(), chains_[v].end(),
                                       [](const LoopLevel* l) { return l->spatial; }));
  plan_refreshes();
  for (const auto& loop : leaf.loops)
    if (!loop.spatial) innermost_ = &loop;
  closed_form_runs_ = plan_closed_form_runs();
  refresh(0);
}

void LeafSource::seek(std::int64_t t) {
  odometer_.seek(t);
  if (!done()) refresh(0);
}

void LeafSource::advance() {
  std::size_t changed = odometer_.advance();
  if (!done()) refresh(changed);
}

void LeafSource::plan_refreshes() {
  // For each odometer level, what must be redone when it is the outermost digit that
  // moved: the variables tiled by a temporal loop at or inside it, the tensor ranks that
  // read them, and the tensors whose size follows.
  const std::size_t levels = odometer_.levels();
  level_vars_.assign(levels + 1, {});
  level_ranks_.assign(levels + 1, {});
  level_tensors_.assign(levels + 1, {});
  for (std::size_t l = 0; l <= levels; ++l) {
    for (std::size_t v = 0; v < var_sets_.size(); ++v)
      if (l == 0 || deepest_level_[v] >= int(l)) level_vars_[l].push_back(int(v));
    for (std::size_t k = 0; k < tensors_.size(); ++k) {
      // Level 0 redoes everything, also ranks that read no variable (`K: 2`) and
      // tensors with no ranks (scalars), whose size is then 1.
      bool touched = l == 0;
      for (std::size_t r = 0; r < tensors_[k].rank_terms.size(); ++r) {
        bool moves = l == 0;
        for (const auto& [v, c] : tensors_[k].rank_terms[r])
          moves = moves || deepest_level_[v] >= int(l);
        if (moves) level_ranks_[l].push_back({int(k), int(r)});
        touched = touched || moves;
      }
      if (touched) level_tensors_[l].push_back(int(k));
    }
  }
}

void LeafSource::refresh(std::size_t changed_level) {
  const bool all = stale_ || changed_level == 0;
  for (int v : level_vars_[all ? 0 : changed_level]) tile_variable(std::size_t(v));
  empty_ = false;
  for (const auto& s : var_sets_) empty_ = empty_ || s.empty();
  if (empty_) {
    stale_ = true;  // projections skipped now must be redone at the next non-empty tile
    return;
  }
  stale_ = false;
  const std::size_t level = all ? 0 : changed_level;
  for (const auto& [k, r] : level_ranks_[level]) {
    TensorState& ts = tensors_[std::size_t(k)];
    if (!ts.enabled || !ts.spec->separable) continue;
    project(ts, std::size_t(r));
    ts.rank_cardinality[std::size_t(r)] = cardinality(ts.rank_sets[std::size_t(r)]);
  }
  for (int k : level_tensors_[level]) {
    TensorState& ts = tensors_[std::size_t(k)];
    if (!ts.enabled) continue;
    if (!ts.spec->separable) {
      ts.sorted_valid = false;
      continue;
    }
    std::int64_t size = 1;
    for (std::int64_t c : ts.rank_cardinality) size *= c;
    ts.size = size;
  }
}

void LeafSource::tile_variable(std::size_t v) {
  IntervalSet& s = var_sets_[v];
  if (simple_var_[v]) {  // temporal loops only: one interval, no allocation
    Interval iv{0, leaf_->extent[v]};
    for (const LoopLevel* loop : chains_[v]) {
      iv = subtile(iv, *loop, odometer_.digit(std::size_t(loop->time_level)));
      if (iv.lo >= iv.hi) break;
    }
    s.resize(iv.lo < iv.hi ? 1 : 0);
    if (!s.empty()) s[0] = iv;
    return;
  }
  // Spatial loops: every spatial iteration's tile, each cut by the loops inside it,
  // then merged (merging before the inner loops cut would lose the tiles' origins).
  s.clear();
  for (const Interval& iv : tiles_of(v, chains_[v].size())) append(s, iv.lo, iv.hi);
}

void LeafSource::project(TensorState& ts, std::size_t rank) {
  IntervalSet& out = ts.rank_sets[rank];
  const auto& terms = ts.rank_terms[rank];
  const std::int64_t c = ts.spec->constants[rank];
  out.clear();
  if (terms.empty()) {
    out.push_back({c, c + 1});
    return;
  }
  if (terms.size() == 1 && terms[0].second == 1) {
    for (const auto& iv : var_sets_[terms[0].first]) out.push_back({iv.lo + c, iv.hi + c});
    return;
  }
  // Sums of unit-coefficient intervals are intervals.
  bool interval_sum = std::all_of(terms.begin(), terms.end(), [&](const auto& t) {
    return (t.second == 1 || t.second == -1) && var_sets_[t.first].size() == 1;
  });
  if (interval_sum) {
    std::int64_t lo = c, hi = c;
    for (const auto& [v, k] : terms) {
      const Interval& iv = var_sets_[v].front();
      lo += k > 0 ? iv.lo : -(iv.hi - 1);
      hi += k > 0 ? iv.hi - 1 : -iv.lo;
    }
    out.push_back({lo, hi + 1});
    return;
  }
  // Otherwise enumerate the sums (bounded by the tile) and sort them.
  scratch_.assign(1, c);
  for (const auto& [v, k] : terms) {
    std::vector<std::int64_t> next;
    next.reserve(scratch_.size() * std::size_t(cardinality(var_sets_[v])));
    for (std::int64_t base : scratch_)
      for (const auto& iv : var_sets_[v])
        for (std::int64_t x = iv.lo; x < iv.hi; ++x) next.push_back(base + k * x);
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    scratch_.swap(next);
  }
  points_to_set(scratch_, out);
}

bool LeafSource::plan_closed_form_runs() const {
  if (!innermost_) return false;
  const int v = innermost_->variable;
  if (v < 0) return true;  // nothing moves during the run
  if (chains_[std::size_t(v)].back() != innermost_) return false;  // a spatial loop follows
  for (const auto& ts : tensors_) {
    if (!ts.enabled) continue;
    if (!ts.spec->separable) return false;
    for (const auto& terms : ts.rank_terms)
      for (const auto& [w, c] : terms)
        if (w == v && (terms.size() != 1 || (c != 1 && c != -1))) return false;
  }
  return true;
}

LeafSource::RunTally LeafSource::count_step(std::vector<std::int64_t>& counts) {
  RunTally tally;
  if (computes()) {
    tally = {1, timestep(), timestep(), points()};
    count(counts);
  }
  advance();
  return tally;
}

LeafSource::RunTally LeafSource::count_run(std::vector<std::int64_t>& counts, std::int64_t limit) {
  if (!closed_form_runs_) return count_step(counts);
  const TimeLevel& level = odometer_.level(odometer_.levels() - 1);
  const std::int64_t t = timestep();
  const std::int64_t run = std::min(odometer_.innermost_remaining(),
                                    (limit - t + level.period - 1) / level.period);
  if (run <= 1) return count_step(counts);
  RunTally tally;
  if (!empty_) {
    const int v = innermost_->variable;
    std::int64_t steps = run, covered = 0;  // covered: the run's points along v
    if (v >= 0) {
      // The tile v is cut from, then the run's tiles [j0, j0 + run) of it: they are
      // adjacent, so their union is one stretch per interval, and the non-empty ones
      // come first.
      const std::vector<Interval> given = tiles_of(std::size_t(v), chains_[std::size_t(v)].size() - 1);
      const LoopLevel& l = *innermost_;
      const std::int64_t j0 = odometer_.digit(std::size_t(l.time_level)), j1 = j0 + run - 1;
      auto start = [&](std::int64_t j) { return j == 0 ? 0 : l.initial_tile_shape + (j - 1) * l.tile_shape; };
      auto end = [&](std::int64_t j) { return j == 0 ? l.initial_tile_shape : l.initial_tile_shape + j * l.tile_shape; };
      steps = 0;
      for (const auto& iv : given) {
        const std::int64_t width = iv.hi - iv.lo;
        const std::int64_t last_open =  // the last tile that starts inside the interval
            width <= l.initial_tile_shape ? 0 : 1 + (width - l.initial_tile_shape - 1) / l.tile_shape;
        steps = std::max(steps, std::min(j1, last_open) - j0 + 1);
        covered += std::max<std::int64_t>(0, std::min(width, end(j1)) - start(j0));
      }
    }
    if (steps > 0) {
      std::int64_t others = 1;  // points of the other variables
      for (std::size_t w = 0; w < var_sets_.size(); ++w)
        if (int(w) != v) others *= cardinality(var_sets_[w]);
      tally = {steps, t, t + (steps - 1) * level.period, v >= 0 ? others * covered : others * steps};
      for (auto& ts : tensors_) {
        if (!ts.enabled) continue;
        std::int64_t fixed = 1, along = steps;  // fixed ranks' size, and v's rank summed over the run
        for (std::size_t r = 0; r < ts.rank_terms.size(); ++r) {
          bool reads_v = ts.rank_terms[r].size() == 1 && ts.rank_terms[r][0].first == v;
          if (reads_v) along = covered;
          else fixed *= ts.rank_cardinality[r];
        }
        counts[std::size_t(ts.spec->trace)] += fixed * along;
      }
    }
  }
  std::size_t changed = odometer_.advance_innermost(run);
  if (!done()) refresh(changed);
  return tally;
}

std::vector<Interval> LeafSource::spatial_tiles(std::size_t v) const {
  return tiles_of(v, chains_[v].size());
}

std::vector<Interval> LeafSource::tiles_of(std::size_t v, std::size_t loops) const {
  std::vector<Interval> tiles(1, {0, leaf_->extent[v]});
  for (std::size_t k = 0; k < loops; ++k) {
    const LoopLevel* loop = chains_[v][k];
    std::vector<Interval> next;
    const std::int64_t j0 = loop->spatial ? 0 : odometer_.digit(std::size_t(loop->time_level));
    const std::int64_t j1 = loop->spatial ? loop->count : j0 + 1;
    for (const auto& iv : tiles)
      for (std::int64_t j = j0; j < j1; ++j) {
        Interval sub = subtile(iv, *loop, j);
        if (sub.lo < sub.hi) next.push_back(sub);
      }
    tiles.swap(next);
  }
  return tiles;
}

std::int64_t LeafSource::points() const {
  if (empty_) return 0;
  std::int64_t n = 1;
  for (const auto& s : var_sets_) n *= cardinality(s);
  return n;
}

void LeafSource::gather_sorted(TensorState& ts) {
  if (ts.sorted_valid) return;
  std::int64_t n = 1;
  for (int v : ts.used_variables) n *= cardinality(var_sets_[v]);
  if (n > max_tile_points_)
    throw SpecError(leaf_->where,
                    "one timestep of Einsum '" + leaf_->einsum + "' projects " +
                        std::to_string(n) + " points into tensor '" + ts.info->name +
                        "', more than the limit of " + std::to_string(max_tile_points_) +
                        " (--max-tile-points)");
  auto& e = ts.sorted;
  e.assign(1, ts.element_constant);
  for (int v : ts.used_variables) {
    std::size_t before = e.size();
    std::int64_t k = ts.element_coefficient[v];
    for (std::size_t i = 0; i < before; ++i)
      for (const auto& iv : var_sets_[v])
        for (std::int64_t x = iv.lo; x < iv.hi; ++x) e.push_back(e[i] + k * x);
    e.erase(e.begin(), e.begin() + std::ptrdiff_t(before));
  }
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  ts.size = std::int64_t(e.size());
  ts.sorted_valid = true;
}

void LeafSource::count(std::vector<std::int64_t>& counts) {
  if (empty_) return;
  for (auto& ts : tensors_) {
    if (!ts.enabled) continue;
    if (!ts.spec->separable) gather_sorted(ts);
    counts[std::size_t(ts.spec->trace)] += ts.size;
  }
}

void LeafSource::emit(std::vector<AccessRecord>& out) {
  if (empty_) return;
  for (auto& ts : tensors_) {
    if (!ts.enabled) continue;
    if (!ts.spec->separable) {
      gather_sorted(ts);
    } else if (ts.size > max_tile_points_) {
      throw SpecError(leaf_->where, "one timestep of Einsum '" + leaf_->einsum + "' touches " +
                                        std::to_string(ts.size) + " elements of tensor '" +
                                        ts.info->name + "', more than the limit of " +
                                        std::to_string(max_tile_points_) + " (--max-tile-points)");
    }
    std::size_t at = out.size();
    out.resize(at + std::size_t(ts.size));
    AccessRecord* dst = out.data() + at;
    if (ts.spec->separable) {
      emit_separable(ts, dst);
    } else {
      const std::int64_t t = timestep();
      const auto trace = std::uint32_t(ts.spec->trace);
      for (std::int64_t e : ts.sorted) *dst++ = {t, e, trace};
    }
  }
}

void LeafSource::emit_separable(const TensorState& ts, AccessRecord* out) const {
  const std::int64_t t = timestep();
  const auto trace = std::uint32_t(ts.spec->trace);
  const auto& strides = ts.info->strides;
  const std::size_t ranks = ts.rank_sets.size();
  if (ranks == 0) {
    *out = {t, 0, trace};
    return;
  }
  // Row-major over the per-rank sets; the last rank (stride 1) is a contiguous run.
  auto walk = [&](auto&& self, std::size_t r, std::int64_t base) -> void {
    if (r + 1 == ranks) {
      for (const auto& iv : ts.rank_sets[r])
        for (std::int64_t x = iv.lo; x < iv.hi; ++x) *out++ = {t, base + x, trace};
      return;
    }
    for (const auto& iv : ts.rank_sets[r])
      for (std::int64_t x = iv.lo; x < iv.hi; ++x) self(self, r + 1, base + x * strides[r]);
  };
  walk(walk, 0, 0);
}

}  // namespace looptrace
