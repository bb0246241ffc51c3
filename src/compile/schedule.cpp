#include "looptrace/compile/schedule.hpp"

#include "looptrace/access.hpp"
#include "looptrace/frontend/load.hpp"
#include "compile.hpp"
#include "looptree.hpp"
#include "shapes.hpp"
#include "tiling.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace looptrace {

int NameIndex::find(const std::string& name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const auto& e, const std::string& n) { return e.first < n; });
  return it != entries_.end() && it->first == name ? it->second : -1;
}

void NameIndex::emplace(const std::string& name, int index) {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const auto& e, const std::string& n) { return e.first < n; });
  if (it == entries_.end() || it->first != name) entries_.insert(it, {name, index});
}

int Schedule::find_tensor(const std::string& name) const { return tensor_index.find(name); }
int Schedule::find_einsum(const std::string& name) const { return einsum_index.find(name); }

namespace detail {
void too_many_ranks(std::size_t ranks) {
  throw std::length_error("looptrace: coordinates of " + std::to_string(ranks) + " ranks; at most " +
                          std::to_string(kMaxRanks) + " are held");
}
}  // namespace detail

const ArchMemory* Schedule::memory(const std::string& level) const {
  for (const auto& [name, m] : memories)
    if (name == level) return &m;
  return nullptr;
}

bool StorageWindows::holds(const std::string& tensor) const {
  return std::find(tensors.begin(), tensors.end(), tensor) != tensors.end();
}

int Schedule::holder(std::size_t trace, const std::string& level) const {
  const TraceInfo& t = traces[trace];
  int found = -2;  // not yet seen a leaf of the trace
  for (const LeafSchedule& leaf : leaves) {
    if (leaf.einsum_index != t.einsum_index) continue;
    int h = -1;
    for (int s : leaf.storages)
      if ((level.empty() || storages[std::size_t(s)].level == level) && storages[std::size_t(s)].holds(t.tensor))
        h = s;
    if (found != -2 && h != found)
      throw SpecError(leaf.where, "Einsum '" + t.einsum + "' computes in two leaves held by different "
                                  "Storage nodes for tensor '" + t.tensor + "'; its accesses cannot be "
                                  "given to one tile window");
    found = h;
  }
  return found < 0 ? -1 : found;
}

int Schedule::parent(std::size_t storage, const std::string& tensor) const {
  for (const LeafSchedule& leaf : leaves) {
    auto at = std::find(leaf.storages.begin(), leaf.storages.end(), int(storage));
    if (at == leaf.storages.end()) continue;
    while (at != leaf.storages.begin())
      if (storages[std::size_t(*--at)].holds(tensor)) return *at;
    return -1;
  }
  return -1;
}

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const SourceLocation& where) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw SpecError(where, "the schedule has more than 2^63 timesteps (" + std::to_string(a) +
                               " x " + std::to_string(b) + " overflows 64 bits)");
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const SourceLocation& where) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw SpecError(where, "the schedule has more than 2^63 timesteps");
  return r;
}

using namespace tiling;

using namespace looptree;

struct Compiler {
  const Spec& spec;
  LoopTreeTable& table;  // the boxes first, then every node's figures (pass 1)
  std::unordered_map<const MappingNode*, std::uint32_t> loop_ids;  // StorageWindows::loop_ids
  Schedule out;

  NodeFigures& figures(const MappingNode* node) { return table.nodes[node]; }

  const Einsum& einsum_named(const std::string& name, const SourceLocation& where) {
    const Einsum* e = spec.workload.find_einsum(name);
    if (!e) {
      std::string known;
      for (const auto& x : spec.workload.einsums) known += (known.empty() ? "" : ", ") + x.name;
      throw SpecError(where, "!Compute names Einsum '" + name +
                                 "', which the workload does not define (it has: " + known + ")");
    }
    return *e;
  }

  const EinsumBox& box_of(const Einsum& e) const {
    return table.workload.boxes[std::size_t(&e - spec.workload.einsums.data())];
  }

  std::int64_t extent_of(const Einsum& e, const std::string& var) {
    const EinsumBox& box = box_of(e);
    for (std::size_t i = 0; i < box.variables.size(); ++i)
      if (box.variables[i] == var) return box.extent[i];
    return -1;
  }

  // Pass 1: every node's figures (loop counts, durations, windows). `enclosing` is the
  // loops on the path, outermost first.
  std::int64_t measure(const MappingNode& node, std::vector<const MappingNode*>& enclosing) {
    std::int64_t d = 0;
    switch (node.kind) {
      case NodeKind::Compute:
        d = 1;
        break;
      case NodeKind::Nested:
        d = measure_nested(node, enclosing);
        break;
      case NodeKind::Sequential:
        for (const auto& c : node.children)
          if (is_branch(c)) d = checked_add(d, measure(c, enclosing), c.where);
        break;
      case NodeKind::Pipeline:
      case NodeKind::Parallel:
        for (const auto& c : node.children)
          if (is_branch(c)) d = std::max(d, measure(c, enclosing));
        break;
      default:
        break;
    }
    if (node.is_split())  // a Storage directly under a split spans the split
      for (const auto& c : node.children)
        if (!looptree::is_branch(c)) figures(&c).duration = c.kind == NodeKind::Storage ? d : 0;
    figures(&node).duration = d;
    return d;
  }

  bool is_branch(const MappingNode& c) {
    if (c.is_loop())
      throw SpecError(c.where, "a !" + c.tag + " loop cannot stand directly under a split; "
                                               "put it in a !Nested branch");
    return c.kind == NodeKind::Nested || c.is_split() || c.kind == NodeKind::Compute;
  }

  std::int64_t measure_nested(const MappingNode& node, std::vector<const MappingNode*>& enclosing) {
    const MappingNode* cont = continuation_of(node);
    const MappingNode* compute = first_compute(cont);
    std::size_t pushed = 0;
    for (const auto& c : node.children) {  // each loop counted with the loops above it
      if (!c.is_loop()) continue;
      figures(&c).iterations = loop_count(c, compute, enclosing);
      enclosing.push_back(&c);
      ++pushed;
    }
    const std::int64_t inner = cont ? measure(*cont, enclosing) : 0;  // what follows each point
    enclosing.resize(enclosing.size() - pushed);
    // Branches after the continuation: no path reaches them, but every subcommand
    // compiles (and checks) them alike, and describe shows them.
    for (const auto& c : node.children)
      if (&c != cont && looptree::is_branch(c)) {
        std::vector<const MappingNode*> none;
        measure(c, none);
      }
    std::int64_t d = inner;
    for (const auto& c : node.children)
      if (c.kind == NodeKind::Temporal) d = checked_mul(d, figures(&c).iterations, c.where);
    record_children(node, inner);
    return d;
  }

  // The figures of a Nested node's loops and Storage nodes. `after`: the timesteps from
  // the start of child k to the end, for one iteration of the loops before k (the
  // product was checked above).
  void record_children(const MappingNode& node, std::int64_t inner) {
    std::int64_t after = inner;
    for (std::size_t k = node.children.size(); k-- > 0;) {
      const MappingNode& c = node.children[k];
      if (looptree::is_branch(c)) continue;  // measured
      NodeFigures& f = figures(&c);
      if (c.is_loop()) {
        f.iteration_duration = after;
        f.tile_shape = c.tile_shape;
        f.initial_tile_shape = c.initial_tile_shape.value_or(c.tile_shape);
        if (c.kind == NodeKind::Temporal) after *= f.iterations;
      }
      f.duration = c.kind == NodeKind::Storage || c.is_loop() ? after : 0;
    }
  }

  std::int64_t loop_count(const MappingNode& loop, const MappingNode* compute,
                          const std::vector<const MappingNode*>& enclosing) {
    for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it)
      if ((*it)->rank_variable == loop.rank_variable)
        return tile_count(std::max(stride_of(**it), initial_of(**it)), initial_of(loop),
                          stride_of(loop));
    if (!compute) return 1;  // nothing below it ever runs
    const Einsum& e = einsum_named(compute->einsum, compute->where);
    std::int64_t extent = extent_of(e, loop.rank_variable);
    if (extent < 0) {
      std::string vars;
      for (const auto& v : e.rank_variables) vars += (vars.empty() ? "" : ", ") + v;
      throw SpecError(loop.where, "!" + loop.tag + " loop over rank variable '" +
                                      loop.rank_variable + "', but Einsum '" + e.name +
                                      "' (the first below it) has no such rank variable (it has: " +
                                      vars + ")");
    }
    return tile_count(extent, initial_of(loop), stride_of(loop));
  }

  // Pass 2: leaves and storage windows.
  struct Context {
    std::vector<const MappingNode*> loops;  // on the path, outermost first
    std::int64_t time_base = 0;
    std::vector<TimeLevel> time_levels;
    std::vector<int> storages;  // Storage nodes above, outermost first (Schedule::storages)

    void shift(std::int64_t offset) {
      if (time_levels.empty()) time_base += offset;
      else time_levels.back().offset += offset;
    }
  };

  void build(const MappingNode& node, Context ctx) {
    switch (node.kind) {
      case NodeKind::Compute:
        add_leaf(node, ctx);
        break;
      case NodeKind::Nested:
        build_nested(node, std::move(ctx));
        break;
      case NodeKind::Sequential:
      case NodeKind::Pipeline:
      case NodeKind::Parallel: {
        std::int64_t offset = 0;
        const std::size_t first_leaf = out.leaves.size();
        std::vector<int> spanning;  // Storage nodes of the split: they hold for every branch
        for (const auto& c : node.children) {
          if (c.kind == NodeKind::Storage)
            if (int i = add_storage(c, ctx, figures(&c).duration); i >= 0) spanning.push_back(i);
          if (!is_branch(c)) continue;
          Context branch = ctx;
          branch.shift(offset);
          build(c, std::move(branch));
          if (node.kind == NodeKind::Sequential) offset += figures(&c).duration;
        }
        for (std::size_t l = first_leaf; l < out.leaves.size(); ++l) {
          auto& held = out.leaves[l].storages;
          held.insert(held.begin() + std::ptrdiff_t(ctx.storages.size()), spanning.begin(), spanning.end());
        }
        break;
      }
      default:
        break;
    }
  }

  void build_nested(const MappingNode& node, Context ctx) {
    for (const auto& c : node.children) {
      const NodeFigures& f = figures(&c);
      if (c.kind == NodeKind::Storage)
        if (int i = add_storage(c, ctx, f.duration); i >= 0) ctx.storages.push_back(i);
      if (!c.is_loop()) continue;
      ctx.loops.push_back(&c);
      if (c.kind == NodeKind::Temporal) ctx.time_levels.push_back({f.iterations, f.iteration_duration, 0});
    }
    if (const MappingNode* cont = continuation_of(node)) build(*cont, std::move(ctx));
  }

  // The temporal loops among `loops`, as ids that every node and leaf below one shares.
  std::vector<std::uint32_t> ids_of(const std::vector<const MappingNode*>& loops) {
    std::vector<std::uint32_t> ids;
    for (const MappingNode* loop : loops)
      if (loop->kind == NodeKind::Temporal)
        ids.push_back(loop_ids.try_emplace(loop, std::uint32_t(loop_ids.size())).first->second);
    return ids;
  }

  // Returns the storage's index, or -1 for a Storage without a component.
  int add_storage(const MappingNode& node, const Context& ctx, std::int64_t duration) {
    for (const auto& t : node.tensors)
      if (!tensor_exists(t))
        throw SpecError(node.where, "!Storage holds tensor '" + t +
                                        "', which no Einsum of the workload accesses");
    if (node.component.empty()) return -1;
    if (std::find(out.memory_levels.begin(), out.memory_levels.end(), node.component) ==
        out.memory_levels.end())
      out.memory_levels.push_back(node.component);
    out.storages.push_back(
        {node.component, node.tensors, ctx.time_base, ctx.time_levels, duration, node.where, ids_of(ctx.loops)});
    out.storages.back().loops_above = ctx.loops.size();
    for (const MappingNode* loop : ctx.loops)
      if (loop->kind == NodeKind::Spatial) {
        std::int64_t& n = out.storages.back().instances;
        if (__builtin_mul_overflow(n, figures(loop).iterations, &n)) n = std::numeric_limits<std::int64_t>::max();
      }
    return int(out.storages.size() - 1);
  }

  bool tensor_exists(const std::string& t) const {
    for (const auto& e : spec.workload.einsums)
      for (const auto& a : e.accesses)
        if (a.tensor == t) return true;
    return false;
  }

  // The arch's spatial dimension a !Spatial loop runs over: its name (and component,
  // when given) names one; nullptr when it names none or, by name alone, several.
  const ArchFanout* fanout_of(const MappingNode& loop) const {
    const ArchFanout* found = nullptr;
    for (const ArchFanout& f : spec.fanouts) {
      if (f.name != loop.name || (!loop.component.empty() && f.component != loop.component)) continue;
      if (found) return nullptr;
      found = &f;
    }
    return found;
  }

  // !Spatial loops over one spatial dimension, nested on the way to a leaf, multiply
  // their instances; the arch has `fanout` of them. Fails at the loop that passes it.
  void check_fanouts(const std::vector<const MappingNode*>& loops, const std::string& einsum) {
    if (spec.fanouts.empty()) return;
    std::vector<std::pair<const ArchFanout*, std::int64_t>> used;  // dimension, instances so far
    for (const MappingNode* loop : loops) {
      if (loop->kind != NodeKind::Spatial || loop->name.empty()) continue;
      const ArchFanout* dim = fanout_of(*loop);
      if (!dim) continue;
      auto it = std::find_if(used.begin(), used.end(), [&](const auto& u) { return u.first == dim; });
      if (it == used.end()) it = used.insert(used.end(), {dim, 1});
      const std::int64_t here = figures(loop).iterations, above = it->second;
      if (__builtin_mul_overflow(above, here, &it->second) || it->second > dim->fanout)
        throw SpecError(loop->where,
                        "the !Spatial loop over '" + loop->rank_variable + "' gives Einsum '" + einsum + "' " +
                            (above > 1 ? std::to_string(above) + " x " + std::to_string(here) + " instances (with the loops above)"
                                       : std::to_string(here) + " instances") +
                            " of '" + dim->name + "' of '" + dim->component + "', more than its fanout, " +
                            std::to_string(dim->fanout) + " (" + dim->where.str() + ")");
    }
  }

  void add_leaf(const MappingNode& node, const Context& ctx) {
    const Einsum& e = einsum_named(node.einsum, node.where);
    check_fanouts(ctx.loops, e.name);
    const EinsumBox& box = box_of(e);
    LeafSchedule leaf;
    leaf.einsum = e.name;
    leaf.einsum_index = int(&e - spec.workload.einsums.data());
    leaf.where = node.where;
    leaf.variables = box.variables;
    leaf.extent = box.extent;
    leaf.time_base = ctx.time_base;
    leaf.time_levels = ctx.time_levels;
    leaf.storages = ctx.storages;
    leaf.loop_ids = ids_of(ctx.loops);
    int time_level = 0;
    for (const MappingNode* loop : ctx.loops) {
      LoopLevel level;
      auto v = std::find(box.variables.begin(), box.variables.end(), loop->rank_variable);
      level.variable = v == box.variables.end() ? -1 : int(v - box.variables.begin());
      level.spatial = loop->kind == NodeKind::Spatial;
      level.time_level = level.spatial ? -1 : time_level++;
      level.count = figures(loop).iterations;
      level.tile_shape = stride_of(*loop);
      level.initial_tile_shape = initial_of(*loop);
      leaf.loops.push_back(level);
    }
    for (const auto& access : e.accesses) {
      LeafTensor lt;
      for (const auto& expr : access.projection) {
        std::vector<std::int64_t> row(box.variables.size(), 0);
        for (const auto& [var, coef] : expr.terms)
          row[std::find(box.variables.begin(), box.variables.end(), var) - box.variables.begin()] = coef;
        lt.coefficients.push_back(std::move(row));
        lt.constants.push_back(expr.constant);
      }
      for (std::size_t v = 0; v < box.variables.size(); ++v) {
        int ranks_using = 0;
        for (const auto& row : lt.coefficients) ranks_using += row[v] != 0;
        if (ranks_using > 1) lt.separable = false;
      }
      lt.trace = trace_index(e, access);
      lt.tensor = out.traces[lt.trace].tensor_index;
      leaf.tensors.push_back(std::move(lt));
    }
    out.leaves.push_back(std::move(leaf));
  }

  int trace_index(const Einsum& e, const TensorAccess& access) {
    for (std::size_t i = 0; i < out.traces.size(); ++i)
      if (out.traces[i].einsum == e.name && out.traces[i].tensor == access.tensor)
        return int(i);
    int tensor = out.find_tensor(access.tensor);
    if (tensor < 0) {
      tensor = int(out.tensors.size());
      out.tensor_index.emplace(access.tensor, tensor);
      out.tensors.push_back({access.tensor, {}, {}, {}, 1, spec.workload.bits_per_value_of(access.tensor)});
    }
    out.traces.push_back({e.name, access.tensor, access.is_output,
                          int(&e - spec.workload.einsums.data()), tensor});
    return int(out.traces.size() - 1);
  }

  void check_accesses() {
    for (const auto& e : spec.workload.einsums)
      for (std::size_t i = 0; i < e.accesses.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (e.accesses[i].tensor == e.accesses[j].tensor)
            throw SpecError(e.accesses[i].where, "Einsum '" + e.name + "' accesses tensor '" +
                                                     e.accesses[i].tensor + "' twice");
  }

  // Leaves compute element ids as constant + sum of coefficient * coordinate, folding
  // each rank's stride into the coefficients; every such product and partial sum must
  // fit in 64 bits (a huge coefficient on a variable of extent 1 can make the folded
  // coefficient overflow though every element id fits).
  void check_element_arithmetic() const {
    using Wide = __int128;
    for (const auto& leaf : out.leaves)
      for (std::size_t k = 0; k < leaf.tensors.size(); ++k) {
        const LeafTensor& lt = leaf.tensors[k];
        const TensorInfo& info = out.tensors[std::size_t(lt.tensor)];
        Wide total = 0;
        bool overflow = false;
        auto add = [&](std::int64_t coefficient, std::int64_t stride, std::int64_t span) {
          Wide term;
          const Wide c = coefficient < 0 ? -Wide(coefficient) : Wide(coefficient);
          overflow = overflow || __builtin_mul_overflow(c, Wide(stride), &term) ||
                     __builtin_mul_overflow(term, Wide(span), &term) ||
                     __builtin_add_overflow(total, term, &total) || total > kMax;
        };
        for (std::size_t r = 0; r < lt.coefficients.size(); ++r) {
          add(lt.constants[r], info.strides[r], 1);
          for (std::size_t v = 0; v < lt.coefficients[r].size(); ++v)
            add(lt.coefficients[r][v], info.strides[r], std::max<std::int64_t>(leaf.extent[v], 1));
        }
        if (overflow)
          throw SpecError(leaf.where, "the element ids of tensor '" + info.name + "' in Einsum '" +
                                          leaf.einsum + "' overflow 64 bits (a projection "
                                          "coefficient or constant is too large for its tensor)");
      }
  }

  // The largest coordinate a chain of loops over one variable visits inside [lo, hi).
  static std::int64_t max_visited(const std::vector<const LoopLevel*>& chain, std::size_t k,
                                  std::int64_t lo, std::int64_t hi) {
    if (lo >= hi) return -1;
    if (k == chain.size()) return hi - 1;
    const LoopLevel& l = *chain[k];
    std::int64_t best = -1;
    // Later tiles start later; the last two non-empty ones bound every other.
    // Tiles starting at or past `hi - lo` are empty; skip them in O(1), not one by one
    // (an inner loop under a far larger tile can have ~2^61 of them).
    const std::int64_t last = tiling::tiles_within(hi - lo, l) - 1;
    int tried = 0;
    for (std::int64_t j = last; j >= 0 && tried < 2; --j) {
      const Interval sub = tiling::sub_tile(Interval{lo, hi}, l, j);
      if (sub.empty()) continue;
      best = std::max(best, max_visited(chain, k + 1, sub.from, sub.to));
      ++tried;
    }
    return best;
  }

  void compute_shapes() {
    // The largest coordinate each leaf visits along each of its variables.
    std::map<std::string, std::vector<std::int64_t>> visited;  // einsum -> per variable
    for (const auto& leaf : out.leaves) {
      std::vector<std::int64_t> vmax(leaf.variables.size());
      for (std::size_t v = 0; v < leaf.variables.size(); ++v) {
        std::vector<const LoopLevel*> chain;
        for (const auto& l : leaf.loops)
          if (l.variable == int(v)) chain.push_back(&l);
        vmax[v] = max_visited(chain, 0, 0, leaf.extent[v]);
      }
      auto& seen = visited[leaf.einsum];
      if (seen.empty()) seen = vmax;
      for (std::size_t v = 0; v < vmax.size(); ++v) seen[v] = std::max(seen[v], vmax[v]);
    }
    for (auto& tensor : out.tensors) shape_tensor(tensor, visited);
  }

  void shape_tensor(TensorInfo& tensor,
                    const std::map<std::string, std::vector<std::int64_t>>& visited) {
    using Wide = __int128;
    const TensorAccess* naming = nullptr;
    std::vector<Wide> reached_hi;
    for (const auto& e : spec.workload.einsums) {
      for (const auto& a : e.accesses) {
        if (a.tensor != tensor.name) continue;
        if (!naming || (a.is_output && !naming->is_output)) naming = &a;
        reached_hi.resize(a.ranks.size(), -1);  // every access names the same ranks (the front end)
        const EinsumBox& box = box_of(e);
        auto seen = visited.find(e.name);
        for (std::size_t r = 0; r < a.ranks.size(); ++r) {
          Wide hi;
          bool overflow = !shapes::top_of(a.projection[r], box, hi);  // the nominal top: checked here
          Wide lo = a.projection[r].constant, reach = lo, reach_lo = lo;
          for (const auto& [var, coef] : a.projection[r].terms) {
            std::size_t v = std::find(box.variables.begin(), box.variables.end(), var) -
                            box.variables.begin();
            // |coef * top| < 2^124, but a sum of many such terms can pass 2^127.
            Wide top = box.extent[v] - 1;
            if (coef <= 0) overflow |= __builtin_add_overflow(lo, Wide(coef) * top, &lo);
            if (seen != visited.end()) {
              Wide vtop = seen->second[v];
              overflow |= __builtin_add_overflow(coef > 0 ? reach : reach_lo, Wide(coef) * vtop,
                                                 coef > 0 ? &reach : &reach_lo);
            }
            if (overflow)
              throw SpecError(a.where, "the projection of tensor '" + tensor.name + "' along rank '" +
                                           a.ranks[r] + "' (" + a.projection[r].str() +
                                           ") overflows 128-bit arithmetic in Einsum '" + e.name + "'");
          }
          if (lo < 0 || (seen != visited.end() && reach_lo < 0))
            throw SpecError(a.where, "the projection of tensor '" + tensor.name + "' along rank '" +
                                         a.ranks[r] + "' (" + a.projection[r].str() +
                                         ") reaches negative coordinates in Einsum '" + e.name + "'");
          if (seen != visited.end()) reached_hi[r] = std::max(reached_hi[r], reach);
        }
      }
    }
    const NominalTensor& nominal = table.workload.tensors[std::size_t(table.workload.tensor_index.find(tensor.name))];
    tensor.ranks = naming->ranks;
    if (tensor.ranks.size() > kMaxRanks)
      throw SpecError(naming->where, "tensor '" + tensor.name + "' has " +
                                         std::to_string(tensor.ranks.size()) +
                                         " ranks; looptrace handles at most " +
                                         std::to_string(kMaxRanks));
    tensor.shape.clear();
    Wide size = 1;
    for (std::size_t r = 0; r < nominal.shape.size(); ++r) {
      const Wide top = std::max(Wide(nominal.shape[r]) - 1, reached_hi[r]);
      if (top < 0)
        throw SpecError(naming->where, "tensor '" + tensor.name + "' is empty along rank '" +
                                           tensor.ranks[r] + "'");
      const Wide extent = std::min(top, Wide(kMax)) + 1;  // extent > kMax fails below
      size *= extent;
      if (size > kMax)
        throw SpecError(naming->where, "tensor '" + tensor.name + "' has more than 2^63 elements");
      tensor.shape.push_back(std::int64_t(extent));
    }
    tensor.size = std::int64_t(size);
    tensor.strides.assign(tensor.shape.size(), 1);
    for (std::size_t r = tensor.shape.size(); r-- > 1;)
      tensor.strides[r - 1] = tensor.strides[r] * tensor.shape[r];
  }
};

}  // namespace

namespace {

// The workload first (as describe without a mapping), then the LoopTree.
Schedule compile(const Spec& spec, LoopTreeTable& table) {
  table.workload = compile_workload(spec.workload);
  table.nodes.clear();
  Compiler c{spec, table, {}, {}};
  for (const auto& e : spec.workload.einsums) {
    c.out.einsum_index.emplace(e.name, int(c.out.einsums.size()));
    c.out.einsums.push_back(e.name);
  }
  c.check_accesses();
  std::vector<const MappingNode*> enclosing;
  c.out.n_timesteps = c.measure(spec.mapping.root, enclosing);
  c.out.memories.assign(spec.memories.begin(), spec.memories.end());
  c.build(spec.mapping.root, {});
  if (c.out.leaves.empty()) {  // nothing to trace: say so, not "the window [0, 0) is empty"
    std::string einsums;
    for (const auto& e : spec.workload.einsums) einsums += (einsums.empty() ? "'" : ", '") + e.name + "'";
    throw SpecError(spec.mapping.root.where, "the mapping computes nothing: it has no !Compute node" +
                                                 (einsums.empty() ? std::string() : " (Einsums " + einsums + " are unmapped)"));
  }
  c.compute_shapes();
  c.check_element_arithmetic();
  return std::move(c.out);
}

}  // namespace

WorkloadTable compile_workload(const Workload& w) {
  WorkloadTable t;
  for (const auto& e : w.einsums) t.boxes.push_back(einsum_box(w, e));
  auto box_of = [&](const Einsum& e) -> const EinsumBox& { return t.boxes[std::size_t(&e - w.einsums.data())]; };
  for (const auto& e : w.einsums)
    for (const auto& a : e.accesses) {
      if (t.tensor_index.find(a.tensor) >= 0) continue;
      NominalTensor n{a.tensor, a.ranks, {}};
      for (const shapes::Wide hi : shapes::nominal_tops(w, a.tensor, a.ranks.size(), box_of)) {
        if (hi + 1 > kMax) throw SpecError(a.where, "tensor '" + a.tensor + "' is larger than 2^63 along a rank");
        n.shape.push_back(std::max<std::int64_t>(0, std::int64_t(hi + 1)));
      }
      t.tensor_index.emplace(a.tensor, int(t.tensors.size()));
      t.tensors.push_back(std::move(n));
    }
  return t;
}

Schedule compile_schedule(const Spec& spec) {
  LoopTreeTable table;  // every subcommand compiles the same way: one set of checks
  return compile(spec, table);
}
Schedule compile_schedule(const Spec& spec, LoopTreeTable& table) { return compile(spec, table); }

void check_spatial_instances(const Schedule& s, std::int64_t max_tile_points,
                             const std::vector<std::string>& einsums) {
  for (const LeafSchedule& leaf : s.leaves) {
    if (!einsums.empty() && std::find(einsums.begin(), einsums.end(), leaf.einsum) == einsums.end()) continue;
    std::int64_t instances = 1;
    for (const LoopLevel& loop : leaf.loops) {
      if (!loop.spatial) continue;
      if (__builtin_mul_overflow(instances, loop.count, &instances) || instances > max_tile_points) {
        const std::string over =
            loop.variable < 0 ? "a rank variable Einsum '" + leaf.einsum + "' lacks"
                              : "'" + leaf.variables[std::size_t(loop.variable)] + "'";
        throw SpecError(leaf.where, "the !Spatial loop over " + over + " (" + std::to_string(loop.count) +
                                        " instances) gives Einsum '" + leaf.einsum + "' more than " +
                                        std::to_string(max_tile_points) +
                                        " spatial instances per timestep, the limit (--max-tile-points)");
      }
    }
  }
}

}  // namespace looptrace
