#include "timeloop_convention.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_set>
#include <string>
#include <vector>

#include "compile/tiling.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/support/error.hpp"
#include "movement_boxes.hpp"

namespace looptrace {

namespace {

using Wide = __int128;
using movement_boxes::LeafRanges;
// Hulls and tiles here are boxes of ranges (image_box gives no lattice rows).
using Box = boost::container::small_vector<Interval, 6>;

// A box of ranges as movement_boxes' boxes (ranks of ranges or rows) and back.
movement_boxes::Box rows_of(const Box& b) { return movement_boxes::Box(b.begin(), b.end()); }
Box ranges_of_rows(const movement_boxes::Box& b) {
  Box out;
  for (const movement_boxes::Rows& x : b) out.push_back(Interval{x.from, x.to});  // all ranges (image_box)
  return out;
}

// Box evaluations one (node, tensor) may take before it is refused.
constexpr std::int64_t kBudget = std::int64_t(1) << 24;

// What the per-instance figures cannot count (they are left out).
struct Unclosed {
  std::string reason;
};

std::int64_t narrowed(Wide v) {
  if (v > std::numeric_limits<std::int64_t>::max() || v < std::numeric_limits<std::int64_t>::min())
    throw SpecError("data movement counts exceed 2^63 - 1");
  return std::int64_t(v);
}

// Per loop of a leaf (outermost first), a digit, or -1: every iteration. Loops past
// the vector's end are taken whole.
using Digits = std::vector<std::int64_t>;

// The ranges of a leaf's variables with its loops [0, stop) applied, each at its digit
// or whole; false when one is empty. A loop at a digit inside one taken whole (over the
// same variable) would give a strided set: Unclosed, unless `access` is given and does
// not use the variable (its range then changes nothing).
bool ranges_of(const LeafSchedule& leaf, const Digits& digits, std::size_t stop, LeafRanges& r,
               const LeafTensor* access = nullptr) {
  const std::size_t n = leaf.variables.size();
  r.resize(n);
  for (std::size_t v = 0; v < n; ++v) r[v] = {0, leaf.extent[v]};
  std::vector<bool> widened(n, false);
  for (std::size_t j = 0; j < stop && j < leaf.loops.size(); ++j) {
    const LoopLevel& l = leaf.loops[j];
    if (l.variable < 0) continue;
    const auto v = std::size_t(l.variable);
    if (r[v].empty()) continue;
    const std::int64_t d = j < digits.size() ? digits[j] : -1;
    if (d < 0) {
      if (widened[v]) continue;  // the loops inside a whole one cover its union
      const Interval parent = r[v];
      r[v] = tiling::sub_tiles<Wide>(parent, l, Interval{0, l.count});
      widened[v] = tiling::tiles_within<Wide>(parent.size(), l) > 1;
    } else {
      if (widened[v] && access &&
          std::all_of(access->coefficients.begin(), access->coefficients.end(),
                      [&](const std::vector<std::int64_t>& row) { return row[v] == 0; }))
        continue;
      if (widened[v])
        throw Unclosed{"rank variable '" + leaf.variables[v] +
                       "' is tiled at one iteration inside a loop taken whole (a strided tile)"};
      r[v] = tiling::sub_tiles<Wide>(r[v], l, Interval::point(d));
    }
  }
  return std::none_of(r.begin(), r.end(), [](const Interval& x) { return x.empty(); });
}

// The smallest box around the image of `r` in access `t` (Timeloop's tiles are such
// hulls: a strided index, 2p + r, counts the gaps too).
Box hull_of(const LeafTensor& t, const LeafRanges& r) {
  Box box(t.constants.size());
  for (std::size_t k = 0; k < box.size(); ++k) {
    Wide lo = t.constants[k], hi = t.constants[k];
    for (std::size_t v = 0; v < r.size(); ++v) {
      const Wide c = t.coefficients[k][v];
      if (c > 0) lo += c * r[v].from, hi += c * (r[v].to - 1);
      else if (c < 0) lo += c * (r[v].to - 1), hi += c * r[v].from;
    }
    box[k] = {narrowed(lo), narrowed(hi + 1)};
  }
  return box;
}

// The tile of tensor access `t` of `leaf` at `digits` (the rest whole), as Timeloop
// takes it (the hull of the image): empty when the leaf runs nothing there.
Box hull_tile_of(const LeafSchedule& leaf, const LeafTensor& t, const Digits& digits) {
  LeafRanges r;
  if (!ranges_of(leaf, digits, leaf.loops.size(), r, &t)) return {};
  return hull_of(t, r);
}

// The tile of tensor access `t` of `leaf` at `digits` (the rest whole): empty when the
// leaf runs nothing there.
Box tile_of(const LeafSchedule& leaf, const LeafTensor& t, const Digits& digits) {
  LeafRanges r;
  movement_boxes::Box box;
  if (!ranges_of(leaf, digits, leaf.loops.size(), r, &t)) return {};
  if (!movement_boxes::image_box(t, r, box)) throw Unclosed{"a tile of the tensor is not a box (a strided index)"};
  return ranges_of_rows(box);
}

Wide size_of(const Box& b) {
  if (b.empty()) return 0;
  Wide n = 1;
  for (const Interval& x : b) n *= x.size();
  return n;
}

Wide overlap_of(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return 0;
  Wide n = 1;
  for (std::size_t r = 0; r < a.size(); ++r) n *= intersect(a[r], b[r]).size();
  return n;
}

// a less b, as disjoint boxes (at most two per rank).
std::vector<Box> less(Box a, const Box& b) {
  std::vector<Box> out;
  if (overlap_of(a, b) == 0) {
    out.push_back(a);
    return out;
  }
  for (std::size_t r = 0; r < a.size(); ++r) {
    if (a[r].from < b[r].from) out.push_back(a), out.back()[r].to = b[r].from, a[r].from = b[r].from;
    if (a[r].to > b[r].to) out.push_back(a), out.back()[r].from = b[r].to, a[r].to = b[r].to;
  }
  return out;
}

// A loop's digits in classes whose windows move alike: digit 0; the whole strides after
// it (each the one before translated); the one after them (partial or empty); the empty
// rest. `count` windows of a class move what its first (`digit`) does.
struct DigitClass {
  std::int64_t digit, count;
};

std::vector<DigitClass> classes_of(const LeafSchedule& leaf, const Digits& digits, std::size_t j,
                                   const LeafTensor* access = nullptr) {
  const LoopLevel& l = leaf.loops[j];
  if (l.count <= 1) return {{0, 1}};
  LeafRanges r;
  if (l.variable < 0 || !ranges_of(leaf, digits, j, r, access)) return {{0, l.count}};  // moves nothing
  const std::int64_t given = r[std::size_t(l.variable)].size();
  const std::int64_t n = l.count;
  const std::int64_t u = std::min<std::int64_t>(std::int64_t(tiling::first_not_full<Wide>(given, l)), n);
  std::vector<DigitClass> out{{0, 1}};
  if (u > 1) out.push_back({1, u - 1});
  if (u < n) out.push_back({u, 1});
  if (u + 1 < n) out.push_back({u + 1, n - u - 1});
  return out;
}

// One access below a node: a leaf and its access of the tensor.
struct Part {
  const LeafSchedule* leaf;
  const LeafTensor* access;
  bool write;
};

std::vector<Part> parts_below(const Schedule& s, std::size_t node, int tensor, const std::vector<std::string>& einsums) {
  std::vector<Part> parts;
  for (const LeafSchedule& leaf : s.leaves) {
    if (std::find(leaf.storages.begin(), leaf.storages.end(), int(node)) == leaf.storages.end()) continue;
    if (!einsums.empty() && std::find(einsums.begin(), einsums.end(), leaf.einsum) == einsums.end()) continue;
    for (const LeafTensor& t : leaf.tensors)
      if (t.tensor == tensor) parts.push_back({&leaf, &t, s.traces[std::size_t(t.trace)].is_output});
  }
  return parts;
}

// ---- per instance, LoopTree's definitions ----

// Walks the loops above a node (temporal and spatial: every digit fixed), digit class by
// class, adding per window and instance its tile (the union of the parts' boxes) and its
// fills (the tile, when the parts only read).
struct PerInstanceWalk {
  const std::vector<Part>& parts;
  std::size_t above;
  bool reads;
  std::int64_t evaluations = 0;
  std::int64_t max_tile = 0;
  Wide fills = 0;

  void walk(Digits& digits, std::size_t j, Wide weight) {
    if (j == above) {
      if (++evaluations > kBudget) throw Unclosed{"more than 2^24 distinct windows and instances"};
      std::vector<Box> boxes;
      for (const Part& p : parts) boxes.push_back(tile_of(*p.leaf, *p.access, digits));
      std::vector<movement_boxes::Box> live;
      for (const Box& b : boxes)
        if (size_of(b) > 0) live.push_back(rows_of(b));
      const std::int64_t tile = live.empty() ? 0 : movement_boxes::union_elements(live);
      max_tile = std::max(max_tile, tile);
      if (reads) fills += weight * tile;
      return;
    }
    // The classes of the first part's leaf; the others must agree and translate alike,
    // else every digit is its own class.
    std::vector<DigitClass> classes = classes_of(*parts.front().leaf, digits, j);
    bool alike = true;
    for (const Part& p : parts) {
      const std::vector<DigitClass> c = classes_of(*p.leaf, digits, j);
      alike = alike && c.size() == classes.size() &&
              std::equal(c.begin(), c.end(), classes.begin(), [](const DigitClass& a, const DigitClass& b) {
                return a.digit == b.digit && a.count == b.count;
              });
      const LoopLevel& l = p.leaf->loops[j];
      const LoopLevel& l0 = parts.front().leaf->loops[j];
      for (std::size_t r = 0; alike && r < p.access->coefficients.size(); ++r) {
        const std::int64_t c1 = l.variable < 0 ? 0 : p.access->coefficients[r][std::size_t(l.variable)];
        const std::int64_t c0 = l0.variable < 0 ? 0 : parts.front().access->coefficients[r][std::size_t(l0.variable)];
        alike = r < parts.front().access->coefficients.size() && c0 == c1;
      }
    }
    if (!alike) {
      classes.clear();
      for (std::int64_t d = 0; d < parts.front().leaf->loops[j].count; ++d) classes.push_back({d, 1});
    }
    for (const DigitClass& c : classes) {
      digits[j] = c.digit;
      walk(digits, j + 1, weight * c.count);
    }
    digits[j] = -1;
  }
};

std::optional<PerInstance> per_instance_of(const Schedule& s, std::size_t node, int tensor,
                                           const std::vector<std::string>& einsums) {
  const std::vector<Part> parts = parts_below(s, node, tensor, einsums);
  PerInstance out;
  out.instances = s.storages[node].instances;
  if (parts.empty()) return out;
  const bool writes = std::any_of(parts.begin(), parts.end(), [](const Part& p) { return p.write; });
  const bool reads = std::any_of(parts.begin(), parts.end(), [](const Part& p) { return !p.write; });
  if (writes && reads) return std::nullopt;  // which access comes first is per iteration: left out
  PerInstanceWalk w{parts, s.storages[node].loops_above, reads};
  Digits digits(w.above, -1);
  try {
    w.walk(digits, 0, 1);
    out.max_tile = w.max_tile;
    out.fills = narrowed(w.fills);
  } catch (const Unclosed&) {
    return std::nullopt;
  } catch (const movement_boxes::NotClosed&) {  // more than 64 boxes in one union
    return std::nullopt;
  } catch (const SpecError&) {  // past 2^63 - 1: left out, the union's figures stand
    return std::nullopt;
  }
  return out;
}

// ---- Timeloop's convention ----

// One buffer instance's state, as Timeloop's nest analysis keeps it per spatial
// instance: its last tile and the step that brought the one before it (none: unset).
struct InstanceState {
  Box last;
  std::optional<std::vector<std::int64_t>> step;
};

// The delta a new tile `b` asks of the parent: the part of it the last tile did not
// hold, or all of it where the step changed (Timeloop's reset on stride change; a tile
// that stays put keeps the step).
std::vector<Box> delta_of(InstanceState& st, const Box& b, Wide& size) {
  std::vector<Box> out;
  if (size_of(b) == 0) {  // nothing held in this window
    size = 0;
    return out;
  }
  if (size_of(st.last) == 0) {
    st.last = b;
    size = size_of(b);
    out.push_back(b);
    return out;
  }
  std::vector<std::int64_t> step(b.size());
  bool zero = true;
  for (std::size_t r = 0; r < b.size(); ++r) step[r] = b[r].from - st.last[r].from, zero = zero && step[r] == 0;
  if (!zero && st.step && *st.step != step) {  // the step changed: fetched whole
    st.step.reset();
    st.last = b;
    size = size_of(b);
    out.push_back(b);
    return out;
  }
  // A tile that stays put remembers a step of zero, so that the next move fetches its
  // tile whole: what the published reference outputs show (the Eyeriss exercise's
  // shared_glb inputs, refetched at every step of the DRAM p loop with the m loop
  // inside it), where the current nest-analysis.cpp would keep the step before.
  if (zero || !st.step) st.step = step;
  size = size_of(b) - overlap_of(b, st.last);
  if (size > 0) out = less(b, st.last);
  st.last = b;
  return out;
}

bool before(const Box& a, const Box& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

// What one (node, tensor) moves under Timeloop's rules.
struct NodeTally {
  std::int64_t instances = 1, max_tile = 0, windows = 0;
  Wide delivered = 0;  // the instances' deltas, each counted (their fills)
  Wide traffic = 0;    // the same with equal deltas to one parent instance once (multicast, spatial reduction)
  Wide distinct = 0;   // the elements each instance ever holds, summed
  Wide compute = 0;    // innermost: per timestep and instance, the elements the compute touches
  bool innermost = false;
  bool write = false;  // the access writes (an output of its Einsum)
};

// A loop's iterations as Timeloop's nest analysis runs them (extrapolating): the first,
// the second standing for all the rest; with a partial last tile, the first, the second
// for the middle ones, then the last two (the one before last only moves the state).
struct Eval {
  std::int64_t digit, weight;
};

std::vector<Eval> evals_of(const LeafSchedule& leaf, const Digits& digits, std::size_t j) {
  const LoopLevel& l = leaf.loops[j];
  const std::int64_t n = l.count;
  if (n <= 1) return {{0, 1}};
  bool partial = false;
  LeafRanges r;
  if (l.variable >= 0 && ranges_of(leaf, digits, j, r)) {
    const std::int64_t given = r[std::size_t(l.variable)].size();
    const Interval last = tiling::sub_tiles<Wide>(Interval{0, given}, l, Interval::point(n - 1));
    partial = last.size() != l.tile_shape;
  }
  if (!partial) return {{0, 1}, {1, n - 1}};
  if (n == 2) return {{0, 1}, {1, 1}};
  if (n == 3) return {{0, 1}, {1, 1}, {2, 1}};
  return {{0, 1}, {1, n - 2}, {n - 2, 0}, {n - 1, 1}};
}

// Whether the access's index uses loop j's variable (else the loop's iterations see one
// tile: instances along it get equal deltas, a multicast).
bool uses(const LeafSchedule& leaf, const LeafTensor& access, std::size_t j) {
  const int v = leaf.loops[j].variable;
  return v >= 0 && std::any_of(access.coefficients.begin(), access.coefficients.end(),
                               [&](const std::vector<std::int64_t>& row) { return row[std::size_t(v)] != 0; });
}

// An instance evaluated: the digits of the spatial loops above the node, how many
// instances it stands for, and how many of those a parent serves apart (the others get
// the same deltas from the same parent instance: one multicast).
struct InstanceClass {
  Digits digits;
  Wide count = 1, apart = 1;
};

// What one instance's tile at one of Timeloop's iterations asks of the parent: the tile
// and its delta (sorted boxes; empty where nothing is new).
struct RepStep {
  Box tile;
  std::vector<Box> delta;
};
using RepSteps = std::map<std::vector<std::int64_t>, std::vector<RepStep>>;  // temporal digits -> per instance

struct TimeloopWalk {
  const Schedule& s;
  const LeafSchedule& leaf;
  const LeafTensor& access;
  std::size_t above;             // loops above the node
  std::vector<std::size_t> temporal, spatial;  // loops above it, by kind
  std::size_t parent_above;      // loops above the parent (its instances)
  std::vector<InstanceClass> instances;
  std::vector<InstanceState> state;
  NodeTally tally;
  std::int64_t evaluations = 0;
  RepSteps* record = nullptr;  // given: every instance's step at every iteration walked

  void step(Digits& digits, Wide weight) {
    // The deltas sent, per parent instance (its digits): an equal one again is a multicast.
    std::set<std::pair<std::vector<std::int64_t>, std::vector<Box>>> sent;
    for (std::size_t i = 0; i < instances.size(); ++i) {
      if (++evaluations > kBudget) throw SpecError("--convention timeloop: more than 2^24 windows and instances to evaluate");
      // Who gets the same delta: instances under one parent instance that differ only
      // along spatial loops whose variable the access does not use (Timeloop finds no
      // other equal deltas across its spatial levels: not those along a diagonal of
      // p + r, as in its Eyeriss exercise).
      std::vector<std::int64_t> key;
      for (std::size_t k = 0; k < spatial.size(); ++k) {
        digits[spatial[k]] = instances[i].digits[k];
        key.push_back(spatial[k] < parent_above || uses(leaf, access, spatial[k]) ? instances[i].digits[k] : -1);
      }
      const Box b = hull_tile_of(leaf, access, digits);
      tally.max_tile = std::max(tally.max_tile, narrowed(size_of(b)));
      Wide size = 0;
      std::vector<Box> delta = delta_of(state[i], b, size);
      std::sort(delta.begin(), delta.end(), before);
      if (record) {
        std::vector<std::int64_t> at;
        for (const std::size_t j : temporal) at.push_back(digits[j]);
        std::vector<RepStep>& steps = (*record)[std::move(at)];
        steps.resize(instances.size());
        steps[i] = {b, size == 0 ? std::vector<Box>{} : delta};
      }
      if (weight == 0 || size == 0) continue;
      tally.delivered += weight * size * instances[i].count;
      if (sent.emplace(std::move(key), std::move(delta)).second) tally.traffic += weight * size * instances[i].apart;
    }
  }

  void walk(Digits& digits, std::size_t k, Wide weight) {
    if (k == temporal.size()) {
      step(digits, weight);
      return;
    }
    const std::size_t j = temporal[k];
    if (!instances.empty())
      for (std::size_t m = 0; m < spatial.size(); ++m) digits[spatial[m]] = instances[0].digits[m];
    for (const Eval& e : evals_of(leaf, digits, j)) {
      digits[j] = e.digit;
      walk(digits, k + 1, weight * e.weight);
    }
    digits[j] = -1;
  }
};

// Per timestep and instance of the node, the elements of the access the compute
// touches (the node's !Spatial loops fixed, those below it whole), summed. The image is
// a product over groups of ranks that share variables, and each group's size depends
// only on the digits of the loops over its variables, so the sum is a product of sums,
// each over one group's loops by digit class.
Wide compute_count(const LeafSchedule& leaf, const LeafTensor& access, std::size_t above) {
  const std::size_t nv = leaf.variables.size();
  // Groups: variables joined by a rank that uses both; a variable the access does not
  // use is a group of its own (it only decides whether the leaf runs).
  std::vector<std::size_t> group(nv);
  for (std::size_t v = 0; v < nv; ++v) group[v] = v;
  auto root = [&](std::size_t v) {
    while (group[v] != v) v = group[v];
    return v;
  };
  for (const auto& row : access.coefficients) {
    std::size_t first = nv;
    for (std::size_t v = 0; v < nv; ++v)
      if (row[v] != 0) {
        if (first == nv) first = root(v);
        else group[root(v)] = first;
      }
  }
  // A spatial loop below the node is taken whole (its instances' equal elements once),
  // unless a loop inside it tiles its variable again: then its digits are walked.
  auto walked = [&](std::size_t j) {
    const LoopLevel& l = leaf.loops[j];
    if (!l.spatial || j < above) return true;
    return uses(leaf, access, j) && std::any_of(leaf.loops.begin() + std::ptrdiff_t(j) + 1, leaf.loops.end(),
                                                [&](const LoopLevel& m) { return m.variable == l.variable; });
  };
  Wide total = 1;
  for (std::size_t j = 0; j < leaf.loops.size(); ++j)
    if (leaf.loops[j].variable < 0 && walked(j)) total *= leaf.loops[j].count;
  std::vector<bool> done(nv, false);
  std::int64_t evaluations = 0;
  for (std::size_t v0 = 0; v0 < nv; ++v0) {
    const std::size_t g = root(v0);
    if (done[g]) continue;
    done[g] = true;
    std::vector<std::size_t> loops;
    for (std::size_t j = 0; j < leaf.loops.size(); ++j)
      if (leaf.loops[j].variable >= 0 && root(std::size_t(leaf.loops[j].variable)) == g && walked(j)) loops.push_back(j);
    std::vector<std::size_t> ranks;  // the ranks whose variables are the group's
    for (std::size_t r = 0; r < access.coefficients.size(); ++r)
      for (std::size_t v = 0; v < nv; ++v)
        if (access.coefficients[r][v] != 0 && root(v) == g) {
          ranks.push_back(r);
          break;
        }
    Digits digits(leaf.loops.size(), -1);
    Wide sum = 0;
    auto walk = [&](auto&& self, std::size_t k, Wide weight) -> void {
      if (k == loops.size()) {
        if (++evaluations > kBudget) throw SpecError("--convention timeloop: more than 2^24 compute steps to evaluate");
        LeafRanges r;
        if (!ranges_of(leaf, digits, leaf.loops.size(), r, &access)) return;
        const Box box = hull_of(access, r);
        Wide n = 1;
        for (const std::size_t rank : ranks) n *= box[rank].size();
        sum += weight * n;
        return;
      }
      const std::size_t j = loops[k];
      for (const DigitClass& c : classes_of(leaf, digits, j, &access)) {
        digits[j] = c.digit;
        self(self, k + 1, weight * c.count);
      }
      digits[j] = -1;
    };
    walk(walk, 0, 1);
    total *= sum;
  }
  return total;
}

// The elements each instance ever holds, summed over the instances: the spatial loops
// above the node by digit class, the temporal ones whole, but for one that a spatial
// loop inside it tiles again (an instance then holds a strided set: its digits are
// walked, each adding its part).
void distinct_walk(const LeafSchedule& leaf, const LeafTensor& access, std::size_t above, Digits& digits,
                   std::size_t j, Wide weight, Wide& total) {
  if (j == above) {
    total += weight * size_of(hull_tile_of(leaf, access, digits));
    return;
  }
  const LoopLevel& l = leaf.loops[j];
  const bool walked = l.spatial || (uses(leaf, access, j) &&
                                    std::any_of(leaf.loops.begin() + std::ptrdiff_t(j) + 1,
                                                leaf.loops.begin() + std::ptrdiff_t(above),
                                                [&](const LoopLevel& m) { return m.spatial && m.variable == l.variable; }));
  if (!walked) {
    digits[j] = -1;
    distinct_walk(leaf, access, above, digits, j + 1, weight, total);
    return;
  }
  for (const DigitClass& c : classes_of(leaf, digits, j, &access)) {
    digits[j] = c.digit;
    distinct_walk(leaf, access, above, digits, j + 1, weight * c.count, total);
  }
  digits[j] = -1;
}

// One access of the tensor below the node, as Timeloop would count its Einsum alone.
// The walk of one access below a node, its instances made: every one where they and
// Timeloop's steps are few enough (else, unless `every` is asked for, classes).
TimeloopWalk walk_of(const Schedule& s, std::size_t node, const Part& part, bool every_instance) {
  const StorageWindows& n = s.storages[node];
  const std::string& name = s.tensors[std::size_t(part.access->tensor)].name;
  const LeafSchedule& leaf = *part.leaf;
  const LeafTensor& access = *part.access;
  const int parent = s.parent(node, name);
  TimeloopWalk w{s, leaf, access, n.loops_above, {}, {}, parent < 0 ? 0 : s.storages[std::size_t(parent)].loops_above,
                 {}, {}, {}};
  for (std::size_t j = 0; j < n.loops_above; ++j) (leaf.loops[j].spatial ? w.spatial : w.temporal).push_back(j);
  // The instances: every one, where they and Timeloop's steps are few enough to evaluate
  // one by one (equal deltas are then found wherever they are: a multicast along a
  // diagonal too); else by digit classes of the spatial loops (at the first temporal
  // iterations), where only a loop whose variable the access does not use multicasts.
  Wide steps = 1;
  for (const std::size_t j : w.temporal)
    if (leaf.loops[j].count > 1) steps *= 4;
  Wide every = 1;
  for (const std::size_t j : w.spatial) every *= leaf.loops[j].count;
  try {
    if (every * steps <= Wide(1) << 18 || (every_instance && every <= kBudget)) {
      std::vector<std::int64_t> at(w.spatial.size(), 0);
      for (;;) {
        w.instances.push_back({at, 1, 1});
        std::size_t k = at.size();
        while (k > 0 && ++at[k - 1] == leaf.loops[w.spatial[k - 1]].count) at[--k] = 0;
        if (k == 0) break;
      }
    } else {
      Digits digits(n.loops_above, -1);
      for (const std::size_t j : w.temporal) digits[j] = 0;
      InstanceClass c;
      auto classes = [&](auto&& self, std::size_t k) -> void {
        if (k == w.spatial.size()) {
          if (std::int64_t(w.instances.size()) >= kBudget)
            throw SpecError(n.where, "--convention timeloop: more than 2^24 instance classes of " + n.level);
          w.instances.push_back(c);
          return;
        }
        const std::size_t j = w.spatial[k];
        const bool used = uses(leaf, access, j);
        const std::vector<DigitClass> cs =
            used ? classes_of(leaf, digits, j) : std::vector<DigitClass>{{0, leaf.loops[j].count}};
        const InstanceClass saved = c;
        for (const DigitClass& d : cs) {
          digits[j] = d.digit;
          c.digits.push_back(d.digit);
          c.count *= d.count;
          if (used || j < w.parent_above) c.apart *= d.count;
          self(self, k + 1);
          c = saved;
        }
        digits[j] = -1;
      };
      classes(classes, 0);
    }
  } catch (const Unclosed& e) {
    throw SpecError(n.where, "--convention timeloop: tensor '" + name + "' at " + n.level + ": " + e.reason);
  }
  w.state.resize(w.instances.size());
  return w;
}

NodeTally timeloop_part(const Schedule& s, std::size_t node, const Part& part) {
  const StorageWindows& n = s.storages[node];
  const std::string& name = s.tensors[std::size_t(part.access->tensor)].name;
  const LeafSchedule& leaf = *part.leaf;
  const LeafTensor& access = *part.access;
  TimeloopWalk w = walk_of(s, node, part, false);
  w.tally.instances = n.instances;
  w.tally.write = part.write;
  w.tally.windows = 1;
  for (const TimeLevel& l : n.time_levels) w.tally.windows = narrowed(Wide(w.tally.windows) * l.count);
  try {
    Digits digits(n.loops_above, -1);
    w.walk(digits, 0, 1);
    if (part.write) {  // what an output's first updates fill without a read
      Digits all(n.loops_above, -1);
      distinct_walk(leaf, access, n.loops_above, all, 0, 1, w.tally.distinct);
    }
    // Innermost: no node below this one holds the tensor for the leaf.
    auto here = std::find(leaf.storages.begin(), leaf.storages.end(), int(node));
    w.tally.innermost = std::none_of(here + 1, leaf.storages.end(),
                                     [&](int m) { return s.storages[std::size_t(m)].holds(name); });
    if (w.tally.innermost) {
      w.tally.compute = compute_count(leaf, access, n.loops_above);
    }
  } catch (const Unclosed& e) {
    throw SpecError(n.where, "--convention timeloop: tensor '" + name + "' at " + n.level + ": " + e.reason);
  }
  return w.tally;
}

}  // namespace

void add_per_instance(const Schedule& s, const TraceOptions& options, MovementReport& report) {
  if (report.truncated) return;
  // Per (level, tensor) entry: the figures of its nodes below !Spatial loops, or left out.
  std::map<std::pair<std::size_t, std::size_t>, std::optional<PerInstance>> found;
  for (std::size_t node = 0; node < s.storages.size(); ++node) {
    const StorageWindows& n = s.storages[node];
    if (n.instances <= 1) continue;
    auto level = std::find_if(report.levels.begin(), report.levels.end(),
                              [&](const LevelMovement& l) { return l.level == n.level; });
    if (level == report.levels.end()) continue;
    for (const std::string& name : n.tensors) {
      auto entry = std::find_if(level->tensors.begin(), level->tensors.end(),
                                [&](const TensorMovement& t) { return t.tensor == name; });
      const int tensor = s.find_tensor(name);
      if (entry == level->tensors.end() || tensor < 0) continue;
      const std::pair<std::size_t, std::size_t> key{std::size_t(level - report.levels.begin()),
                                                    std::size_t(entry - level->tensors.begin())};
      const std::optional<PerInstance> p = per_instance_of(s, node, tensor, options.einsums);
      auto [it, fresh] = found.try_emplace(key, p);
      if (fresh) continue;
      if (!it->second || !p) {
        it->second.reset();
        continue;
      }
      it->second->instances = std::max(it->second->instances, p->instances);
      it->second->max_tile = std::max(it->second->max_tile, p->max_tile);
      const Wide sum = Wide(it->second->fills) + p->fills;
      if (sum > std::numeric_limits<std::int64_t>::max()) it->second.reset();
      else it->second->fills = std::int64_t(sum);
    }
  }
  for (const auto& [key, p] : found)
    if (p) report.levels[key.first].tensors[key.second].per_instance = p;
}

MovementReport timeloop_movement(const Schedule& s, const TraceOptions& options) {
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  if (selection.window.from != 0 || selection.window.to != s.n_timesteps)
    throw SpecError("--convention timeloop counts the whole run: no --from/--to, --max-timesteps or --shard");
  MovementReport report;
  report.convention = Convention::timeloop;
  report.n_timesteps = s.n_timesteps;
  auto kept = [&](const std::string& tensor) {
    return s.find_tensor(tensor) >= 0 &&
           (options.tensors.empty() ||
            std::find(options.tensors.begin(), options.tensors.end(), tensor) != options.tensors.end());
  };
  // The entries: levels in tree order, tensors in the order their nodes list them.
  auto entry_of = [&](const std::string& level, const std::string& tensor) -> TensorMovement& {
    auto l = std::find_if(report.levels.begin(), report.levels.end(),
                          [&](const LevelMovement& x) { return x.level == level; });
    auto t = std::find_if(l->tensors.begin(), l->tensors.end(), [&](const TensorMovement& x) { return x.tensor == tensor; });
    return *t;
  };
  for (const std::string& level : s.memory_levels) {
    LevelMovement lm;
    lm.level = level;
    for (const StorageWindows& n : s.storages) {
      if (n.level != level) continue;
      for (const std::string& tensor : n.tensors) {
        if (!kept(tensor)) continue;
        if (std::any_of(lm.tensors.begin(), lm.tensors.end(), [&](const TensorMovement& t) { return t.tensor == tensor; }))
          continue;
        TensorMovement t;
        t.tensor = tensor;
        t.instances = 0;
        const TensorInfo& info = s.tensors[std::size_t(s.find_tensor(tensor))];
        if (info.bits_per_value) t.bytes_per_value = (*info.bits_per_value + 7) / 8;
        lm.tensors.push_back(t);
      }
    }
    if (!lm.tensors.empty()) report.levels.push_back(std::move(lm));
  }
  // Per (level, tensor), summed over its nodes and their accesses: the elements the
  // written accesses' instances hold, the reads by children and compute of read
  // accesses, the updates of written ones.
  std::map<std::pair<std::string, std::string>, Wide> distinct, reads, updates;
  // Per (level, tensor): what its nodes ask of their parent (reads of read accesses,
  // updates of written ones, multicast and reduction applied), and the parent's level.
  std::map<std::pair<std::string, std::string>, Wide> asked_reads, asked_updates;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> parent_of;
  for (std::size_t node = 0; node < s.storages.size(); ++node) {
    const StorageWindows& n = s.storages[node];
    for (const std::string& tensor : n.tensors) {
      if (!kept(tensor)) continue;
      const int parent = s.parent(node, tensor);
      TensorMovement& m = entry_of(n.level, tensor);
      m.home = m.home || parent < 0;
      m.instances = std::max(m.instances, n.instances);
      Wide windows = 1;
      for (const TimeLevel& l : n.time_levels) windows *= l.count;
      m.windows = narrowed(Wide(m.windows) + windows);
      const auto key = std::make_pair(n.level, tensor);
      // Several accesses (Einsums) below one node: each counted as if its Einsum ran
      // alone, as Timeloop evaluates one Einsum at a time, and summed.
      for (const Part& part : parts_below(s, node, s.find_tensor(tensor), options.einsums)) {
        const NodeTally tally = timeloop_part(s, node, part);
        m.max_tile = std::max(m.max_tile, tally.max_tile);
        if (tally.write) distinct[key] += tally.distinct;
        if (parent >= 0) {
          // Fills: every delta an instance receives; for an output, less its first
          // touch of each element (Timeloop elides that read: an update, not a fill).
          m.fills = narrowed(Wide(m.fills) + tally.delivered - (tally.write ? tally.distinct : 0));
          const auto up = std::make_pair(s.storages[std::size_t(parent)].level, tensor);
          (tally.write ? updates : reads)[up] += tally.traffic;
          (tally.write ? asked_updates : asked_reads)[key] += tally.traffic;
          parent_of[key] = up;
        }
        if (tally.innermost) (tally.write ? updates : reads)[key] += tally.compute;
      }
    }
  }
  for (LevelMovement& l : report.levels)
    for (TensorMovement& t : l.tensors) {
      const auto key = std::make_pair(l.level, t.tensor);
      t.updates = narrowed(updates[key]);
      // An output's reads: its updates but the first of each element (read elision).
      t.reads = narrowed(reads[key] + std::max<Wide>(0, updates[key] - distinct[key]));
      if (t.instances == 0) t.instances = 1;
      // The parent's reads and updates for this level, as if it were the parent's only
      // child for the tensor: an output's first update of each of the parent's
      // elements is not read.
      t.parent_updates = narrowed(asked_updates[key]);
      const auto up = parent_of.find(key);
      t.parent_reads = narrowed(asked_reads[key] +
                                (up == parent_of.end() ? Wide(0)
                                                       : std::max<Wide>(0, asked_updates[key] - distinct[up->second])));
      if (t.bytes_per_value)  // the report's byte figures must fit too
        for (const std::int64_t n : {t.reads, t.updates, t.parent_reads, t.parent_updates})
          if (Wide(n) * *t.bytes_per_value > std::numeric_limits<std::int64_t>::max())
            throw SpecError("the bytes read or updated of tensor '" + t.tensor + "' at " + l.level +
                            " exceed 2^63 - 1");
    }
  return report;
}

}  // namespace looptrace

// ---- transfers in Timeloop's convention ----

namespace looptrace {

namespace {

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const noexcept {
    const std::uint64_t h = std::uint64_t(p.first) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(p.second) + 0x632BE59BD9B4E019ull);
    return std::size_t(h ^ (h >> 29));
  }
};

// What one instance that sent deltas (for its multicast group) holds back: updates wait
// until its tile changes.
struct PendingUpdates {
  Box last;                  // its tile when it last updated or sent
  std::vector<Box> pending;  // updates not sent yet: they go when the tile next changes
};

// (parent instance, element) that an update reached before, under one parent node, as
// bits (parent instances x tensor elements, where that is at most 2^30) or a set.
struct Marks {
  std::vector<std::uint64_t> bits;
  std::unordered_set<std::pair<std::int64_t, std::int64_t>, PairHash> set;
  std::int64_t elements = 0;  // the tensor's
  // Marks (parent, element) updated; whether it was before.
  bool update(std::int64_t parent, std::int64_t element) {
    if (!bits.empty()) {
      const std::uint64_t at = std::uint64_t(parent) * std::uint64_t(elements) + std::uint64_t(element);
      const std::uint64_t bit = std::uint64_t(1) << (at % 64);
      const bool before = (bits[at / 64] & bit) != 0;
      bits[at / 64] |= bit;
      return before;
    }
    return !set.emplace(parent, element).second;
  }
};

// One access below the child node, walked as movement walks it, with every instance's
// step at each of Timeloop's iterations kept.
struct SlotPart {
  Part part;
  std::size_t above = 0, parent_above = 0;
  std::vector<std::size_t> temporal, spatial;
  std::vector<InstanceClass> instances;  // every instance
  RepSteps reps;
  // Per instance: its multicast group (instances that differ only along !Spatial loops
  // below the parent whose variable the access does not use: one multicast, or one
  // reduced update, where they ask the same delta, as movement's walk counts it) and its
  // parent instance.
  std::vector<std::uint32_t> group_of;
  std::vector<std::int64_t> parent_of;
  // Written accesses: per instance that sent a group's updates, those not sent yet.
  std::map<std::size_t, PendingUpdates> pending;
  // Written accesses: what updates reached under the parent node (shared).
  struct Marks* marks = nullptr;
};

// The digits of Timeloop's iteration that stands for the window at temporal digits
// `real` (per temporal loop: the first, the second for the middle ones; past a partial
// tile, the last two), as movement's walk runs them (the !Spatial loops at the first
// instance). A digit of -1 stays -1 (the loop taken whole).
std::vector<std::int64_t> representative_of(const SlotPart& p, const std::vector<std::int64_t>& real) {
  const LeafSchedule& leaf = *p.part.leaf;
  Digits d(p.above, -1);
  for (std::size_t k = 0; k < p.spatial.size(); ++k) d[p.spatial[k]] = p.instances.front().digits[k];
  std::vector<std::int64_t> at;
  for (std::size_t k = 0; k < p.temporal.size(); ++k) {
    const std::size_t j = p.temporal[k];
    const std::int64_t x = real[k], n = leaf.loops[j].count;
    std::int64_t r = -1;
    if (x >= 0) {
      const std::vector<Eval> evals = evals_of(leaf, d, j);
      r = 0;
      if (evals.size() == 2) r = x == 0 ? 0 : 1;
      else if (evals.size() == 3) r = x;
      else if (evals.size() == 4) r = x == 0 ? 0 : x == n - 1 ? n - 1 : 1;
    }
    d[j] = r;
    at.push_back(r);
  }
  return at;
}

// Refuses (SpecError) an access whose windows' tiles are not all shaped as their
// representatives' (a window that runs an empty or shorter tile where Timeloop's
// iteration standing for it runs a whole one: loop iterations past the tile they are
// given): the representative's delta would have no place on the window's tile. Per
// rank variable, every combination of the loops above the node over it (their product
// at most 2^20; past that, the windows check as they come).
void check_representatives(const Schedule& s, std::size_t node, const SlotPart& p) {
  const LeafSchedule& leaf = *p.part.leaf;
  const StorageWindows& n = s.storages[node];
  for (std::size_t v = 0; v < leaf.variables.size(); ++v) {
    std::vector<std::size_t> over;
    Wide combos = 1;
    for (std::size_t j = 0; j < p.above; ++j)
      if (leaf.loops[j].variable == int(v)) over.push_back(j), combos *= leaf.loops[j].count;
    if (over.empty() || combos > Wide(1) << 20) continue;
    Digits d(p.above, 0);  // the other variables' loops at their first iteration: v's range is the same
    for (;;) {
      LeafRanges real, stand;
      ranges_of(leaf, d, p.above, real);
      std::vector<std::int64_t> temporal;
      for (const std::size_t j : p.temporal) temporal.push_back(d[j]);
      const std::vector<std::int64_t> at = representative_of(p, temporal);
      Digits e = d;
      for (std::size_t k = 0; k < p.temporal.size(); ++k) e[p.temporal[k]] = at[k];
      ranges_of(leaf, e, p.above, stand);
      if (real[v].size() != stand[v].size())
        throw SpecError(n.where, "transfers --convention timeloop: tensor '" +
                                     s.tensors[std::size_t(p.part.access->tensor)].name + "' at " + n.level +
                                     ": a window where rank variable '" + leaf.variables[v] + "' has " +
                                     std::to_string(real[v].size()) + " points stands, in Timeloop's count, for an "
                                     "iteration where it has " + std::to_string(stand[v].size()) +
                                     " (a loop's iterations run past the tile it is given): not supported");
      std::size_t k = over.size();
      while (k > 0 && ++d[over[k - 1]] == leaf.loops[over[k - 1]].count) d[over[--k]] = 0;
      if (k == 0) break;
    }
  }
}

// The requests of one window: reads at its start, and the updates sent at the end of
// the window before it (those of groups whose tile changes here).
struct WindowRequests {
  TimeRange window{0, 0};
  std::vector<movement_boxes::Box> reads, sent;
  std::vector<std::uint64_t> read_groups, sent_groups;
};

}  // namespace

struct TimeloopUpdates {
  std::map<int, Marks> by_parent;  // by parent node
};

struct TimeloopSlot::Impl {
  const Schedule* s = nullptr;
  std::shared_ptr<TimeloopUpdates> updates;
  std::size_t node = 0;
  std::vector<SlotPart> parts;
  std::vector<std::int64_t> digits, counts;  // the next window's temporal digits, outermost first
  bool more = true;                          // digits name a window still to step to
  bool done = false;
  // The current window; its writes are the updates the next window's tiles send (or,
  // at the last window, every one still pending).
  WindowRequests cur;
  std::vector<movement_boxes::Box> writes;
  std::vector<std::uint64_t> write_groups;

  std::vector<std::int64_t> representative(const SlotPart& p) const { return representative_of(p, digits); }

  static void add_boxes(const std::vector<Box>& boxes, std::vector<movement_boxes::Box>& out,
                        std::vector<std::uint64_t>& groups, std::uint64_t group) {
    for (const Box& b : boxes) {
      out.push_back(rows_of(b));
      groups.push_back(group);
    }
  }

  // The elements of `delta` (updated by one group under parent instance `parent`) that
  // an earlier update reached: read back, as runs along the innermost rank.
  void read_backs(SlotPart& p, std::int64_t parent, const std::vector<Box>& delta, std::uint64_t group,
                  WindowRequests& w) const {
    const TensorInfo& info = s->tensors[std::size_t(p.part.access->tensor)];
    for (const Box& b : delta) {
      if (size_of(b) == 0) continue;
      const std::size_t ranks = b.size();
      std::vector<std::int64_t> c(ranks);
      for (std::size_t r = 0; r < ranks; ++r) c[r] = b[r].from;
      for (;;) {
        std::int64_t base = 0;
        for (std::size_t r = 0; r + 1 < ranks; ++r) base += c[r] * info.strides[r];
        const Interval row = ranks == 0 ? Interval{0, 1} : b[ranks - 1];
        const std::int64_t stride = ranks == 0 ? 0 : info.strides[ranks - 1];
        std::int64_t run = -1;
        auto flush = [&](std::int64_t end) {
          if (run < 0) return;
          Box out;
          for (std::size_t r = 0; r + 1 < ranks; ++r) out.push_back(Interval{c[r], c[r] + 1});
          if (ranks > 0) out.push_back(Interval{run, end});
          w.reads.push_back(rows_of(out));
          w.read_groups.push_back(group);
          run = -1;
        };
        for (std::int64_t x = row.from; x < row.to; ++x) {
          const bool before = p.marks->update(parent, base + x * stride);
          if (before && run < 0) run = x;
          if (!before) flush(x);
        }
        flush(row.to);
        std::size_t r = ranks > 0 ? ranks - 1 : 0;
        while (r > 0 && ++c[r - 1] == b[r - 1].to) c[r - 1] = b[r - 1].from, --r;
        if (r == 0) break;
      }
    }
  }

  static std::uint64_t group_number(std::size_t part, std::uint32_t group) {
    return (std::uint64_t(part) << 32) | group;
  }

  // The window at `digits`.
  WindowRequests step() {
    WindowRequests w;
    const StorageWindows& n = s->storages[node];
    w.window.from = time_at(n.time_base, n.time_levels, [&](std::size_t l) { return digits[l]; });
    w.window.to = w.window.from + n.duration;
    for (std::size_t pi = 0; pi < parts.size(); ++pi) {
      SlotPart& p = parts[pi];
      const LeafSchedule& leaf = *p.part.leaf;
      const LeafTensor& access = *p.part.access;
      const std::vector<std::int64_t> at = representative(p);
      auto reps = p.reps.find(at);
      if (reps == p.reps.end() || reps->second.size() != p.instances.size())
        throw std::logic_error("transfers --convention timeloop: no iteration of Timeloop's stands for a window");
      Digits d(p.above, -1);
      for (std::size_t k = 0; k < p.temporal.size(); ++k) d[p.temporal[k]] = digits[k];
      auto tile_of_instance = [&](std::size_t i) {
        for (std::size_t k = 0; k < p.spatial.size(); ++k) d[p.spatial[k]] = p.instances[i].digits[k];
        return hull_tile_of(leaf, access, d);
      };
      // Updates wait in their instance until its tile changes.
      for (auto& [i, group] : p.pending) {
        if (group.pending.empty()) continue;
        const Box tile = tile_of_instance(i);
        if (size_of(tile) == 0 || tile == group.last) continue;
        add_boxes(group.pending, w.sent, w.sent_groups, group_number(pi, std::uint32_t(i)));
        group.pending.clear();
        group.last = tile;
      }
      // Each multicast group's delta once, as movement's walk counts it: instances under
      // one parent instance that differ only along !Spatial loops whose variable the
      // access does not use, and ask the same delta.
      std::set<std::pair<std::uint32_t, const std::vector<Box>*>> sent;
      for (std::size_t i = 0; i < p.instances.size(); ++i) {
        const RepStep& st = reps->second[i];
        if (st.delta.empty()) continue;
        bool fresh = true;
        for (const auto& [g, delta] : sent)
          if (g == p.group_of[i] && *delta == st.delta) fresh = false;
        if (!fresh) continue;
        sent.emplace(p.group_of[i], &st.delta);
        // The representative's delta, placed on this window's tile.
        const Box tile = tile_of_instance(i);
        bool alike = tile.size() == st.tile.size();
        for (std::size_t r = 0; alike && r < tile.size(); ++r) alike = tile[r].size() == st.tile[r].size();
        if (!alike)
          throw SpecError(n.where, "transfers --convention timeloop: tensor '" +
                                       s->tensors[std::size_t(access.tensor)].name + "' at " + n.level +
                                       ": a window's tile is not shaped as the one of Timeloop's iteration that "
                                       "stands for it: not supported");
        std::vector<Box> delta = st.delta;
        for (Box& b : delta)
          for (std::size_t r = 0; r < b.size(); ++r) {
            const std::int64_t shift = tile[r].from - st.tile[r].from;
            b[r].from += shift, b[r].to += shift;
          }
        const std::uint64_t number = group_number(pi, std::uint32_t(i));
        if (p.part.write) {
          read_backs(p, p.parent_of[i], delta, number, w);
          PendingUpdates& group = p.pending[i];
          group.pending.insert(group.pending.end(), delta.begin(), delta.end());
          group.last = tile;
        } else {
          add_boxes(delta, w.reads, w.read_groups, number);
        }
      }
    }
    return w;
  }

  // Steps to the window at `digits` and makes it the current one; its writes come from
  // the window after it (or, at the last, every update still pending).
  void advance() {
    if (started && !more_ahead) {
      done = true;
      return;
    }
    cur = started ? std::move(ahead) : step();
    started = true;
    next_digits();
    more_ahead = more;
    writes.clear(), write_groups.clear();
    if (more) {
      ahead = step();
      writes = std::move(ahead.sent), write_groups = std::move(ahead.sent_groups);
      ahead.sent.clear(), ahead.sent_groups.clear();
    } else {
      for (std::size_t pi = 0; pi < parts.size(); ++pi)
        for (auto& [i, group] : parts[pi].pending) {
          add_boxes(group.pending, writes, write_groups, group_number(pi, std::uint32_t(i)));
          group.pending.clear();
        }
    }
  }
  WindowRequests ahead;
  bool started = false, more_ahead = false;

  void next_digits() {
    std::size_t k = digits.size();
    while (k > 0 && ++digits[k - 1] == counts[k - 1]) digits[--k] = 0;
    if (k == 0) more = false;
  }
};

std::shared_ptr<TimeloopUpdates> make_timeloop_updates() { return std::make_shared<TimeloopUpdates>(); }

TimeloopSlot::TimeloopSlot(const Schedule& s, std::uint32_t storage, std::uint32_t tensor,
                           const std::vector<std::string>& einsums, std::shared_ptr<TimeloopUpdates> updates)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!updates) updates = make_timeloop_updates();
  m.updates = updates;
  m.s = &s;
  m.node = storage;
  const StorageWindows& n = s.storages[storage];
  const std::string& name = s.tensors[tensor].name;
  for (const Part& part : parts_below(s, storage, int(tensor), einsums)) {
    TimeloopWalk w = walk_of(s, storage, part, true);
    if (std::any_of(w.instances.begin(), w.instances.end(), [](const InstanceClass& c) { return c.count != 1; }))
      throw SpecError(n.where, "transfers --convention timeloop: more than 2^24 instances of " + n.level +
                                   " to follow one by one");
    if (w.temporal.size() != n.time_levels.size())
      throw std::logic_error("transfers --convention timeloop: the loops above " + n.level +
                             " are not its time levels");
    SlotPart p{part, w.above, w.parent_above, w.temporal, w.spatial, w.instances, {}, {}, {}, {}};
    std::map<std::vector<std::int64_t>, std::uint32_t> groups;
    for (const InstanceClass& c : p.instances) {
      std::vector<std::int64_t> key;
      std::int64_t parent = 0;
      for (std::size_t k = 0; k < p.spatial.size(); ++k) {
        const std::size_t j = p.spatial[k];
        key.push_back(j < p.parent_above || uses(*part.leaf, *part.access, j) ? c.digits[k] : -1);
        if (j < p.parent_above) parent = parent * part.leaf->loops[j].count + c.digits[k];
      }
      const auto g = groups.try_emplace(key, std::uint32_t(groups.size())).first;
      p.group_of.push_back(g->second);
      p.parent_of.push_back(parent);
    }
    if (part.write) {
      auto [at, fresh] = updates->by_parent.try_emplace(s.parent(storage, name));
      p.marks = &at->second;
      if (fresh) {
        Wide parents = 1;
        for (const std::size_t j : p.spatial)
          if (j < p.parent_above) parents *= part.leaf->loops[j].count;
        p.marks->elements = s.tensors[tensor].size;
        if (parents * p.marks->elements <= Wide(1) << 30)
          p.marks->bits.assign(std::size_t((parents * p.marks->elements + 63) / 64), 0);
      }
    }
    check_representatives(s, storage, p);
    w.record = &p.reps;
    try {
      Digits digits(n.loops_above, -1);
      w.walk(digits, 0, 1);
    } catch (const Unclosed& e) {
      throw SpecError(n.where, "--convention timeloop: tensor '" + name + "' at " + n.level + ": " + e.reason);
    }
    m.parts.push_back(std::move(p));
  }
  for (const TimeLevel& l : n.time_levels) {
    m.counts.push_back(l.count);
    if (l.count <= 0) m.done = true;
  }
  m.digits.assign(m.counts.size(), 0);
  if (m.parts.empty()) m.done = true;  // nothing below it accesses the tensor
  if (!m.done) m.advance();
}

TimeloopSlot::TimeloopSlot(TimeloopSlot&&) noexcept = default;
TimeloopSlot& TimeloopSlot::operator=(TimeloopSlot&&) noexcept = default;
TimeloopSlot::~TimeloopSlot() = default;

bool TimeloopSlot::done() const { return impl_->done; }
const TimeRange& TimeloopSlot::window() const { return impl_->cur.window; }
const std::vector<movement_boxes::Box>& TimeloopSlot::reads() const { return impl_->cur.reads; }
const std::vector<std::uint64_t>& TimeloopSlot::read_groups() const { return impl_->cur.read_groups; }
const std::vector<movement_boxes::Box>& TimeloopSlot::writes() const { return impl_->writes; }
const std::vector<std::uint64_t>& TimeloopSlot::write_groups() const { return impl_->write_groups; }
void TimeloopSlot::next() { impl_->advance(); }

}  // namespace looptrace
