#include "looptrace/stages/leaf_iterations.hpp"

#include <algorithm>

#include "compile/tiling.hpp"

namespace looptrace {

LeafSet<LeafIterations> leaves(const Schedule& schedule) {
  LeafSet<LeafIterations> out;
  out.context = {&schedule, {0, schedule.n_timesteps}, {}, schedule.n_timesteps};
  for (std::size_t i = 0; i < schedule.leaves.size(); ++i) out.leaves.emplace_back(schedule, i);
  return out;
}

LeafIterations::LeafIterations(const Schedule& schedule, std::size_t leaf)
    : schedule_(&schedule), context_{&schedule, {0, schedule.n_timesteps}, {}, schedule.n_timesteps}, leaf_(leaf),
      odometer_(schedule.leaves[leaf].odometer()) {
  plan();
  seek(odometer_.first_time());
}

void LeafIterations::plan() {
  const LeafSchedule& l = leaf();
  const std::size_t n = l.variables.size();
  chains_.assign(n, {});
  deepest_level_.assign(n, -1);
  tile_.assign(n, {});
  parent_.assign(n, {0, 0});
  for (const auto& loop : l.loops) {
    if (!loop.spatial) innermost_ = &loop;
    if (loop.variable < 0) continue;
    chains_[std::size_t(loop.variable)].push_back(&loop);
    if (!loop.spatial) deepest_level_[std::size_t(loop.variable)] = loop.time_level;
  }
  simple_.assign(n, true);
  for (std::size_t v = 0; v < n; ++v)
    for (const LoopLevel* loop : chains_[v]) simple_[v] = simple_[v] && !loop->spatial;
  // When level l is the outermost digit that moved, the variables tiled at or inside it
  // are re-tiled (level 0: all).
  const std::size_t levels = odometer_.levels();
  level_vars_.assign(levels + 1, {});
  for (std::size_t lv = 0; lv <= levels; ++lv)
    for (std::size_t v = 0; v < n; ++v)
      if (lv == 0 || deepest_level_[v] >= int(lv)) level_vars_[lv].push_back(int(v));
  translatable_ = innermost_ != nullptr &&
                  (innermost_->variable < 0 || simple_[std::size_t(innermost_->variable)]);
}

void LeafIterations::seek(std::int64_t t) {
  if (!schedule_) return;
  odometer_.seek(t);
  changed_ = 0;
  if (!done()) retile(0);
}

void LeafIterations::advance() {
  const std::size_t changed = odometer_.advance();
  changed_ = std::min(changed_, changed);
  if (!done()) retile(changed);
}

void LeafIterations::advance_innermost(std::int64_t n) {
  const std::size_t changed = odometer_.advance_innermost(n);
  changed_ = std::min(changed_, changed);
  if (!done()) retile(changed);
}

void LeafIterations::retile(std::size_t changed_level) {
  for (int v : level_vars_[changed_level]) tile_variable(std::size_t(v));
  empty_ = false;
  for (const auto& s : tile_) empty_ = empty_ || s.empty();
}

void LeafIterations::tile_variable(std::size_t v) {
  IntervalSet& s = tile_[v];
  if (simple_[v]) {  // temporal loops only: one interval
    Interval iv{0, leaf().extent[v]};
    for (const LoopLevel* loop : chains_[v]) {
      if (loop == innermost_) parent_[v] = iv;
      iv = tiling::sub_tile(iv, *loop, odometer_.digit(std::size_t(loop->time_level)));
      if (iv.empty()) break;
    }
    s.clear();
    if (!iv.empty()) s.push_back(iv);
    return;
  }
  // Spatial loops: every spatial iteration's tile, each cut by the loops inside it,
  // then merged (merging before the inner loops cut would lose the tiles' origins).
  s.clear();
  for (const Interval& iv : tiles_of(v, chains_[v].size())) append_merged(s, iv);
}

std::vector<Interval> LeafIterations::tiles_of(std::size_t v, std::size_t loops) const {
  std::vector<Interval> tiles(1, {0, leaf().extent[v]});
  for (std::size_t k = 0; k < loops; ++k) {
    const LoopLevel* loop = chains_[v][k];
    std::vector<Interval> next;
    const std::int64_t j0 = loop->spatial ? 0 : odometer_.digit(std::size_t(loop->time_level));
    const std::int64_t j1 = loop->spatial ? loop->count : j0 + 1;
    for (const auto& iv : tiles)
      for (std::int64_t j = j0; j < j1; ++j) {
        Interval sub = tiling::sub_tile(iv, *loop, j);
        if (!sub.empty()) next.push_back(sub);
      }
    tiles.swap(next);
  }
  return tiles;
}

std::vector<Interval> LeafIterations::spatial_tiles(std::size_t v) const {
  return tiles_of(v, chains_[v].size());
}

std::int64_t LeafIterations::points() const {
  if (empty_) return 0;
  std::int64_t n = 1;
  for (const auto& s : tile_) n *= cardinality(s);
  return n;
}

LeafIterations::Translation LeafIterations::translation() const {
  if (!translatable_ || empty_ || done()) return {};
  const TimeLevel& level = odometer_.level(std::size_t(innermost_->time_level));
  const std::int64_t j = odometer_.digit(std::size_t(innermost_->time_level));
  const std::int64_t remaining = level.count - 1 - j;  // steps left before the carry
  const int v = innermost_->variable;
  if (v < 0) return {remaining, -1, 0, level.period};
  // Tile j translates to tile j + 1 when both are whole strides.
  const LoopLevel& loop = *innermost_;
  if (!tiling::whole_stride(loop, j, tile_[std::size_t(v)].front().size())) return {};
  const std::int64_t whole = tiling::whole_strides_from(parent_[std::size_t(v)].size(), loop, j) - 1;
  return {std::max<std::int64_t>(0, std::min(remaining, whole)), v, loop.tile_shape, level.period};
}

std::span<const Iteration> LeafIterations::next_batch(std::int64_t until) {
  n_iterations_ = 0;
  while (!done() && timestep() < until && n_iterations_ < 1024) {
    if (computes()) append_iterations();
    advance();
  }
  return {iterations_.data(), n_iterations_};
}

// The spatial iterations are the product of each variable's sub-tiles, the first
// variable outermost.
void LeafIterations::append_iterations() {
  const std::size_t n_vars = tile_.size();
  std::vector<std::vector<Interval>> tiles(n_vars);
  for (std::size_t v = 0; v < n_vars; ++v) {
    tiles[v] = spatial_tiles(v);
    if (tiles[v].empty()) return;
  }
  std::vector<std::size_t> digit(n_vars, 0);
  for (;;) {
    if (iterations_.size() == n_iterations_) iterations_.emplace_back();
    Iteration& it = iterations_[n_iterations_++];
    it.timestep = timestep();
    it.leaf = &leaf();
    it.tile.resize(n_vars);
    for (std::size_t v = 0; v < n_vars; ++v) it.tile[v] = tiles[v][digit[v]];
    std::size_t v = n_vars;  // odometer step, last variable fastest
    while (v > 0 && ++digit[v - 1] == tiles[v - 1].size()) digit[--v] = 0;
    if (v == 0) return;
  }
}

}  // namespace looptrace
