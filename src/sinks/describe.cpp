#include "looptrace/sinks/describe.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>

#include "looptrace/compile/schedule.hpp"
#include "compile/compile.hpp"
#include "compile/looptree.hpp"
#include "compile/shapes.hpp"

namespace looptrace {

namespace {

using shapes::Wide;

using namespace looptree;

// Formats the compiler's per-node figures (LoopTreeTable) as the tree of DescribedNodes.
class TreeDescriber {
 public:
  explicit TreeDescriber(const LoopTreeTable& table) : table_(table) {}

  DescribedNode describe(const MappingNode& node) {
    DescribedNode out = base(node);
    switch (node.kind) {
      case NodeKind::Compute: out.duration = 1; break;
      case NodeKind::Nested: describe_nested(node, out); break;
      case NodeKind::Sequential:
      case NodeKind::Pipeline:
      case NodeKind::Parallel:
        out.duration = table_.durations.at(&node);
        // Children in order; a Storage directly under a split spans the split.
        for (const auto& c : node.children) out.children.push_back(is_branch(c) ? describe(c) : leaf(c, out.duration));
        break;
      default: break;
    }
    return out;
  }

 private:
  static DescribedNode base(const MappingNode& node) {
    DescribedNode out;
    out.kind = node.kind;
    out.tag = node.tag;
    out.where = node.where;
    out.component = node.component;
    if (node.kind == NodeKind::Storage) {
      out.level = node.component;
      out.tensors = node.tensors;
    }
    if (node.kind == NodeKind::Compute) out.einsum = node.einsum;
    if (node.is_loop()) {
      out.rank_variable = node.rank_variable;
      out.tile_shape = node.tile_shape;
      out.initial_tile_shape = node.initial_tile_shape.value_or(node.tile_shape);
      out.name = node.name;
    }
    return out;
  }

  // A Storage (or ignored node) lasting `duration`.
  static DescribedNode leaf(const MappingNode& node, std::int64_t duration) {
    DescribedNode out = base(node);
    if (node.kind == NodeKind::Storage) out.duration = duration;
    return out;
  }

  void describe_nested(const MappingNode& node, DescribedNode& out) {
    const MappingNode* cont = continuation_of(node);
    const std::vector<std::int64_t> after =
        durations_after(node, cont ? table_.durations.at(cont) : 0, table_.iterations);
    out.duration = after[0];
    for (std::size_t k = 0; k < node.children.size(); ++k) {
      const MappingNode& c = node.children[k];
      if (c.is_loop()) {
        DescribedNode loop = base(c);
        loop.iterations = table_.iterations.at(&c);
        loop.iteration_duration = after[k + 1];
        loop.duration = c.kind == NodeKind::Temporal ? after[k] : after[k + 1];
        out.children.push_back(std::move(loop));
      } else if (is_branch(c)) {  // the continuation, or after it: never reached
        out.children.push_back(describe(c));
      } else {
        out.children.push_back(leaf(c, after[k + 1]));
      }
    }
  }

  const LoopTreeTable& table_;
};

std::string join(const std::vector<std::string>& words, const std::string& sep = ", ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

nlohmann::ordered_json node_json(const DescribedNode& n) {
  nlohmann::ordered_json j;
  j["kind"] = n.tag;
  switch (n.kind) {
    case NodeKind::Temporal:
    case NodeKind::Spatial:
      j["rank_variable"] = n.rank_variable;
      j["tile_shape"] = n.tile_shape;
      j["initial_tile_shape"] = n.initial_tile_shape;
      j["iterations"] = n.iterations;
      j["iteration_duration"] = n.iteration_duration;
      j["duration"] = n.duration;
      if (!n.name.empty()) j["name"] = n.name;
      if (!n.component.empty()) j["component"] = n.component;
      break;
    case NodeKind::Storage:
      j["level"] = n.level;
      j["tensors"] = n.tensors;
      j["duration"] = n.duration;
      break;
    case NodeKind::Compute:
      j["einsum"] = n.einsum;
      if (!n.component.empty()) j["component"] = n.component;
      j["duration"] = n.duration;
      break;
    case NodeKind::Nested:
    case NodeKind::Sequential:
    case NodeKind::Pipeline:
    case NodeKind::Parallel: {
      j["duration"] = n.duration;
      nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
      for (const auto& c : n.children) nodes.push_back(node_json(c));
      j["nodes"] = std::move(nodes);
      break;
    }
    case NodeKind::Ignored: break;
  }
  return j;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (auto s : shape) out += (out.empty() ? "" : " x ") + std::to_string(s);
  return out;
}

std::string timesteps(std::int64_t n) { return std::to_string(n) + (n == 1 ? " timestep" : " timesteps"); }

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void node_text(const DescribedNode& n, int depth, std::string& out) {
  std::string line(std::size_t(2 + 2 * depth), ' ');
  switch (n.kind) {
    case NodeKind::Temporal:
    case NodeKind::Spatial:
      line += n.tag + " " + n.rank_variable + "  tile " + std::to_string(n.tile_shape);
      if (n.initial_tile_shape != n.tile_shape) line += " (first " + std::to_string(n.initial_tile_shape) + ")";
      line += "  " + std::to_string(n.iterations) + (n.iterations == 1 ? " iteration" : " iterations");
      if (n.kind == NodeKind::Temporal)
        line += " x " + std::to_string(n.iteration_duration) + " = " + timesteps(n.duration);
      else
        line += " at once, " + timesteps(n.duration);
      if (!n.name.empty()) line += "  [" + n.name + "]";
      break;
    case NodeKind::Storage:
      line += "Storage " + (n.level.empty() ? std::string("(no component)") : n.level) + ": " + join(n.tensors) +
              "  (windows of " + timesteps(n.duration) + ")";
      break;
    case NodeKind::Compute:
      line += "Compute " + n.einsum + (n.component.empty() ? "" : " on " + n.component);
      break;
    case NodeKind::Ignored:
      line += n.tag + " (ignored)";
      break;
    default:
      line += n.tag + "  " + timesteps(n.duration);
  }
  out += line + "\n";
  // Inside a Nested each node is the child of the one before: indent after each loop.
  int child_depth = depth + 1;
  for (const auto& c : n.children) {
    node_text(c, child_depth, out);
    if (n.kind == NodeKind::Nested && (c.kind == NodeKind::Temporal || c.kind == NodeKind::Spatial)) ++child_depth;
  }
}

}  // namespace

SpecDescription describe_spec(const Spec& spec) {
  SpecDescription d;
  // Every access of a tensor names the same ranks (AccelForge's Workload._validate).
  std::map<std::string, std::pair<const TensorAccess*, const Einsum*>> first;
  for (const auto& e : spec.workload.einsums)
    for (const auto& a : e.accesses) {
      auto [it, fresh] = first.emplace(a.tensor, std::make_pair(&a, &e));
      if (!fresh && it->second.first->ranks != a.ranks)
        throw SpecError(a.where, "tensor '" + a.tensor + "' has ranks [" + join(a.ranks) + "] in Einsum '" + e.name +
                                     "' but [" + join(it->second.first->ranks) + "] in Einsum '" +
                                     it->second.second->name + "'; every access of a tensor names the same ranks");
    }

  std::map<std::string, EinsumBox> boxes;
  for (const auto& e : spec.workload.einsums) {
    const EinsumBox& box = boxes.emplace(e.name, einsum_box(spec.workload, e)).first->second;
    DescribedEinsum de;
    de.name = e.name;
    for (std::size_t i = 0; i < box.variables.size(); ++i) de.rank_variables.emplace_back(box.variables[i], box.extent[i]);
    for (const auto& a : e.accesses) de.tensors.emplace_back(a.tensor, a.is_output);
    d.einsums.push_back(std::move(de));
  }

  // Nominal shapes: the image of the writers' boxes, intersected (the readers' if no
  // Einsum writes the tensor); each rank runs from 0 to the image's top.
  for (const auto& e : spec.workload.einsums)
    for (const auto& a : e.accesses) {
      if (std::any_of(d.tensors.begin(), d.tensors.end(), [&](const DescribedTensor& t) { return t.name == a.tensor; }))
        continue;
      DescribedTensor t;
      t.name = a.tensor;
      t.ranks = a.ranks;
      const std::vector<Wide> top = shapes::nominal_tops(spec.workload, a.tensor, a.ranks.size(),
                                                         [&](const Einsum& e2) -> const EinsumBox& { return boxes.at(e2.name); });
      for (const Wide hi : top) {
        if (hi + 1 > std::numeric_limits<std::int64_t>::max())
          throw SpecError(a.where, "tensor '" + a.tensor + "' is larger than 2^63 along a rank");
        t.shape.push_back(std::max<std::int64_t>(0, std::int64_t(hi + 1)));
      }
      d.tensors.push_back(std::move(t));
    }

  if (spec.has_mapping) {
    // What tracing checks, checked here too; the engine's count of timesteps.
    LoopTreeTable table;
    const Schedule schedule = compile_schedule(spec, table);
    d.mapping = TreeDescriber(table).describe(spec.mapping.root);
    d.n_timesteps = schedule.n_timesteps;
  }
  return d;
}

std::string describe_json(const SpecDescription& d, int indent) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json einsums = nlohmann::ordered_json::array();
  for (const auto& e : d.einsums) {
    nlohmann::ordered_json je;
    je["name"] = e.name;
    nlohmann::ordered_json rv = nlohmann::ordered_json::object();
    for (const auto& [v, extent] : e.rank_variables) rv[v] = extent;
    je["rank_variables"] = std::move(rv);
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (const auto& [t, output] : e.tensors) tensors.push_back({{"name", t}, {"output", output}});
    je["tensors"] = std::move(tensors);
    einsums.push_back(std::move(je));
  }
  j["einsums"] = std::move(einsums);
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& t : d.tensors) tensors[t.name] = {{"ranks", t.ranks}, {"shape", t.shape}};
  j["tensors"] = std::move(tensors);
  if (d.mapping) {
    nlohmann::ordered_json m = node_json(*d.mapping);
    m["n_timesteps"] = d.n_timesteps;
    j["mapping"] = std::move(m);
  }
  // Names come from user files: replace invalid UTF-8 rather than throw.
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string describe_text(const SpecDescription& d) {
  std::string out = "Einsums (" + std::to_string(d.einsums.size()) + "):\n";
  std::size_t name_width = 0, rv_width = 0;
  std::vector<std::string> rv_texts;
  for (const auto& e : d.einsums) {
    std::string rv;
    for (const auto& [v, extent] : e.rank_variables) rv += (rv.empty() ? "" : " ") + v + "=" + std::to_string(extent);
    rv_width = std::max(rv_width, rv.size());
    name_width = std::max(name_width, e.name.size());
    rv_texts.push_back(std::move(rv));
  }
  for (std::size_t i = 0; i < d.einsums.size(); ++i) {
    std::vector<std::string> inputs, outputs;
    for (const auto& [t, output] : d.einsums[i].tensors) (output ? outputs : inputs).push_back(t);
    out += "  " + pad(d.einsums[i].name, name_width) + "  " + pad(rv_texts[i], rv_width) + "  " + join(inputs) +
           " -> " + join(outputs) + "\n";
  }
  out += "Tensors (" + std::to_string(d.tensors.size()) + "):\n";
  std::size_t tensor_width = 0;
  for (const auto& t : d.tensors) tensor_width = std::max(tensor_width, t.name.size() + 2 + join(t.ranks).size());
  for (const auto& t : d.tensors)
    out += "  " + pad(t.name + "[" + join(t.ranks) + "]", tensor_width) + "  " + shape_text(t.shape) + "\n";
  if (d.mapping) {
    out += "Mapping (" + timesteps(d.n_timesteps) + "):\n";
    int depth = 0;
    for (const auto& c : d.mapping->children) {
      node_text(c, depth, out);
      if (c.kind == NodeKind::Temporal || c.kind == NodeKind::Spatial) ++depth;
    }
  }
  return out;
}

}  // namespace looptrace
