#include "looptrace/closed_form/counts.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "looptrace/support/error.hpp"
#include "looptrace/compile/time_odometer.hpp"
#include "compile/tiling.hpp"

namespace looptrace {

namespace {

using Wide = __int128;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Tile sets are kept as LeafIterations keeps them (the cut of tiling.hpp; a spatial
// loop keeps every non-empty sub-tile, each cut further by the loops inside it).
using Spans = std::vector<Interval>;  // sorted, disjoint (touching allowed before merging)
using DigitBox = std::vector<Interval>;  // per time level: the digits [from, to) a box of iterations takes

// Translated so the first span starts at 0: the size of any image is unchanged.
void normalize(Spans& s) {
  if (s.empty()) return;
  const std::int64_t d = s.front().from;
  for (auto& x : s) x = x.shifted(-d);
}

Spans merged(const Spans& s) {
  Spans out;
  for (const auto& x : s) append_merged(out, x);
  return out;
}

// The non-empty sub-tiles j of each span.
Spans cut(const Spans& given, const LoopLevel& l, std::int64_t j) {
  Spans out;
  for (const auto& x : given) {
    const Interval sub = tiling::sub_tile<Wide>(x, l, j);
    if (!sub.empty()) out.push_back(sub);
  }
  return out;
}

using Histogram = std::vector<std::pair<int, Wide>>;  // (id, how many digit combinations)

void add_to(Histogram& h, int id, Wide n) {
  for (auto& [k, m] : h)
    if (k == id) {
      m += n;
      return;
    }
  h.push_back({id, n});
}

}  // namespace

struct LeafCounter::Impl {
  enum class Kind { single, sum, general };
  struct Component {
    std::vector<int> vars;   // leaf variables, ascending
    std::vector<int> ranks;  // the tensor's ranks that read them
    Kind kind = Kind::single;
  };
  struct TensorPlan {
    std::vector<Component> components;
    std::vector<int> unused;  // variables no rank reads: they only gate computing
    bool enumerated = false;
  };

  const Schedule* schedule;
  const LeafSchedule* leaf;
  std::vector<bool> enabled;
  std::int64_t max_tile_points;
  std::size_t n_vars = 0;
  std::vector<std::vector<int>> chains;  // per variable: indices into leaf->loops
  std::vector<int> free_levels;          // time levels of loops over no variable of the leaf
  std::vector<int> initial_state;        // per variable: its whole extent
  bool never = false;                    // some variable has an empty extent
  std::vector<TensorPlan> plans;

  // Interned tiles: states are unmerged (a spatial loop's sub-tiles stay apart until the
  // loops inside it have cut them), shapes are merged point sets. Id 0 is empty.
  std::map<Spans, int> state_index;
  std::vector<Spans> states;
  std::vector<int> state_shape;  // -1 until known
  std::map<Spans, int> shape_index;
  std::vector<Spans> shapes;
  std::vector<std::int64_t> shape_card;
  std::map<std::pair<int, int>, int> spatial_memo;  // (state, loop) -> state
  std::map<std::vector<int>, std::int64_t> image_memo;  // (tensor, component, shapes...) -> size

  struct Acc {
    std::vector<Wide> accesses;
    Wide points = 0, computing = 0;
  };

  Impl(const Schedule& s, const LeafSchedule& l, std::vector<bool> en, std::int64_t limit)
      : schedule(&s), leaf(&l), enabled(std::move(en)), max_tile_points(limit) {
    n_vars = l.variables.size();
    enabled.resize(l.tensors.size(), true);
    chains.resize(n_vars);
    for (std::size_t li = 0; li < l.loops.size(); ++li) {
      const LoopLevel& loop = l.loops[li];
      if (loop.variable >= 0) chains[std::size_t(loop.variable)].push_back(int(li));
      else if (!loop.spatial) free_levels.push_back(loop.time_level);
    }
    states.push_back({});
    state_index[{}] = 0;
    state_shape.push_back(0);
    shapes.push_back({});
    shape_index[{}] = 0;
    shape_card.push_back(0);
    for (std::size_t v = 0; v < n_vars; ++v) {
      const std::int64_t e = l.extent[v];
      initial_state.push_back(e > 0 ? intern({{0, e}}) : 0);
      never = never || e <= 0;
    }
    for (const auto& lt : l.tensors) plans.push_back(plan(lt));
  }

  TensorPlan plan(const LeafTensor& lt) const {
    // Union-find over the variables through the ranks that read them.
    std::vector<int> parent(n_vars);
    for (std::size_t v = 0; v < n_vars; ++v) parent[v] = int(v);
    auto find = [&](int v) {
      while (parent[std::size_t(v)] != v) v = parent[std::size_t(v)] = parent[std::size_t(parent[std::size_t(v)])];
      return v;
    };
    std::vector<bool> read(n_vars, false);
    for (const auto& row : lt.coefficients) {
      int first = -1;
      for (std::size_t v = 0; v < n_vars; ++v) {
        if (row[v] == 0) continue;
        read[v] = true;
        if (first < 0) first = int(v);
        else parent[std::size_t(find(int(v)))] = find(first);
      }
    }
    TensorPlan p;
    std::map<int, std::size_t> component_of_root;
    for (std::size_t v = 0; v < n_vars; ++v) {
      if (!read[v]) {
        p.unused.push_back(int(v));
        continue;
      }
      auto [it, fresh] = component_of_root.try_emplace(find(int(v)), p.components.size());
      if (fresh) p.components.emplace_back();
      p.components[it->second].vars.push_back(int(v));
    }
    for (std::size_t r = 0; r < lt.coefficients.size(); ++r)
      for (std::size_t v = 0; v < n_vars; ++v)
        if (lt.coefficients[r][v] != 0) {
          p.components[component_of_root[find(int(v))]].ranks.push_back(int(r));
          break;
        }
    for (auto& c : p.components)
      c.kind = c.vars.size() == 1 ? Kind::single : c.ranks.size() == 1 ? Kind::sum : Kind::general;
    return p;
  }

  [[noreturn]] void overflow() const {
    throw SpecError(leaf->where, "counting Einsum '" + leaf->einsum +
                                     "' passes 2^63 - 1 (a count does not fit in 64 bits)");
  }
  [[noreturn]] void too_many(Wide n, const std::string& what) const {
    throw SpecError(leaf->where, "one timestep of Einsum '" + leaf->einsum + "' " + what + " " +
                                     std::to_string(std::int64_t(std::min(n, Wide(kMax)))) +
                                     " points, more than the limit of " +
                                     std::to_string(max_tile_points) + " (--max-tile-points)");
  }
  Wide mul(Wide a, Wide b) const {
    Wide r;
    if (__builtin_mul_overflow(a, b, &r) || r > kMax) overflow();
    return r;
  }

  int intern(Spans s) {
    normalize(s);
    auto [it, fresh] = state_index.try_emplace(s, int(states.size()));
    if (fresh) {
      states.push_back(std::move(s));
      state_shape.push_back(-1);
    }
    return it->second;
  }

  int shape_of(int state) {
    if (state_shape[std::size_t(state)] >= 0) return state_shape[std::size_t(state)];
    Spans m = merged(states[std::size_t(state)]);
    normalize(m);
    auto [it, fresh] = shape_index.try_emplace(m, int(shapes.size()));
    if (fresh) {
      shape_card.push_back(cardinality(m));
      shapes.push_back(std::move(m));
    }
    return state_shape[std::size_t(state)] = it->second;
  }

  int spatial(int state, int li) {
    if (state == 0) return 0;
    auto memo = spatial_memo.find({state, li});
    if (memo != spatial_memo.end()) return memo->second;
    const LoopLevel& l = leaf->loops[std::size_t(li)];
    const Spans given = states[std::size_t(state)];
    Spans out;
    for (const auto& x : given) {
      const Wide n = tiling::tiles_within<Wide>(x.size(), l);
      if (Wide(out.size()) + n > max_tile_points) too_many(Wide(out.size()) + n, "covers at least");
      for (std::int64_t j = 0; j < std::int64_t(n); ++j) {
        Spans sub = cut({x}, l, j);
        out.insert(out.end(), sub.begin(), sub.end());
      }
    }
    const int id = intern(std::move(out));
    spatial_memo[{state, li}] = id;
    return id;
  }

  // The states that digits [d.from, d.to) of a temporal loop cut `state` into, with how many
  // digits give each: between consecutive breakpoints every span's sub-tile is of one
  // class (the first, full, partial, empty), so one digit stands for the segment.
  void temporal(int state, const LoopLevel& l, const Interval& d, Histogram& out) {
    out.clear();
    if (state == 0) {
      out.push_back({0, Wide(d.to) - d.from});
      return;
    }
    const Spans given = states[std::size_t(state)];
    std::vector<std::int64_t> cuts{d.from, d.to};
    auto breakpoint = [&](Wide j) {
      if (j > d.from && j < d.to) cuts.push_back(std::int64_t(j));
    };
    breakpoint(1);
    for (const auto& x : given) {
      breakpoint(tiling::first_not_full<Wide>(x.size(), l));
      breakpoint(tiling::tile_count<Wide>(x.size(), l));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k)
      add_to(out, intern(cut(given, l, cuts[k])), Wide(cuts[k + 1]) - cuts[k]);
  }

  // The shapes variable v's tile takes over a box of digits.
  void histogram(std::size_t v, const DigitBox& box,
                 Histogram& out) {
    Histogram cur{{initial_state[v], 1}}, next, step;
    for (int li : chains[v]) {
      const LoopLevel& l = leaf->loops[std::size_t(li)];
      next.clear();
      for (const auto& [st, m] : cur) {
        if (l.spatial) {
          add_to(next, spatial(st, li), m);
          continue;
        }
        temporal(st, l, box[std::size_t(l.time_level)], step);
        for (const auto& [st2, k] : step) add_to(next, st2, m * k);
      }
      cur.swap(next);
    }
    out.clear();
    for (const auto& [st, m] : cur) add_to(out, shape_of(st), m);
  }

  // The size of one component's image for one shape per variable.
  std::int64_t image(std::size_t k, std::size_t c, const std::vector<int>& shape_ids) {
    std::vector<int> key{int(k), int(c)};
    key.insert(key.end(), shape_ids.begin(), shape_ids.end());
    auto memo = image_memo.find(key);
    if (memo != image_memo.end()) return memo->second;
    const LeafTensor& lt = leaf->tensors[k];
    TensorPlan& plan = plans[k];
    const Component& comp = plan.components[c];
    std::int64_t size = 0;
    if (comp.kind == Kind::sum) {
      const auto& row = lt.coefficients[std::size_t(comp.ranks[0])];
      bool unit = true;
      for (int v : comp.vars) unit = unit && (row[std::size_t(v)] == 1 || row[std::size_t(v)] == -1);
      if (!unit) plan.enumerated = true;
      size = unit ? unit_sum_size(comp, row, shape_ids) : projected_sum_size(comp, row, shape_ids);
    } else {
      plan.enumerated = true;
      size = distinct_tuples(lt, comp, shape_ids);
    }
    image_memo.emplace(std::move(key), size);
    return size;
  }

  // A sum of unit-coefficient interval sets is a union of interval sums.
  std::int64_t unit_sum_size(const Component& comp, const std::vector<std::int64_t>& row,
                             const std::vector<int>& shape_ids) const {
    Spans acc{{0, 1}};
    for (std::size_t i = 0; i < comp.vars.size(); ++i) {
      Spans s = shapes[std::size_t(shape_ids[i])];
      if (row[std::size_t(comp.vars[i])] < 0) {
        for (auto& x : s) x = {-(x.to - 1), -x.from + 1};
        std::reverse(s.begin(), s.end());
      }
      if (Wide(acc.size()) * Wide(s.size()) > max_tile_points) too_many(Wide(acc.size()) * Wide(s.size()), "sums over");
      Spans next;
      for (const auto& a : acc)
        for (const auto& b : s) next.push_back({a.from + b.from, a.to + b.to - 1});
      std::sort(next.begin(), next.end());
      acc = merged(next);
    }
    return cardinality(acc);
  }

  // A strided sum: every value projected, then the distinct ones counted.
  std::int64_t projected_sum_size(const Component& comp, const std::vector<std::int64_t>& row,
                                  const std::vector<int>& shape_ids) const {
    std::vector<std::int64_t> acc{0}, next;
    for (std::size_t i = 0; i < comp.vars.size(); ++i) {
      const Spans& s = shapes[std::size_t(shape_ids[i])];
      const std::int64_t coef = row[std::size_t(comp.vars[i])];
      const Wide n = Wide(acc.size()) * shape_card[std::size_t(shape_ids[i])];
      if (n > max_tile_points) too_many(n, "projects");
      next.clear();
      for (std::int64_t a : acc)
        for (const auto& x : s)
          for (std::int64_t p = x.from; p < x.to; ++p) next.push_back(a + coef * p);
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      acc.swap(next);
    }
    return std::int64_t(acc.size());
  }

  // Several ranks share variables: project every point and count distinct tuples.
  std::int64_t distinct_tuples(const LeafTensor& lt, const Component& comp, const std::vector<int>& shape_ids) const {
    Wide n = 1;
    for (int id : shape_ids) n *= shape_card[std::size_t(id)];
    if (n > max_tile_points) too_many(n, "projects");
    const std::size_t R = comp.ranks.size(), V = comp.vars.size();
    std::vector<std::int64_t> tuples;
    tuples.reserve(std::size_t(n) * R);
    std::vector<std::int64_t> x(V);
    auto visit = [&](auto&& self, std::size_t i) -> void {
      if (i == V) {
        for (int r : comp.ranks) {
          std::int64_t value = 0;
          for (std::size_t u = 0; u < V; ++u) value += lt.coefficients[std::size_t(r)][std::size_t(comp.vars[u])] * x[u];
          tuples.push_back(value);
        }
        return;
      }
      for (const auto& s : shapes[std::size_t(shape_ids[i])])
        for (x[i] = s.from; x[i] < s.to; ++x[i]) self(self, i + 1);
    };
    visit(visit, 0);
    std::vector<std::size_t> order(tuples.size() / R);
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto less = [&](std::size_t a, std::size_t b) {
      return std::lexicographical_compare(tuples.begin() + std::ptrdiff_t(a * R), tuples.begin() + std::ptrdiff_t(a * R + R),
                                          tuples.begin() + std::ptrdiff_t(b * R), tuples.begin() + std::ptrdiff_t(b * R + R));
    };
    std::sort(order.begin(), order.end(), less);
    std::int64_t size = 0;
    for (std::size_t i = 0; i < order.size(); ++i)
      if (i == 0 || less(order[i - 1], order[i])) ++size;
    return size;
  }

  // Sum over the combinations of non-empty shapes of a component's variables.
  Wide component_sum(std::size_t k, std::size_t c, const std::vector<Histogram>& hist) {
    const Component& comp = plans[k].components[c];
    std::vector<int> ids(comp.vars.size());
    Wide total = 0;
    auto visit = [&](auto&& self, std::size_t i, Wide weight) -> void {
      if (i == comp.vars.size()) {
        total += mul(weight, image(k, c, ids));
        if (total > kMax) overflow();
        return;
      }
      for (const auto& [id, m] : hist[std::size_t(comp.vars[i])]) {
        if (id == 0) continue;
        ids[i] = id;
        self(self, i + 1, mul(weight, m));
      }
    };
    visit(visit, 0, 1);
    return total;
  }

  void add_box(const DigitBox& box, Acc& acc) {
    Wide free = 1;
    for (int tl : free_levels) free = mul(free, box[std::size_t(tl)].size());
    std::vector<Histogram> hist(n_vars);
    std::vector<Wide> nonempty(n_vars, 0), points(n_vars, 0);
    for (std::size_t v = 0; v < n_vars; ++v) {
      histogram(v, box, hist[v]);
      for (const auto& [id, m] : hist[v]) {
        if (id == 0) continue;
        nonempty[v] += m;
        points[v] += mul(m, shape_card[std::size_t(id)]);
        if (points[v] > kMax) overflow();
      }
      if (nonempty[v] == 0) return;  // the leaf never computes in this box
    }
    Wide computing = free, pts = free;
    for (std::size_t v = 0; v < n_vars; ++v) {
      computing = mul(computing, nonempty[v]);
      pts = mul(pts, points[v]);
    }
    acc.computing += computing;
    acc.points += pts;
    for (std::size_t k = 0; k < plans.size(); ++k) {
      if (!enabled[k]) continue;
      Wide n = free;
      for (int v : plans[k].unused) n = mul(n, nonempty[std::size_t(v)]);
      for (std::size_t c = 0; c < plans[k].components.size(); ++c) {
        const auto& comp = plans[k].components[c];
        n = mul(n, comp.kind == Kind::single ? points[std::size_t(comp.vars[0])]
                                             : component_sum(k, c, hist));
      }
      acc.accesses[k] += n;
      if (acc.accesses[k] > kMax) overflow();
    }
    if (acc.points > kMax || acc.computing > kMax) overflow();
  }

  std::int64_t time_of(const std::vector<std::int64_t>& digits) const {
    return time_at(leaf->time_base, leaf->time_levels, [&](std::size_t l) { return digits[l]; });
  }

  // The digits of the first timestep >= t; false when there is none.
  bool first_at_or_after(std::int64_t t, std::vector<std::int64_t>& digits) const {
    TimeOdometer odo = leaf->odometer();
    odo.seek(t);
    if (odo.done()) return false;
    digits.resize(odo.levels());
    for (std::size_t l = 0; l < odo.levels(); ++l) digits[l] = odo.digit(l);
    return true;
  }

  // The digits of the last timestep < t; false when there is none.
  bool last_before(std::int64_t t, std::vector<std::int64_t>& digits) const {
    const auto& lv = leaf->time_levels;
    if (!first_at_or_after(t, digits)) {
      digits.resize(lv.size());
      for (std::size_t l = 0; l < lv.size(); ++l) digits[l] = lv[l].count - 1;
      return true;  // every timestep comes before t
    }
    for (std::size_t l = digits.size(); l-- > 0;) {  // the odometer's predecessor
      if (digits[l] > 0) {
        --digits[l];
        return true;
      }
      digits[l] = lv[l].count - 1;
    }
    return false;
  }

  // Splits the digit tuples of the timesteps in `range` into O(depth) boxes: some outer
  // digits fixed, one in a sub-range, the inner ones free.
  std::vector<DigitBox> boxes(const TimeRange& range) const {
    std::vector<DigitBox> out;
    std::vector<std::int64_t> a, b;
    if (range.empty() || !first_at_or_after(range.from, a) || time_of(a) >= range.to ||
        !last_before(range.to, b))
      return out;
    const auto& lv = leaf->time_levels;
    const std::size_t T = lv.size();
    if (T == 0) return {{}};
    std::size_t d = 0;
    while (d < T && a[d] == b[d]) ++d;
    // Levels before k as in `prefix`, level k in `at`, the rest free; none if `at` is empty.
    auto box = [&](const std::vector<std::int64_t>& prefix, std::size_t k, const Interval& at) {
      if (at.empty()) return;
      DigitBox x(T);
      for (std::size_t l = 0; l < T; ++l)
        x[l] = l < k ? Interval::point(prefix[l]) : l == k ? at : Interval{0, lv[l].count};
      out.push_back(std::move(x));
    };
    if (d == T) {
      box(a, T - 1, Interval::point(a[T - 1]));
      return out;
    }
    if (d == T - 1) {
      box(a, d, {a[d], b[d] + 1});
      return out;
    }
    for (std::size_t k = T - 1; k > d; --k) box(a, k, {a[k] + (k == T - 1 ? 0 : 1), lv[k].count});
    box(a, d, {a[d] + 1, b[d]});
    for (std::size_t k = d + 1; k < T; ++k) box(b, k, {0, b[k] + (k == T - 1 ? 1 : 0)});
    return out;
  }

  // Walks the loops under `digits`: the first time level whose digit leaves its
  // variable's tile empty, or -1 when the leaf computes. Digits of time levels at or
  // past `maximize_from` (when >= 0) are first set to the largest that keep it
  // non-empty.
  int walk(std::vector<std::int64_t>& digits, int maximize_from) {
    std::vector<int> cur = initial_state;
    for (std::size_t li = 0; li < leaf->loops.size(); ++li) {
      const LoopLevel& l = leaf->loops[li];
      const int tl = l.time_level;
      const bool maximize = !l.spatial && maximize_from >= 0 && tl >= maximize_from;
      if (l.variable < 0) {
        if (maximize) digits[std::size_t(tl)] = l.count - 1;
        continue;
      }
      int& st = cur[std::size_t(l.variable)];
      if (l.spatial) {
        st = spatial(st, int(li));
        continue;
      }
      Wide bound = 0;
      for (const auto& x : states[std::size_t(st)]) bound = std::max(bound, tiling::tiles_within<Wide>(x.size(), l));
      if (maximize) digits[std::size_t(tl)] = std::int64_t(bound) - 1;
      if (digits[std::size_t(tl)] >= bound) return tl;
      st = intern(cut(states[std::size_t(st)], l, digits[std::size_t(tl)]));
    }
    return -1;
  }

  std::int64_t first_computing(const TimeRange& range) {
    std::vector<std::int64_t> a;
    if (!first_at_or_after(range.from, a)) return -1;
    for (;;) {
      if (time_of(a) >= range.to) return -1;
      const int l = walk(a, -1);
      if (l < 0) return time_of(a);
      // Every digit tuple with this prefix and a digit >= a[l] at l is empty: carry.
      for (std::size_t k = std::size_t(l); k < a.size(); ++k) a[k] = 0;
      int k = l - 1;
      for (; k >= 0; --k) {
        if (a[std::size_t(k)] + 1 < leaf->time_levels[std::size_t(k)].count) {
          ++a[std::size_t(k)];
          break;
        }
        a[std::size_t(k)] = 0;
      }
      if (k < 0) return -1;
    }
  }

  std::int64_t last_computing(const TimeRange& range) {
    std::vector<std::int64_t> b;
    if (!last_before(range.to, b)) return -1;
    const int l = walk(b, -1);
    if (l >= 0) walk(b, l);  // the largest computing tuple below b
    const std::int64_t t = time_of(b);
    return t >= range.from ? t : -1;
  }

  void add(const TimeRange& range, LeafTotals& totals) {
    totals.accesses.resize(plans.size(), 0);
    if (never || range.empty()) return;
    Acc acc;
    acc.accesses.assign(plans.size(), 0);
    for (const auto& box : boxes(range)) add_box(box, acc);
    auto add64 = [&](std::int64_t& into, Wide n) {
      if (Wide(into) + n > kMax) overflow();
      into += std::int64_t(n);
    };
    for (std::size_t k = 0; k < plans.size(); ++k) add64(totals.accesses[k], acc.accesses[k]);
    add64(totals.points, acc.points);
    add64(totals.computing, acc.computing);
    if (acc.computing == 0) return;
    if (range.to - range.from == 1) {
      if (totals.first < 0) totals.first = range.from;
      totals.last = range.from;
      return;
    }
    if (totals.first < 0) totals.first = first_computing(range);
    totals.last = last_computing(range);
  }
};

LeafCounter::LeafCounter(const Schedule& schedule, const LeafSchedule& leaf,
                         std::vector<bool> enabled, std::int64_t max_tile_points)
    : impl_(std::make_unique<Impl>(schedule, leaf, std::move(enabled), max_tile_points)) {}
LeafCounter::LeafCounter(LeafCounter&&) noexcept = default;
LeafCounter& LeafCounter::operator=(LeafCounter&&) noexcept = default;
LeafCounter::~LeafCounter() = default;

const LeafSchedule& LeafCounter::leaf() const { return *impl_->leaf; }

void LeafCounter::add(const TimeRange& range, LeafTotals& totals) { impl_->add(range, totals); }

bool LeafCounter::enumerated(std::size_t k) const { return impl_->plans[k].enumerated; }

AccessCounter::AccessCounter(const Schedule& s, const std::vector<bool>& trace_enabled,
                             const std::vector<bool>& leaf_enabled, std::int64_t max_tile_points) {
  for (std::size_t i = 0; i < s.leaves.size(); ++i) {
    if (!leaf_enabled[i]) continue;
    std::vector<bool> enabled;
    for (const auto& lt : s.leaves[i].tensors) enabled.push_back(trace_enabled[std::size_t(lt.trace)]);
    leaves_.emplace_back(s, s.leaves[i], std::move(enabled), max_tile_points);
  }
}

std::int64_t AccessCounter::accesses(const TimeRange& range) {
  std::int64_t n = 0;
  for (auto& leaf : leaves_) {
    LeafTotals t;
    leaf.add(range, t);
    for (std::int64_t a : t.accesses)
      if (__builtin_add_overflow(n, a, &n)) n = kMax;
  }
  return n;
}

}  // namespace looptrace
