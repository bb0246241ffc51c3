#include "looptrace/sinks/describe.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "looptrace/compile/schedule.hpp"
#include "compile/compile.hpp"
#include "support/text.hpp"

namespace looptrace {

namespace {

// The compiler's table (LoopTreeTable) as the tree of DescribedNodes: the names come
// from the mapping, every figure from the table.
class TreeDescriber {
 public:
  explicit TreeDescriber(const LoopTreeTable& table) : table_(table) {}

  DescribedNode describe(const MappingNode& node) const {
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
      out.name = node.name;
    }
    const NodeFigures& f = table_.nodes.at(&node);
    out.duration = f.duration;
    out.iterations = f.iterations;
    out.iteration_duration = f.iteration_duration;
    out.tile_shape = f.tile_shape;
    out.initial_tile_shape = f.initial_tile_shape;
    if (node.kind == NodeKind::Nested || node.is_split())
      for (const auto& c : node.children) out.children.push_back(describe(c));
    return out;
  }

 private:
  const LoopTreeTable& table_;
};

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
  LoopTreeTable table;
  if (spec.has_mapping) d.n_timesteps = compile_schedule(spec, table).n_timesteps;
  else table.workload = compile_workload(spec.workload);
  for (std::size_t i = 0; i < spec.workload.einsums.size(); ++i) {
    const Einsum& e = spec.workload.einsums[i];
    const EinsumBox& box = table.workload.boxes[i];
    DescribedEinsum de;
    de.name = e.name;
    for (std::size_t v = 0; v < box.variables.size(); ++v) de.rank_variables.emplace_back(box.variables[v], box.extent[v]);
    for (const auto& a : e.accesses) de.tensors.emplace_back(a.tensor, a.is_output);
    d.einsums.push_back(std::move(de));
  }
  for (const NominalTensor& t : table.workload.tensors) d.tensors.push_back({t.name, t.ranks, t.shape});
  if (spec.has_mapping) d.mapping = TreeDescriber(table).describe(spec.mapping.root);
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
