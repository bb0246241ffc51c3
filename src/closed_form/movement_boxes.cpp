#include "movement_boxes.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "looptrace/support/error.hpp"
#include "compile/tiling.hpp"
#include "looptrace/compile/window_walk.hpp"

namespace looptrace::movement_boxes {

namespace {

using Wide = __int128;
constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();


// Which iterations of each temporal loop of a leaf a box of its iterations takes: the
// digits [from, to) ([0, count): the loop is free).
using DigitBox = boost::container::small_vector<Interval, 8>;  // per leaf time level

Interval all_digits(const TimeLevel& l) { return {0, l.count}; }

// The digit vector (each digit a point) just before `d`, which is not the first.
template <class Levels>
void step_back(DigitBox& d, const Levels& levels) {
  std::size_t l = d.size();
  while (l > 0 && d[l - 1].from == 0) --l;
  d[l - 1] = Interval::point(d[l - 1].from - 1);
  for (std::size_t m = l; m < d.size(); ++m) d[m] = Interval::point(levels[m].count - 1);
}

// A leaf's points over a box of its iterations: per rank variable, a union of pieces,
// each rows of points (one range, or the same range repeated at a stride: the tiles a
// loop whose iterations are all in the box cut, then tiled again by one whose are
// not). For a whole window (outer digits fixed, inner ones free), along the innermost
// outer loop the next `run` windows (this one included) give the same points but for
// `moving`, whose pieces advance by `step` per window (-1: none moves).
using Pieces = boost::container::small_vector<Rows, 3>;  // none: no points
struct LeafPoints {
  boost::container::small_vector<Pieces, 8> sets;
  bool empty = false;
  std::int64_t run = kForever;
  int moving = -1;
  std::int64_t step = 0;
};

// One leaf's accesses of the slot's tensor.
struct Part {
  std::size_t leaf;  // into the node's leaves
  const LeafTensor* tensor;
  bool write;
  std::int64_t from, to;  // its timesteps in one iteration of the slot's shared loops, from the window's start
};

// A (node, tensor): its parts in time order, cut into phases (parts that run at once,
// all reading or all writing; consecutive phases alternate).
struct Slot {
  std::vector<Part> parts;
  std::vector<std::size_t> phase_end;  // per phase: one past its last part
  std::vector<bool> phase_writes;
  // Temporal loops inside the node that every part runs under (their time levels
  // follow the node's): the phases repeat per iteration of them. When some are and
  // the parts both read and write, fills are counted iteration by iteration.
  std::size_t shared = 0;
  // A reader and a writer of the tensor run at the same time (branches of a !Pipeline
  // or !Parallel): the phases do not order them, so fills follow the timesteps
  // (FirstReads).
  bool concurrent = false;
  bool interleaved() const { return shared > 0 && phase_end.size() > 1; }
};

std::int64_t checked_add(std::int64_t a, Wide b) {
  const Wide s = Wide(a) + b;
  if (s > std::numeric_limits<std::int64_t>::max())
    throw SpecError("data movement counts exceed 2^63 - 1: select fewer timesteps (--from/--to) or tensors");
  return std::int64_t(s);
}
std::int64_t narrowed(Wide v) { return checked_add(0, v); }

// The sub-tiles `d` of the range [a, a + width) that loop `l` cuts, each a piece of its
// own rows: the first (when its size is not the stride), the whole strides, the last
// when partial. At most three pieces, appended to `out`.
void cut_cells(std::int64_t a, std::int64_t width, const LoopLevel& l, const Interval& d, Pieces& out) {
  const Wide init = l.initial_tile_shape, stride = l.tile_shape;
  std::int64_t j0 = d.from;
  const Wide tiles = tiling::tile_count<Wide>(width, l);  // those not empty
  const std::int64_t j1 = tiles < Wide(d.to) ? std::int64_t(tiles) : d.to;
  if (j0 >= j1) return;
  if (j0 == 0 && init != stride) {
    out.push_back({a, a + std::int64_t(std::min<Wide>(init, width))});
    j0 = 1;
  }
  // Sub-tile j ends at init + j * stride (j = 0 too, when init is the stride).
  const std::int64_t full = width >= init ? std::int64_t((width - init) / stride + 1) : 0;  // j below: whole
  const std::int64_t jf = std::min(j1, std::max(j0, full));
  if (j0 < jf) {
    const std::int64_t at = a + std::int64_t(tiling::sub_start<Wide>(l, j0));
    out.push_back({at, at + std::int64_t(stride), std::int64_t(stride), jf - j0});
  }
  if (jf < j1) {  // the partial last one
    const Interval last = tiling::sub_tile<Wide>({a, a + width}, l, jf);
    if (!last.empty()) out.push_back(last);
  }
}

// The points of `leaf`'s variables over the iterations `digits` gives (spatial loops
// always take all theirs). A loop cuts each row of a variable's pieces alike and keeps
// the union of the sub-tiles it takes; when they are several and a loop over the same
// variable inside it takes only some of its own, they become pieces of their own (a
// lattice per piece: the tiles of each instance, a strided set), else the loops inside
// cover them and change nothing. When `inner_level` >= 0, that loop's run is worked
// out (digits there are one).
void leaf_points(const LeafSchedule& leaf, const DigitBox& digits, int inner_level, LeafPoints& w) {
  const std::size_t n = leaf.variables.size();
  w.sets.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    w.sets[v].clear();
    if (leaf.extent[v] > 0) w.sets[v].push_back(Interval{0, leaf.extent[v]});
  }
  auto digits_of = [&](const LoopLevel& l) {
    return l.spatial ? Interval{0, l.count} : digits[std::size_t(l.time_level)];
  };
  // Per loop, whether a loop over its variable inside it takes only some digits.
  boost::container::small_vector<bool, 16> partial_inside(leaf.loops.size(), false);
  {
    boost::container::small_vector<bool, 8> partial(n, false);
    for (std::size_t i = leaf.loops.size(); i-- > 0;) {
      const LoopLevel& l = leaf.loops[i];
      if (l.variable < 0) continue;
      partial_inside[i] = partial[std::size_t(l.variable)];
      if (digits_of(l) != Interval{0, l.count}) partial[std::size_t(l.variable)] = true;
    }
  }
  boost::container::small_vector<bool, 8> widened(n, false);
  w.run = kForever, w.moving = -1, w.step = 0;
  Pieces cut;
  for (std::size_t i = 0; i < leaf.loops.size(); ++i) {
    const LoopLevel& l = leaf.loops[i];
    if (l.variable < 0) continue;  // drives nothing here: windows along it are alike
    const auto v = std::size_t(l.variable);
    Pieces& set = w.sets[v];
    const Interval d = digits_of(l);
    if (set.empty()) continue;
    const bool all = d == Interval{0, l.count};
    if (widened[v]) {
      if (all) continue;  // covered: the union stays
      throw NotClosed{"rank variable '" + leaf.variables[v] +
                      "' is tiled inside a loop whose iterations are all in one window (a strided tile)"};
    }
    cut.clear();
    bool several = false;  // some row keeps more than one sub-tile
    for (const Rows& x : set) {
      const std::int64_t width = x.width();
      const Interval row{0, width};
      if (d.size() == 1) {  // one sub-tile of each row
        const Interval r = tiling::sub_tiles<Wide>(row, l, d);
        if (l.time_level == inner_level) {
          const std::int64_t j = d.from;
          if (r.empty()) {
            w.run = std::min(w.run, l.count - j);  // every later tile is empty too
          } else if (tiling::whole_stride(l, j, r.size())) {
            w.run = std::min(w.run, std::int64_t(tiling::whole_strides_from<Wide>(width, l, j)));  // translates
            w.moving = int(v), w.step = l.tile_shape;
          } else {
            w.run = 1;
          }
        }
        if (!r.empty()) cut.push_back({x.from + r.from, x.from + r.to, x.stride, x.count});
        continue;
      }
      const std::int64_t tiles = all ? std::int64_t(tiling::tiles_within<Wide>(width, l)) : d.size();
      if (!partial_inside[i] || tiles <= 1) {  // the union of the sub-tiles is what counts
        const Interval r = tiling::sub_tiles<Wide>(row, l, d);
        if (!r.empty()) cut.push_back({x.from + r.from, x.from + r.to, x.stride, x.count});
        several = several || tiles > 1;
        continue;
      }
      if (x.count == 1) {  // the sub-tiles are what a loop inside cuts again
        cut_cells(x.from, width, l, d, cut);
        continue;
      }
      Pieces cells;
      cut_cells(0, width, l, d, cells);
      if (cells.size() > 1 || (cells.size() == 1 && cells[0].count > 1))
        throw NotClosed{"rank variable '" + leaf.variables[v] + "' is cut into strided tiles twice (a lattice of lattices)"};
      for (const Rows& c : cells) cut.push_back({x.from + c.from, x.from + c.to, x.stride, x.count});
    }
    if (cut.size() > 3)
      throw NotClosed{"rank variable '" + leaf.variables[v] + "' takes more than 3 pieces of strided tiles"};
    set = cut;
    widened[v] = several;
  }
  w.empty = std::any_of(w.sets.begin(), w.sets.end(), [](const Pieces& s) { return s.empty(); });
}

// The points as one range per variable; throws NotClosed where they are not.
void ranges_of(const LeafSchedule& leaf, const LeafPoints& w, LeafRanges& ranges) {
  ranges.resize(w.sets.size());
  for (std::size_t v = 0; v < w.sets.size(); ++v) {
    if (w.sets[v].size() > 1 || (w.sets[v].size() == 1 && !w.sets[v][0].range()))
      throw NotClosed{"rank variable '" + leaf.variables[v] +
                      "' is tiled inside a loop whose iterations are all in one window (a strided tile)"};
    ranges[v] = w.sets[v].empty() ? Interval{0, 0} : Interval{w.sets[v][0].from, w.sets[v][0].to};
  }
}

// Rows in normal form: a range where the rows touch or overlap, or are one.
Rows normal(Rows x) {
  if (x.count > 1 && x.width() >= x.stride) return {x.from, x.from + x.stride * (x.count - 1) + x.width()};
  if (x.count == 1) x.stride = 0;
  return x;
}

// c * x for a variable's rows x; false when it is a lattice of lattices.
bool scaled(const Rows& x, Wide c, Rows& out) {
  const Wide a = c > 0 ? c : -c;
  const Wide last = Wide(x.from) + Wide(x.stride) * (x.count - 1) + x.width() - 1;  // the last point
  if (x.count == 1) {
    const Wide lo = c > 0 ? c * x.from : c * last;
    out = a == 1 ? Rows{std::int64_t(lo), std::int64_t(lo) + x.width()}
                 : Rows{std::int64_t(lo), std::int64_t(lo) + 1, std::int64_t(a), x.width()};
  } else if (x.width() == 1) {
    const Wide lo = c > 0 ? c * x.from : c * last;
    out = {std::int64_t(lo), std::int64_t(lo) + 1, std::int64_t(a * x.stride), x.count};
  } else if (a == 1) {
    const Wide lo = c > 0 ? Wide(x.from) : -last;
    out = {std::int64_t(lo), std::int64_t(lo) + x.width(), x.stride, x.count};
  } else {
    return false;
  }
  out = normal(out);
  return true;
}

// a + b (every sum of a point of each); false when it is not rows. `b` is a range or
// has a stride no smaller than a's.
bool summed(const Rows& a, const Rows& b, Rows& out) {
  const std::int64_t from = a.from + b.from;
  if (b.range()) {
    out = {from, from + a.width() + b.width() - 1, a.stride, a.count};
  } else if (a.range()) {
    out = {from, from + a.width() + b.width() - 1, b.stride, b.count};
  } else if (a.stride == b.stride) {
    out = {from, from + a.width() + b.width() - 1, a.stride, a.count + b.count - 1};
  } else if (b.width() == 1 && Wide(b.stride) == Wide(a.stride) * a.count) {  // b's rows continue a's
    out = {from, from + a.width(), a.stride, std::int64_t(Wide(a.count) * b.count)};
  } else {
    return false;
  }
  out = normal(out);
  return true;
}

// The image of one choice of piece per variable (`choice`) in tensor access `t`, as a
// box of rows; false when a rank's image is not rows (strides that do not nest), or a
// variable of several points feeds two ranks.
bool image_of(const LeafTensor& t, const boost::container::small_vector<const Rows*, 8>& choice, Box& box) {
  const std::size_t ranks = t.constants.size();
  box.resize(ranks);
  boost::container::small_vector<bool, 8> used(choice.size(), false);
  boost::container::small_vector<Rows, 8> terms;
  for (std::size_t r = 0; r < ranks; ++r) {
    Wide at = t.constants[r];
    terms.clear();
    for (std::size_t v = 0; v < choice.size(); ++v) {
      const Wide c = t.coefficients[r][v];
      if (c == 0) continue;
      const Rows& x = *choice[v];
      if (x.size() == 1) {
        at += c * x.from;
        continue;
      }
      if (used[v]) return false;
      used[v] = true;
      if (!scaled(x, c, terms.emplace_back())) return false;
    }
    // Ranges first, then rows by their stride: each sum keeps the smaller stride.
    std::sort(terms.begin(), terms.end(), [](const Rows& a, const Rows& b) {
      return std::pair(!a.range(), a.stride) < std::pair(!b.range(), b.stride);
    });
    Rows sum{std::int64_t(at), std::int64_t(at) + 1};
    for (const Rows& x : terms)
      if (!summed(sum, x, sum)) return false;
    box[r] = sum;
  }
  return true;
}

// The images of a leaf's points in a tensor: one box per choice of piece per variable
// (appended to `out`); false when one is not a box of rows.
bool images_of(const LeafTensor& t, const LeafPoints& w, std::vector<Box>& out) {
  boost::container::small_vector<const Rows*, 8> choice(w.sets.size());
  boost::container::small_vector<std::size_t, 8> at(w.sets.size(), 0);
  for (;;) {
    for (std::size_t v = 0; v < choice.size(); ++v) choice[v] = &w.sets[v][at[v]];
    if (!image_of(t, choice, out.emplace_back())) return false;
    std::size_t v = at.size();
    while (v > 0 && ++at[v - 1] == w.sets[v - 1].size()) at[--v] = 0;
    if (v == 0) return true;
  }
}

// A box of plain ranges: a tensor's box with each lattice rank split in two
// coordinates (its row, the place in it), where counting and subtracting are as for
// boxes.
using Cells = boost::container::small_vector<Interval, 8>;

Wide box_size(const Cells& b) {
  Wide n = 1;
  for (const Interval& s : b) n *= s.size();
  return n;
}

bool contains(const Cells& outer, const Cells& inner) {
  for (std::size_t r = 0; r < outer.size(); ++r)
    if (!outer[r].contains(inner[r])) return false;
  return true;
}

// The volume of a union of non-empty boxes, slab by slab along one rank at a time.
Wide union_from(const std::vector<const Cells*>& boxes, std::size_t rank) {
  if (boxes.empty()) return 0;
  if (boxes.size() == 1) {
    Wide n = 1;
    for (std::size_t r = rank; r < boxes[0]->size(); ++r) n *= (*boxes[0])[r].size();
    return n;
  }
  if (rank == boxes[0]->size()) return 1;
  std::vector<std::int64_t> cuts;
  for (const Cells* b : boxes) cuts.push_back((*b)[rank].from), cuts.push_back((*b)[rank].to);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  Wide total = 0;
  std::vector<const Cells*> across;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    across.clear();
    for (const Cells* b : boxes)
      if ((*b)[rank].contains(Interval{cuts[i], cuts[i + 1]})) across.push_back(b);
    total += Wide(cuts[i + 1] - cuts[i]) * union_from(across, rank + 1);
  }
  return total;
}

// The number of elements in a union of non-empty boxes (those inside another dropped).
Wide cells_union_size(const std::vector<const Cells*>& boxes) {
  if (boxes.size() == 1) return box_size(*boxes[0]);
  std::vector<const Cells*> kept;
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    bool inside = false;
    for (std::size_t k = 0; k < boxes.size() && !inside; ++k)
      inside = k != i && contains(*boxes[k], *boxes[i]) && (!contains(*boxes[i], *boxes[k]) || k < i);
    if (!inside) kept.push_back(boxes[i]);
  }
  if (kept.size() > 64) throw NotClosed{"more than 64 distinct tiles of one tensor in one window"};
  return union_from(kept, 0);
}

// How a set of boxes splits: per tensor rank, the period of its rows (0: no lattice
// there, the rank stays one coordinate). A lattice of a smaller stride dividing it is
// as many lattices of the period as the stride goes into it.
using Periods = boost::container::small_vector<std::int64_t, 6>;
constexpr std::int64_t kMaxPeriodSplit = 16;  // lattices one lattice becomes, at most

Periods periods_of(const std::vector<const Box*>& boxes) {
  Periods p(boxes.empty() ? 0 : boxes.front()->size(), 0);
  for (const Box* b : boxes)
    for (std::size_t r = 0; r < p.size(); ++r) {
      const Rows& x = (*b)[r];
      if (x.range() || x.empty()) continue;
      const std::int64_t l = p[r] == 0 ? x.stride : std::lcm(p[r], x.stride);
      if (l / x.stride > kMaxPeriodSplit || (p[r] != 0 && l / p[r] > kMaxPeriodSplit))
        throw NotClosed{"rows of one tensor rank at strides " + std::to_string(p[r]) + " and " +
                        std::to_string(x.stride) + " in one window (no small common multiple)"};
      p[r] = l;
    }
  return p;
}

// The pieces of rows `x` with a rank split at period `p`: per piece, its rows' span
// and the span in a row.
using Split = boost::container::small_vector<std::pair<Interval, Interval>, 4>;
void split_rows(const Rows& x, std::int64_t p, Split& out) {
  out.clear();
  auto floor_div = [](std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); };
  if (x.range()) {  // a partial first row, the whole rows, a partial last row
    const std::int64_t q0 = floor_div(x.from, p), m0 = x.from - q0 * p;
    const std::int64_t q1 = floor_div(x.to - 1, p), m1 = x.to - 1 - q1 * p;
    if (q0 == q1) {
      out.push_back({{q0, q0 + 1}, {m0, m1 + 1}});
      return;
    }
    const std::int64_t whole_from = m0 == 0 ? q0 : q0 + 1, whole_to = m1 == p - 1 ? q1 + 1 : q1;
    if (m0 != 0) out.push_back({{q0, q0 + 1}, {m0, p}});
    if (whole_from < whole_to) out.push_back({{whole_from, whole_to}, {0, p}});
    if (m1 != p - 1) out.push_back({{q1, q1 + 1}, {0, m1 + 1}});
    return;
  }
  const std::int64_t k = p / x.stride;  // rows of x in one period
  for (std::int64_t i = 0; i < std::min(k, x.count); ++i) {  // the rows i, i + k, ...
    const std::int64_t from = x.from + i * x.stride, n = (x.count - i + k - 1) / k;
    const std::int64_t q0 = floor_div(from, p), m0 = from - q0 * p;
    if (m0 + x.width() <= p) {
      out.push_back({{q0, q0 + n}, {m0, m0 + x.width()}});
    } else {  // each row runs into the next period
      out.push_back({{q0, q0 + n}, {m0, p}});
      out.push_back({{q0 + 1, q0 + n + 1}, {0, m0 + x.width() - p}});
    }
  }
}

// The boxes of ranges a box becomes (appended to `out`).
void cells_of(const Box& b, const Periods& periods, std::vector<Cells>& out) {
  boost::container::small_vector<Split, 6> splits(b.size());
  for (std::size_t r = 0; r < b.size(); ++r) {
    if (periods[r] == 0) splits[r].push_back({b[r].span(), {0, 1}});
    else split_rows(b[r], periods[r], splits[r]);
  }
  boost::container::small_vector<std::size_t, 6> at(b.size(), 0);
  for (;;) {
    Cells& c = out.emplace_back();
    for (std::size_t r = 0; r < b.size(); ++r) {
      c.push_back(splits[r][at[r]].first);
      if (periods[r] != 0) c.push_back(splits[r][at[r]].second);
    }
    std::size_t r = at.size();
    while (r > 0 && ++at[r - 1] == splits[r - 1].size()) at[--r] = 0;
    if (r == 0) return;
  }
}

// The box of rows a box of ranges is.
Box box_of_cells(const Cells& c, const Periods& periods) {
  Box b(periods.size());
  std::size_t k = 0;
  for (std::size_t r = 0; r < periods.size(); ++r) {
    if (periods[r] == 0) {
      b[r] = c[k++];
      continue;
    }
    const Interval q = c[k++], m = c[k++];
    b[r] = normal({q.from * periods[r] + m.from, q.from * periods[r] + m.to, periods[r], q.size()});
  }
  return b;
}

// The number of elements in a union of non-empty boxes of rows.
Wide union_size(const std::vector<const Box*>& boxes) {
  const Periods periods = periods_of(boxes);
  if (boxes.size() == 1 && std::all_of(boxes[0]->begin(), boxes[0]->end(), [](const Rows& x) { return x.range(); })) {
    Wide n = 1;
    for (const Rows& x : *boxes[0]) n *= x.size();
    return n;
  }
  std::vector<Cells> cells;
  for (const Box* b : boxes) cells_of(*b, periods, cells);
  std::vector<const Cells*> u;
  for (const Cells& c : cells) u.push_back(&c);
  return cells_union_size(u);
}

// The parts of one slot, in phases. Readers and writers of the tensor that run at once
// share a phase and make the slot `concurrent` (which element comes first then depends
// on the timestep).
Slot slot_of(std::vector<Part> parts) {
  std::stable_sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.from < b.from; });
  Slot s;
  s.parts = std::move(parts);
  std::int64_t phase_to = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < s.parts.size(); ++i) {
    const Part& p = s.parts[i];
    if (!s.phase_end.empty() && p.from < phase_to) {  // runs with the phase
      if (p.write != s.phase_writes.back()) s.concurrent = true;
      phase_to = std::max(phase_to, p.to);
    } else if (!s.phase_end.empty() && p.write == s.phase_writes.back()) {
      phase_to = std::max(phase_to, p.to);  // the same direction as the phase before: one phase
    } else {
      s.phase_end.push_back(i);
      s.phase_writes.push_back(p.write);
      phase_to = p.to;
    }
    s.phase_end.back() = i + 1;
  }
  return s;
}

// The window's tally of one slot from its parts' boxes (per part, the boxes it touches).
WindowTally tally_of(const Slot& slot, const std::vector<std::vector<Box>>& boxes) {
  std::vector<const Box*> seen, writes;
  Wide fills = 0, before = 0;
  std::size_t p = 0;
  for (std::size_t phase = 0; phase < slot.phase_end.size(); ++phase) {
    for (; p < slot.phase_end[phase]; ++p)
      for (const Box& b : boxes[p]) {
        seen.push_back(&b);
        if (slot.parts[p].write) writes.push_back(&b);
      }
    const Wide upto = seen.empty() ? 0 : union_size(seen);
    if (!slot.phase_writes[phase]) fills += upto - before;  // new to the window, read first
    before = upto;
  }
  return {narrowed(before), narrowed(fills), writes.empty() ? 0 : narrowed(union_size(writes))};
}

// Digit boxes whose union is the lexicographic range [a, b] of digit vectors (a <= b),
// each with some leading digits fixed, one in a range and the rest free.
void split_range(const DigitBox& a, const DigitBox& b, const std::vector<TimeLevel>& levels,
                 std::vector<DigitBox>& out) {
  const std::size_t n = a.size();
  std::size_t k = 0;
  while (k < n && a[k] == b[k]) ++k;
  DigitBox box(n);
  // Levels before `fixed` as in `from`, the rest free.
  auto emit = [&](std::size_t fixed, const DigitBox& from) {
    for (std::size_t l = 0; l < n; ++l) box[l] = l < fixed ? from[l] : all_digits(levels[l]);
    out.push_back(box);
  };
  // The same with level `fixed` in `at` instead; nothing when `at` is empty.
  auto emit_at = [&](std::size_t fixed, const DigitBox& from, const Interval& at) {
    if (at.empty()) return;
    emit(fixed, from);
    out.back()[fixed] = at;
  };
  if (k == n) {
    emit(n, a);
    return;
  }
  // From a to the end of a's digit k: the levels after k at or above a's.
  std::size_t z = n;
  while (z > k + 1 && a[z - 1].from == 0) --z;
  emit(z, a);  // a's digits up to z, then anything (all zeros after: from a on)
  for (std::size_t m = z; m-- > k + 1;) emit_at(m, a, {a[m].from + 1, levels[m].count});
  emit_at(k, a, {a[k].from + 1, b[k].from});
  // From the start of b's digit k to b.
  z = n;
  while (z > k + 1 && b[z - 1].from == levels[z - 1].count - 1) --z;
  emit(z, b);
  for (std::size_t m = z; m-- > k + 1;) emit_at(m, b, {0, b[m].from});
}

// The boxes of a leaf's iterations at timesteps [clip.from, clip.to) (none if it has none).
std::vector<DigitBox> iterations_in(const LeafSchedule& leaf, const TimeRange& clip) {
  std::vector<DigitBox> out;
  TimeOdometer o = leaf.odometer();
  o.seek(clip.from);
  if (o.done() || o.time() >= clip.to) return out;
  const std::size_t n = leaf.time_levels.size();
  DigitBox first(n), last(n);
  for (std::size_t l = 0; l < n; ++l) first[l] = Interval::point(o.digit(l));
  o.seek(clip.to);
  if (o.done()) {
    for (std::size_t l = 0; l < n; ++l) last[l] = Interval::point(leaf.time_levels[l].count - 1);
  } else {  // the iteration just before the first at or after clip.to (one lies before it)
    for (std::size_t l = 0; l < n; ++l) last[l] = Interval::point(o.digit(l));
    step_back(last, leaf.time_levels);
  }
  split_range(first, last, leaf.time_levels, out);
  return out;
}

// The leaves below a node that access `tensors` (of `einsums`), and each tensor's slot.
struct NodeParts {
  std::vector<const LeafSchedule*> leaves;
  std::vector<Slot> slots;  // per tensor asked for
};

NodeParts parts_below(const Schedule& sched, std::uint32_t storage, const std::vector<std::uint32_t>& tensors,
                      const std::vector<std::string>& einsums) {
  const StorageWindows& node = sched.storages[storage];
  const std::size_t outer = node.time_levels.size();
  NodeParts out;
  std::vector<std::vector<Part>> parts(tensors.size());
  const std::int64_t node_first = node.starts().first_time();
  for (const LeafSchedule& leaf : sched.leaves) {
    if (std::find(leaf.storages.begin(), leaf.storages.end(), int(storage)) == leaf.storages.end()) continue;
    if (!einsums.empty() && std::find(einsums.begin(), einsums.end(), leaf.einsum) == einsums.end()) continue;
    bool used = false;
    for (const LeafTensor& lt : leaf.tensors)
      for (std::size_t k = 0; k < tensors.size(); ++k)
        if (std::uint32_t(lt.tensor) == tensors[k]) {
          parts[k].push_back({out.leaves.size(), &lt, sched.traces[std::size_t(lt.trace)].is_output, 0, 0});
          used = true;
        }
    if (used) out.leaves.push_back(&leaf);
  }
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    // The loops inside the node over every part, then each part's span in one
    // iteration of them (its order among the others').
    std::size_t shared = std::numeric_limits<std::size_t>::max();
    const auto& first = parts[k].empty() ? std::vector<std::uint32_t>{} : out.leaves[parts[k][0].leaf]->loop_ids;
    for (const Part& p : parts[k]) {
      const auto& ids = out.leaves[p.leaf]->loop_ids;
      std::size_t n = 0;
      while (outer + n < ids.size() && outer + n < first.size() && ids[outer + n] == first[outer + n]) ++n;
      shared = std::min(shared, n);
    }
    if (parts[k].empty()) shared = 0;
    for (Part& p : parts[k]) {
      const LeafSchedule& leaf = *out.leaves[p.leaf];
      std::int64_t length = 1;
      for (std::size_t l = outer + shared; l < leaf.time_levels.size(); ++l)
        length += (leaf.time_levels[l].count - 1) * leaf.time_levels[l].period;
      p.from = leaf.odometer().first_time() - node_first;
      p.to = p.from + length;
    }
    out.slots.push_back(slot_of(std::move(parts[k])));
    out.slots.back().shared = shared;
  }
  return out;
}

// The boxes of a part's points (appended to `b`).
void box_of(const Schedule& sched, const NodeParts& node, const Part& part, const LeafPoints& w, std::vector<Box>& b) {
  if (!images_of(*part.tensor, w, b))
    throw NotClosed{"the tile of tensor '" + sched.tensors[std::size_t(part.tensor->tensor)].name + "' in Einsum '" +
                    node.leaves[part.leaf]->einsum + "' is not a box or box lattice (a variable feeding two ranks, "
                    "or strides that do not nest)"};
}

// The fills of an interleaved slot over one whole window (outer digits from
// `starts`): iteration q of the shared loops adds the elements its reading phases
// touch that neither an earlier iteration nor an earlier phase of q touched. What
// earlier iterations touched is the union of boxes over a prefix of q's digits.
Wide interleaved_fills(const Schedule& sched, const NodeParts& node, const Slot& slot, std::size_t outer,
                       const TimeOdometer& starts, std::int64_t& budget) {
  const LeafSchedule& some = *node.leaves[slot.parts.front().leaf];
  const std::vector<TimeLevel> shared(some.time_levels.begin() + std::ptrdiff_t(outer),
                                      some.time_levels.begin() + std::ptrdiff_t(outer + slot.shared));
  DigitBox q(shared.size(), Interval::point(0)), zero = q;
  std::vector<DigitBox> earlier;
  std::vector<Box> boxes;
  boxes.reserve(slot.parts.size() * (2 * shared.size() + 2));
  Wide fills = 0;
  // The box of part p's iterations with the shared digits in `d`, the outer ones fixed, the rest free.
  auto add = [&](const Part& p, const DigitBox& d) {
    const LeafSchedule& leaf = *node.leaves[p.leaf];
    DigitBox digits(leaf.time_levels.size());
    for (std::size_t l = 0; l < digits.size(); ++l)
      digits[l] = l < outer                    ? Interval::point(starts.digit(l))
                  : l < outer + shared.size() ? d[l - outer]
                                               : all_digits(leaf.time_levels[l]);
    LeafPoints w;
    leaf_points(leaf, digits, -1, w);
    if (!w.empty) box_of(sched, node, p, w, boxes);
  };
  for (;;) {
    if (--budget < 0) throw NotClosed{"the loops shared by a writer and a reader run more than 2^20 iterations"};
    boxes.clear();
    earlier.clear();
    if (q != zero) {  // every iteration before q
      DigitBox last = q;
      step_back(last, shared);
      split_range(zero, last, shared, earlier);
    }
    for (const Part& p : slot.parts)
      for (const DigitBox& d : earlier) add(p, d);
    const std::size_t seen = boxes.size();
    auto size_of = [&](std::size_t n) -> Wide {
      std::vector<const Box*> u;
      for (std::size_t i = 0; i < n; ++i) u.push_back(&boxes[i]);
      return u.empty() ? 0 : union_size(u);
    };
    Wide before = size_of(seen);
    std::size_t p = 0;
    for (std::size_t phase = 0; phase < slot.phase_end.size(); ++phase) {
      for (; p < slot.phase_end[phase]; ++p) add(slot.parts[p], q);
      const Wide upto = size_of(boxes.size());
      if (!slot.phase_writes[phase]) fills += upto - before;
      before = upto;
    }
    std::size_t l = q.size();  // the next iteration
    while (l > 0 && q[l - 1].from + 1 >= shared[l - 1].count) q[l - 1] = Interval::point(0), --l;
    if (l == 0) return fills;
    q[l - 1] = q[l - 1].shifted(1);
  }
}


// The iterations of each leaf in a whole window (outer digits from `starts`, inner
// ones free), with runs along the node's innermost level `inner`.
void whole_window(const NodeParts& node, std::size_t outer, int inner, const TimeOdometer& starts,
                  std::vector<LeafPoints>& at) {
  DigitBox digits;
  at.resize(node.leaves.size());
  for (std::size_t i = 0; i < node.leaves.size(); ++i) {
    const LeafSchedule& leaf = *node.leaves[i];
    digits.resize(leaf.time_levels.size());
    for (std::size_t l = 0; l < digits.size(); ++l)
      digits[l] = l < outer ? Interval::point(starts.digit(l)) : all_digits(leaf.time_levels[l]);
    leaf_points(leaf, digits, inner, at[i]);
  }
}

// Per part of a slot, the boxes it touches in the piece `clip` of a window.
void cut_window_boxes(const Schedule& sched, const NodeParts& node, const Slot& slot,
                      const std::vector<std::vector<DigitBox>>& pieces, std::vector<std::vector<Box>>& boxes) {
  boxes.assign(slot.parts.size(), {});
  for (std::size_t p = 0; p < slot.parts.size(); ++p) {
    const Part& part = slot.parts[p];
    for (const DigitBox& d : pieces[part.leaf]) {
      LeafPoints w;
      leaf_points(*node.leaves[part.leaf], d, -1, w);
      if (w.empty) continue;
      box_of(sched, node, part, w, boxes[p]);
    }
  }
}

// The boxes the reading (`writes` false) or writing parts of `slot` touch over their
// iterations at timesteps `range`.
void boxes_in(const Schedule& sched, const NodeParts& node, const Slot& slot, const TimeRange& range, bool writes,
              std::vector<Box>& out) {
  out.clear();
  if (range.empty()) return;
  LeafPoints w;
  for (const Part& part : slot.parts) {
    if (part.write != writes) continue;
    for (const DigitBox& d : iterations_in(*node.leaves[part.leaf], range)) {
      leaf_points(*node.leaves[part.leaf], d, -1, w);
      if (!w.empty) box_of(sched, node, part, w, out);
    }
  }
}

bool live(const Box& b) {
  return std::none_of(b.begin(), b.end(), [](const Rows& s) { return s.empty(); });
}

// The split (per rank, the period of its rows) the live boxes of some sets share: set
// operations on boxes of rows are those on boxes of ranges with each lattice rank split
// in (row, place in the row), where a box is a product of ranges again.
Periods periods_of_sets(std::initializer_list<const std::vector<Box>*> sets) {
  std::vector<const Box*> u;
  for (const std::vector<Box>* set : sets)
    for (const Box& b : *set)
      if (live(b)) u.push_back(&b);
  return periods_of(u);
}

// pieces -= e, boxes split alike: each piece less the box e, as at most two boxes per
// coordinate (`cut`: scratch).
void subtract_cells(std::vector<Cells>& pieces, const Cells& e, std::vector<Cells>& cut) {
  cut.clear();
  for (Cells rest : pieces) {
    bool overlap = true;
    for (std::size_t r = 0; r < rest.size() && overlap; ++r)
      overlap = overlaps(rest[r], e[r]);
    if (!overlap) {
      cut.push_back(rest);
      continue;
    }
    for (std::size_t r = 0; r < rest.size(); ++r) {
      if (rest[r].from < e[r].from) {
        cut.push_back(rest), cut.back()[r].to = e[r].from;
        rest[r].from = e[r].from;
      }
      if (rest[r].to > e[r].to) {
        cut.push_back(rest), cut.back()[r].from = e[r].to;
        rest[r].to = e[r].to;
      }
    }  // what is left of rest lies inside e: gone
  }
  if (cut.size() > (std::size_t(1) << 16))
    throw std::runtime_error("transfers: the fills of one window split into more than 65536 boxes; "
                             "--method enumerate gives the trace");
  pieces.swap(cut);
}

// The elements of the boxes `from` in none of the boxes of `minus`, as boxes of ranges
// or rows (appended to `out`), subtracted in split coordinates.
void subtract_boxes(const std::vector<Box>& from, std::initializer_list<const std::vector<Box>*> minus,
                    std::vector<Box>& out) {
  if (std::none_of(from.begin(), from.end(), live)) return;
  std::vector<const std::vector<Box>*> sets{&from};
  sets.insert(sets.end(), minus.begin(), minus.end());
  std::vector<const Box*> u;
  for (const std::vector<Box>* set : sets)
    for (const Box& b : *set)
      if (live(b)) u.push_back(&b);
  const Periods periods = periods_of(u);
  std::vector<Cells> less, pieces, cut;
  for (const std::vector<Box>* set : minus)
    for (const Box& b : *set)
      if (live(b)) cells_of(b, periods, less);
  for (const Box& b : from) {
    if (!live(b)) continue;
    pieces.clear();
    cells_of(b, periods, pieces);
    for (const Cells& e : less) subtract_cells(pieces, e, cut);
    for (const Cells& c : pieces) out.push_back(box_of_cells(c, periods));
  }
}

// The intersection of two unions of boxes (pairwise, in split coordinates), as boxes
// of ranges or rows.
std::vector<Box> intersection_of(const std::vector<Box>& a, const std::vector<Box>& b) {
  std::vector<Box> out;
  if (std::none_of(a.begin(), a.end(), live) || std::none_of(b.begin(), b.end(), live)) return out;
  const Periods periods = periods_of_sets({&a, &b});
  std::vector<Cells> ca, cb;
  for (const Box& x : a)
    if (live(x)) cells_of(x, periods, ca);
  for (const Box& x : b)
    if (live(x)) cells_of(x, periods, cb);
  Cells x;
  for (const Cells& p : ca)
    for (const Cells& q : cb) {
      x.resize(p.size());
      bool some = true;
      for (std::size_t r = 0; r < p.size() && some; ++r) some = !(x[r] = intersect(p[r], q[r])).empty();
      if (some) out.push_back(box_of_cells(x, periods));
    }
  return out;
}

// The number of elements in the union of some unions of boxes (lattice-aware).
Wide size_of(std::initializer_list<const std::vector<Box>*> sets) {
  std::vector<const Box*> u;
  for (const std::vector<Box>* set : sets)
    for (const Box& b : *set)
      if (live(b)) u.push_back(&b);
  return u.empty() ? 0 : union_size(u);
}

// The elements of a slot (of `within`, when given) whose first access in a stretch of
// time is a read, however its readers and writers interleave: by bisection of time.
// With R(t), W(t) what the readers and the writers touch from the stretch's start to
// t, the elements first read in [a, b) number at most those of R(b) outside R(a) and
// W(a) (written, if at all, from a on), and at least those outside R(a) and W(b)
// (written from b on, after their first read). Where the two agree that is the count;
// else [a, b) is halved. At one timestep the first is exact: reads come before writes.
// Each step is a few unions of boxes, so a stretch costs as many steps as it has
// timesteps where reads and writes of the same elements meet (times log of its length).
// With `sets`, the elements too, as boxes (per stretch counted, R(b) less R(a) and W(a)).
class FirstReads {
 public:
  FirstReads(const Schedule& sched, const NodeParts& node, const Slot& slot, const std::vector<Box>* within,
             std::int64_t& budget, const std::string& tensor, std::vector<Box>* sets = nullptr)
      : sched_(sched), node_(node), slot_(slot), within_(within), budget_(budget), tensor_(tensor), sets_(sets) {}

  Wide count(const TimeRange& span) {
    from_ = span.from;
    return between(span.from, span.to);
  }

 private:
  void reads(std::int64_t t, bool in, std::vector<Box>& out) const {
    boxes_in(sched_, node_, slot_, {from_, t}, false, out);
    if (in && within_) out = intersection_of(out, *within_);
  }
  Wide between(std::int64_t a, std::int64_t b) {
    if (a >= b) return 0;
    if (--budget_ < 0)
      throw NotClosed{"ordering the reads and writes of tensor '" + tensor_ +
                      "' (leaves running at once or interleaved) takes more than 2^16 halvings of time"};
    std::vector<Box> ra, wa, rb, wb;
    reads(a, false, ra);
    reads(b, true, rb);
    boxes_in(sched_, node_, slot_, {from_, a}, true, wa);
    const Wide up = size_of({&rb, &ra, &wa}) - size_of({&ra, &wa});
    if (up == 0) return up;
    if (b - a == 1) return take(up, rb, ra, wa);
    boxes_in(sched_, node_, slot_, {from_, b}, true, wb);
    const Wide lo = size_of({&rb, &ra, &wb}) - size_of({&ra, &wb});
    if (lo == up) return take(up, rb, ra, wa);
    const std::int64_t mid = a + (b - a) / 2;
    return between(a, mid) + between(mid, b);
  }

  const Schedule& sched_;
  const NodeParts& node_;
  const Slot& slot_;
  const std::vector<Box>* within_;
  std::int64_t& budget_;
  const std::string& tensor_;
  std::vector<Box>* sets_;
  std::int64_t from_ = 0;

  // A stretch counted: its elements, rb less ra and wa, to `sets`.
  Wide take(Wide n, const std::vector<Box>& rb, const std::vector<Box>& ra, const std::vector<Box>& wa) {
    if (sets_) subtract_boxes(rb, {&ra, &wa}, *sets_);
    return n;
  }
};

// One node's windows in closed form: the windows seen by the traced window in time
// order, a run of alike whole windows at a time.
class NodeCounter {
 public:
  NodeCounter(const Schedule& sched, std::uint32_t storage, const std::vector<std::uint32_t>& tensors,
              const std::vector<std::string>& einsums, const std::vector<std::int64_t>& bytes_per_value,
              const TimeRange& window, std::vector<HeldSpan>* held, std::size_t max_held,
              const std::vector<bool>& partial_sums, const TallyObserver& observe)
      : sched_(sched), node_(sched.storages[storage]), tensors_(tensors), bytes_(bytes_per_value), window_(window),
        held_(held), max_held_(max_held), partial_sums_(partial_sums), observe_(observe),
        parts_(parts_below(sched, storage, tensors, einsums)), tally_(tensors.size()) {
    out_.slots.assign(tensors.size(), {});
    out_.peak = out_.peak_bytes = {0, -1};
    read_back_fix_.assign(tensors.size(), 0);
    read_back_fixes_.assign(tensors.size(), 0);
  }

  NodeTotals run() {
    WindowWalk walk(node_.starts(), node_.duration, window_);
    while (!walk.done()) {
      if (!walk.whole()) {  // cut by the traced window: its pieces
        const TimeRange clip = walk.window();
        cut_window(clip);
        record(clip.from, clip.to, 1);
        walk.advance();
        continue;
      }
      const std::int64_t start = walk.start(), end = start + node_.duration;
      const std::int64_t run = whole_windows(walk.starts(), end);
      record(start, end, run);
      if (node_.time_levels.empty()) break;
      if (inner_ + 1 == int(node_.time_levels.size())) walk.advance_innermost(run);
      else for (std::int64_t i = 0; i < run; ++i) walk.advance();  // the levels inside count 1
    }
    add_partial_sums();
    return out_;
  }

 private:
  bool read_back(std::size_t k) const { return !partial_sums_.empty() && partial_sums_[k]; }

  // A window cut to `clip`: each slot's boxes over the iterations in it.
  void cut_window(const TimeRange& clip) {
    std::vector<std::vector<DigitBox>> pieces(parts_.leaves.size());
    for (std::size_t i = 0; i < parts_.leaves.size(); ++i) pieces[i] = iterations_in(*parts_.leaves[i], clip);
    for (std::size_t k = 0; k < parts_.slots.size(); ++k) {
      const Slot& slot = parts_.slots[k];
      cut_window_boxes(sched_, parts_, slot, pieces, boxes_);
      tally_[k] = tally_of(slot, boxes_);
      if (slot.interleaved() || slot.concurrent)  // the phases do not say what comes first
        tally_[k].fills = narrowed(FirstReads(sched_, parts_, slot, nullptr, first_read_budget_, name(k)).count(clip));
      bool one_by_one = false;  // a cut window is one anyway
      read_back_fix_[k] = read_back_fix(k, clip, one_by_one);
    }
  }

  const std::string& name(std::size_t k) const { return sched_.tensors[tensors_[k]].name; }

  // Partial sums: of the elements the window (whose slot boxes are in boxes_) writes and
  // an earlier window drained, those it reads first (filled, not read back), when it
  // both reads first and writes some (else none, and `one_by_one` stays). Costs a walk
  // of the window's time; then windows alike differ in what earlier ones drained, so
  // `one_by_one` is set.
  Wide read_back_fix(std::size_t k, const TimeRange& span, bool& one_by_one) {
    const Slot& slot = parts_.slots[k];
    if (!read_back(k) || std::all_of(slot.parts.begin(), slot.parts.end(), [](const Part& p) { return p.write; }))
      return 0;
    std::vector<Box> written;
    for (std::size_t p = 0; p < slot.parts.size(); ++p)
      if (slot.parts[p].write) written.insert(written.end(), boxes_[p].begin(), boxes_[p].end());
    if (written.empty() || FirstReads(sched_, parts_, slot, &written, first_read_budget_, name(k)).count(span) == 0)
      return 0;
    one_by_one = true;
    if (++read_back_windows_ > kMaxReadBackWindows)
      throw NotClosed{"partial sums of tensor '" + name(k) + "': more than " + std::to_string(kMaxReadBackWindows) +
                      " windows read first some elements they also write"};
    std::vector<Box> before;
    boxes_in(sched_, parts_, slot, {window_.from, span.from}, true, before);
    const std::vector<Box> drained = intersection_of(written, before);
    return drained.empty() ? 0 : FirstReads(sched_, parts_, slot, &drained, first_read_budget_, name(k)).count(span);
  }

  // The whole window at `starts` and how many after it along the innermost outer loop
  // move the same (every box translating alike, none past the traced window).
  std::int64_t whole_windows(const TimeOdometer& starts, std::int64_t end) {
    const std::size_t outer = node_.time_levels.size();
    const int inner = inner_;
    whole_window(parts_, outer, inner, starts, at_);
    std::int64_t run = 1;
    if (inner >= 0) {
      const TimeLevel& along = node_.time_levels[std::size_t(inner)];
      run = std::min(along.count - starts.digit(std::size_t(inner)), (window_.to - end) / along.period + 1);
    }
    for (std::size_t k = 0; k < parts_.slots.size(); ++k) {
      const Slot& slot = parts_.slots[k];
      boxes_.assign(slot.parts.size(), {});
      Box first_delta;    // how the first non-empty box translates along the run
      bool alike = true;  // every non-empty box translates by the same vector
      std::size_t non_empty = 0;
      for (std::size_t p = 0; p < slot.parts.size(); ++p) {
        const Part& part = slot.parts[p];
        const LeafPoints& w = at_[part.leaf];
        run = std::min(run, w.run);
        if (w.empty) continue;
        box_of(sched_, parts_, part, w, boxes_[p]);
        Box delta(boxes_[p].front().size());  // rank r moves by coefficient x step
        for (std::size_t r = 0; r < delta.size(); ++r)
          delta[r].from = w.moving < 0 ? 0 : part.tensor->coefficients[r][std::size_t(w.moving)] * w.step;
        if (++non_empty == 1) first_delta = delta;
        else alike = alike && delta == first_delta;
      }
      if (!alike) run = 1;
      tally_[k] = tally_of(slot, boxes_);
      if (slot.concurrent)
        tally_[k].fills = narrowed(
            FirstReads(sched_, parts_, slot, nullptr, first_read_budget_, name(k)).count({end - node_.duration, end}));
      else if (slot.interleaved())
        tally_[k].fills = narrowed(interleaved_fills(sched_, parts_, slot, outer, starts, budget_));
      // Windows alike move alike but for what earlier ones drained: one at a time then.
      bool one_by_one = false;
      read_back_fix_[k] = read_back_fix(k, {end - node_.duration, end}, one_by_one);
      if (one_by_one) run = 1;
    }
    return std::max<std::int64_t>(run, 1);
  }

  // Adds `run` windows of the current tallies, the first at [start, end).
  void record(std::int64_t start, std::int64_t end, std::int64_t run) {
    Wide sum = 0, sum_bytes = 0;
    for (std::size_t k = 0; k < tally_.size(); ++k) {
      SlotTotals& t = out_.slots[k];
      t.windows = checked_add(t.windows, run);
      t.fills = checked_add(t.fills, Wide(tally_[k].fills) * run);
      t.drains = checked_add(t.drains, Wide(tally_[k].drains) * run);
      read_back_fixes_[k] += Wide(read_back_fix_[k]) * run;
      t.max_tile = std::max(t.max_tile, tally_[k].tile);
      sum += tally_[k].tile;
      sum_bytes += Wide(tally_[k].tile) * bytes_[k];
    }
    const std::int64_t s = narrowed(sum), sb = narrowed(sum_bytes);
    if (out_.peak.timestep < 0 || s > out_.peak.value) out_.peak = {s, start};
    if (out_.peak_bytes.timestep < 0 || sb > out_.peak_bytes.value) out_.peak_bytes = {sb, start};
    const std::int64_t period = inner_ < 0 ? node_.duration : node_.time_levels[std::size_t(inner_)].period;
    if (observe_) observe_({start, end - start, run > 1 ? period : 0, run}, tally_);
    if (!held_) return;
    if (run == 1 || node_.duration == period) {  // back to back: one stretch
      hold(start, end + (run - 1) * period, s, sb);
      return;
    }
    for (std::int64_t i = 0; i < run; ++i) hold(start + i * period, end + i * period, s, sb);
  }
  void hold(std::int64_t from, std::int64_t to, std::int64_t elements, std::int64_t bytes) {
    if (held_->size() >= max_held_)
      throw NotClosed{"Storage nodes of the level hold tiles at the same time, in more than " +
                      std::to_string(max_held_) + " stretches"};
    held_->push_back({{from, to}, elements, bytes});
  }

  // Read back with --partial-sums: what a window writes first that an earlier window
  // drained. An element written in windows w1 < ... < wn is read back in each of w2 ..
  // wn that does not read it first: summed over the elements, every window's writes
  // (the drains) less the union of the writers' boxes over the traced time (each
  // element's first window) less, per window, what it reads first of the elements it
  // writes that an earlier window drained (read_back_fix, none where no window reads
  // first what it writes: a producer writes before its consumer reads).
  void add_partial_sums() {
    std::vector<Box> written;
    for (std::size_t k = 0; k < parts_.slots.size(); ++k) {
      if (!read_back(k)) continue;
      boxes_in(sched_, parts_, parts_.slots[k], window_, true, written);
      out_.slots[k].fills = checked_add(out_.slots[k].fills,
                                        Wide(out_.slots[k].drains) - size_of({&written}) - read_back_fixes_[k]);
    }
  }

  const Schedule& sched_;
  const StorageWindows& node_;
  const std::vector<std::uint32_t>& tensors_;
  const std::vector<std::int64_t>& bytes_;
  const TimeRange window_;
  std::vector<HeldSpan>* held_;
  const std::size_t max_held_;
  const std::vector<bool>& partial_sums_;
  const TallyObserver& observe_;
  const NodeParts parts_;
  NodeTotals out_;
  std::vector<LeafPoints> at_;
  std::vector<std::vector<Box>> boxes_;
  std::vector<WindowTally> tally_;
  std::int64_t budget_ = std::int64_t(1) << 20;  // iterations of interleaved fills
  std::int64_t first_read_budget_ = std::int64_t(1) << 16;  // steps of FirstReads
  std::vector<Wide> read_back_fix_, read_back_fixes_;  // per slot: this window's, the sum (times runs)
  static constexpr std::int64_t kMaxReadBackWindows = std::int64_t(1) << 14;
  std::int64_t read_back_windows_ = 0;  // windows whose read_back_fix was walked
  // Runs go along the innermost outer loop with more than one iteration (a loop of one
  // inside it would cut every run to one window); -1: none.
  const int inner_ = [this] {
    int l = int(node_.time_levels.size()) - 1;
    while (l >= 0 && node_.time_levels[std::size_t(l)].count <= 1) --l;
    return l;
  }();
};

}  // namespace

bool leaf_points_at(const LeafSchedule& leaf, TimeOdometer& o, std::int64_t t, LeafRanges& ranges) {
  o.seek(t);
  if (o.done() || o.time() != t) return false;
  DigitBox digits(leaf.time_levels.size());
  for (std::size_t l = 0; l < digits.size(); ++l) digits[l] = Interval::point(o.digit(l));
  LeafPoints w;
  leaf_points(leaf, digits, -1, w);
  if (w.empty) return false;
  ranges_of(leaf, w, ranges);
  return true;
}

bool leaf_points_in(const LeafSchedule& leaf, const TimeRange& clip, LeafStretch& out) {
  out.boxes.clear();
  const std::vector<DigitBox> boxes = iterations_in(leaf, clip);
  if (boxes.empty()) return false;
  auto time_of = [&](const DigitBox& d) {  // of the box's first iteration
    return time_at(leaf.time_base, leaf.time_levels, [&](std::size_t l) { return d[l].from; });
  };
  out.first = std::numeric_limits<std::int64_t>::max(), out.last = std::numeric_limits<std::int64_t>::min();
  LeafPoints w;
  for (const DigitBox& d : boxes) {
    leaf_points(leaf, d, -1, w);
    if (w.empty) continue;
    ranges_of(leaf, w, out.boxes.emplace_back());
    // Per level, the digits whose iterations touch something are a prefix of the box's
    // (a later sub-tile starts later: past its parent's end the tiles are empty). The
    // first iteration of a box that touches anything is its first; its last one is
    // found level by level, outermost first, by bisection.
    out.first = std::min(out.first, time_of(d));
    DigitBox last = d;
    for (std::size_t l = 0; l < last.size(); ++l) {
      std::int64_t lo = last[l].from, hi = last[l].to - 1;  // the last touching digit is in [lo, hi]
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        last[l] = Interval::point(mid);
        leaf_points(leaf, last, -1, w);
        if (w.empty) hi = mid - 1;
        else lo = mid;
      }
      last[l] = Interval::point(lo);
    }
    out.last = std::max(out.last, time_of(last));
  }
  return !out.boxes.empty();
}

bool image_box(const LeafTensor& t, const LeafRanges& ranges, Box& box) {
  boost::container::small_vector<Rows, 8> points(ranges.begin(), ranges.end());
  boost::container::small_vector<const Rows*, 8> choice;
  for (const Rows& x : points) choice.push_back(&x);
  return image_of(t, choice, box) &&
         std::all_of(box.begin(), box.end(), [](const Rows& x) { return x.range(); });
}

NodeTotals closed_form_node(const Schedule& sched, std::uint32_t storage, const std::vector<std::uint32_t>& tensors,
                            const std::vector<std::string>& einsums, const std::vector<std::int64_t>& bytes_per_value,
                            const TimeRange& window, std::vector<HeldSpan>* held, std::size_t max_held,
                            const std::vector<bool>& partial_sums, const TallyObserver& observe) {
  return NodeCounter(sched, storage, tensors, einsums, bytes_per_value, window, held, max_held, partial_sums, observe)
      .run();
}

struct SlotWindows::Impl {
  const Schedule* sched;
  const StorageWindows* node;
  NodeParts parts;
  WindowWalk walk;
  TimeRange window;
  std::vector<Box> fills, drains;
  std::vector<LeafPoints> at;
  std::vector<std::vector<Box>> boxes;

  void load() {
    if (walk.done()) return;
    window = walk.window();
    const Slot& slot = parts.slots.front();
    if (walk.whole()) {
      whole_window(parts, node->time_levels.size(), -1, walk.starts(), at);
      boxes.assign(slot.parts.size(), {});
      for (std::size_t p = 0; p < slot.parts.size(); ++p)
        if (!at[slot.parts[p].leaf].empty) box_of(*sched, parts, slot.parts[p], at[slot.parts[p].leaf], boxes[p]);
    } else {
      std::vector<std::vector<DigitBox>> iterations(parts.leaves.size());
      for (std::size_t i = 0; i < parts.leaves.size(); ++i) iterations[i] = iterations_in(*parts.leaves[i], window);
      cut_window_boxes(*sched, parts, slot, iterations, boxes);
    }
    fills.clear(), drains.clear(), earlier.clear();
    if (slot.concurrent || slot.interleaved()) {  // the phases do not order the accesses
      for (std::size_t q = 0; q < slot.parts.size(); ++q)
        if (slot.parts[q].write) drains.insert(drains.end(), boxes[q].begin(), boxes[q].end());
      std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();  // a window's cost, as enumerating
      FirstReads(*sched, parts, slot, nullptr, unbounded, sched->tensors[tensor].name, &fills).count(window);
      if (read_back) add_read_backs(slot);
      return;
    }
    // Fills: what each reading phase touches less what any earlier phase touched, with
    // each lattice rank split in two (Cells), then back to boxes of rows.
    all.clear();
    for (const auto& b : boxes)
      for (const Box& x : b) all.push_back(&x);
    const Periods periods = periods_of(all);
    std::size_t p = 0;
    for (std::size_t phase = 0; phase < slot.phase_end.size(); ++phase) {
      const std::size_t first = p;
      for (; p < slot.phase_end[phase]; ++p)
        for (const Box& b : boxes[p]) {
          if (slot.parts[p].write) {
            drains.push_back(b);
          } else {
            pieces.clear();
            cells_of(b, periods, pieces);
            for (const Cells& e : earlier) subtract(e);
            for (const Cells& c : pieces) fills.push_back(box_of_cells(c, periods));
          }
        }
      for (std::size_t q = first; q < p; ++q)
        for (const Box& b : boxes[q]) cells_of(b, periods, earlier);
    }
    if (read_back) add_read_backs(slot);
  }
  // Partial sums: the elements the window writes first (its drains less its fills)
  // that the node's earlier windows drained (the writers' boxes from the start of
  // the trace) are read back too, with the fills; subtracted and intersected with each
  // lattice rank split in row and place.
  void add_read_backs(const Slot& slot) {
    if (drains.empty()) return;
    boxes_in(*sched, parts, slot, {clip.from, window.from}, true, before);
    if (before.empty()) return;
    written_first.clear();
    subtract_boxes(drains, {&fills}, written_first);
    const std::vector<Box> back = intersection_of(written_first, before);
    fills.insert(fills.end(), back.begin(), back.end());
  }
  bool read_back = false;
  TimeRange clip;
  std::uint32_t tensor = 0;
  std::vector<Box> before, written_first;
  std::vector<const Box*> all;
  std::vector<Cells> earlier, pieces, cut;
  void subtract(const Cells& e) { subtract_cells(pieces, e, cut); }
};

SlotWindows::SlotWindows(const Schedule& sched, std::uint32_t storage, std::uint32_t tensor,
                         const std::vector<std::string>& einsums, const TimeRange& clip, std::int64_t from,
                         bool partial_sums)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.sched = &sched;
  m.node = &sched.storages[storage];
  m.parts = parts_below(sched, storage, {tensor}, einsums);
  m.read_back = partial_sums && sched.parent(storage, sched.tensors[tensor].name) >= 0;
  m.clip = clip;
  m.tensor = tensor;
  // Phases one after the other: a reader's fills are its boxes less the earlier
  // phases'. Interleaved under shared loops or running at once, FirstReads gives them.
  // Transfers stream: a window found not to be a union of boxes of rows half-way would
  // be too late to enumerate instead, so what could fail in some window is refused here.
  const std::size_t outer = m.node->time_levels.size();
  // Loops inside take some digits where a window may be cut, where FirstReads halves a
  // window's time (a writer and a reader interleaved or at once), and for read-backs.
  const Slot& slot = m.parts.slots.front();
  const bool cut = clip.from > 0 || clip.to < sched.n_timesteps || slot.concurrent || slot.interleaved();
  std::vector<Periods> strides(sched.tensors[tensor].ranks.size());  // per rank, the lattices' strides
  for (const Part& part : m.parts.slots.front().parts) {
    const LeafSchedule& leaf = *m.parts.leaves[part.leaf];
    const std::string in = " in Einsum '" + leaf.einsum + "'";
    // Per variable, the stride of its lattices (0: it has none): the tiles of a loop
    // that may take several of its digits, cut again by a loop inside it that may take
    // some (a !Temporal loop above the node takes one per window).
    std::vector<std::int64_t> lattice(leaf.variables.size(), 0);
    std::vector<bool> some_after(leaf.variables.size(), false);  // a loop inside may take some digits
    for (std::size_t i = leaf.loops.size(); i-- > 0;) {
      const LoopLevel& l = leaf.loops[i];
      if (l.variable < 0 || l.count <= 1) continue;
      const auto v = std::size_t(l.variable);
      const bool inside = !l.spatial && std::size_t(l.time_level) >= outer;
      if ((l.spatial || inside) && some_after[v]) {  // may take several digits, then cut again
        if (lattice[v] != 0)
          throw NotClosed{"rank variable '" + leaf.variables[v] + "' may be cut into strided tiles twice" + in};
        lattice[v] = l.tile_shape;
      }
      if (!l.spatial && (!inside || cut)) some_after[v] = true;
    }
    std::vector<int> ranks_of(leaf.variables.size(), 0);
    for (std::size_t r = 0; r < part.tensor->coefficients.size(); ++r) {
      int strided = 0;
      for (std::size_t v = 0; v < leaf.variables.size(); ++v)
        if (const std::int64_t c = part.tensor->coefficients[r][v]; c != 0) {
          ++ranks_of[v];
          const std::int64_t a = c < 0 ? -c : c;
          if (a != 1 && lattice[v] != 0)
            throw NotClosed{"tensor '" + sched.tensors[tensor].name + "' is read with a strided index of a strided "
                            "tile" + in};
          if (a == 1 && lattice[v] == 0) continue;
          ++strided;
          strides[r].push_back(a != 1 ? a : lattice[v]);
        }
      if (strided > 1)
        throw NotClosed{"tensor '" + sched.tensors[tensor].name + "' is read with two strided terms in one rank" + in};
    }
    for (std::size_t v = 0; v < ranks_of.size(); ++v)
      if (ranks_of[v] > 1)
        throw NotClosed{"rank variable '" + leaf.variables[v] + "' indexes two ranks of tensor '" +
                        sched.tensors[tensor].name + "'" + in};
  }
  for (const Periods& r : strides) {  // as periods_of will find them
    std::int64_t l = 1;
    for (std::int64_t x : r) l = std::lcm(l, x);
    for (std::int64_t x : r)
      if (l / x > kMaxPeriodSplit)
        throw NotClosed{"tensor '" + sched.tensors[tensor].name + "' is read at strides of no small common multiple"};
  }
  m.walk = WindowWalk(m.node->starts(), m.node->duration, clip);
  // The first window that ends at or after `from` (its drains are at its end).
  m.walk.seek_ending_from(std::max(clip.from, from));
  m.load();
}

SlotWindows::SlotWindows(SlotWindows&&) noexcept = default;
SlotWindows& SlotWindows::operator=(SlotWindows&&) noexcept = default;
SlotWindows::~SlotWindows() = default;

bool SlotWindows::done() const { return impl_->walk.done(); }
const TimeRange& SlotWindows::window() const { return impl_->window; }
const std::vector<Box>& SlotWindows::fills() const { return impl_->fills; }
const std::vector<Box>& SlotWindows::drains() const { return impl_->drains; }
void SlotWindows::next() {
  impl_->walk.advance();
  impl_->load();
}

}  // namespace looptrace::movement_boxes

namespace looptrace::movement_boxes {

std::int64_t union_elements(const std::vector<Box>& boxes) {
  std::vector<const Box*> live;
  for (const Box& b : boxes)
    if (std::none_of(b.begin(), b.end(), [](const Rows& s) { return s.empty(); })) live.push_back(&b);
  return live.empty() ? 0 : narrowed(union_size(live));
}

}  // namespace looptrace::movement_boxes
