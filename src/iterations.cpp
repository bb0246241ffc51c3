#include "looptrace/iterations.hpp"

#include "looptrace/stream.hpp"

namespace looptrace {

namespace {

// Leaf sources that project into no tensor: iterations need only the tiles.
std::vector<LeafSource> tile_only_sources(const Schedule& schedule, const TraceOptions& options) {
  TraceFilter filter = TraceFilter::from_options(schedule, options);
  filter.trace_enabled.assign(filter.trace_enabled.size(), false);
  return make_leaf_sources(schedule, filter, options.max_tile_points);
}

}  // namespace

IterationStream::IterationStream(const Schedule& schedule, const TraceOptions& options)
    : merge_(tile_only_sources(schedule, options),
             TimeSelection::from_options(options, schedule.n_timesteps)) {}

const Iteration* IterationStream::next() {
  while (pos_ == size_) {
    size_ = pos_ = 0;
    const bool more = merge_.pump([&](LeafSource& leaf) {
      if (leaf.computes()) fill(leaf);
      return size_ == 0;  // hand over as soon as one timestep gave iterations
    });
    if (!more) return nullptr;
  }
  return &buffer_[pos_++];
}

// The spatial iterations are the product of each variable's sub-tiles, the first
// variable outermost.
void IterationStream::fill(const LeafSource& leaf) {
  const std::size_t n_vars = leaf.leaf().variables.size();
  std::vector<std::vector<Interval>> tiles(n_vars);
  for (std::size_t v = 0; v < n_vars; ++v) {
    tiles[v] = leaf.spatial_tiles(v);
    if (tiles[v].empty()) return;
  }
  std::vector<std::size_t> digit(n_vars, 0);
  for (;;) {
    if (buffer_.size() == size_) buffer_.emplace_back();
    Iteration& it = buffer_[size_++];
    it.timestep = leaf.timestep();
    it.leaf = &leaf.leaf();
    it.tile.resize(n_vars);
    for (std::size_t v = 0; v < n_vars; ++v) it.tile[v] = tiles[v][digit[v]];
    std::size_t v = n_vars;  // odometer step, last variable fastest
    while (v > 0 && ++digit[v - 1] == tiles[v - 1].size()) digit[--v] = 0;
    if (v == 0) return;
  }
}

}  // namespace looptrace
