// The arch front end: the memory levels' sizes the schedule keeps, and the names
// (components, compute units, spatial dimensions) a mapping may use.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "front_end.hpp"

namespace looptrace::front_end {

namespace {

// A size that names tensor sets, evaluated for each Einsum as AccelForge does. One that
// fails (AccelForge evaluates the arch only when it models a mapping) stays
// unevaluated, with the reason.
void per_einsum_sizes(const Reader& in, const SpecNode& size, const SpecNode* variables, const Workload& workload,
                      ArchMemory& m) {
  const RankSizes numbers(in, nullptr, nullptr, variables);
  for (const Einsum& e : workload.einsums) {
    try {
      const EinsumSymbols symbols(workload, e, [&](std::string_view n) { return numbers.lookup(n); });
      const EinsumSymbols::Number n = symbols.evaluate_number(size.text);
      m.per_einsum.push_back({e.name, n.value, n.bits_of});
    } catch (const SetExpressionError& x) {
      m.per_einsum.clear();
      m.unevaluated = "in Einsum '" + e.name + "': " + x.what() +
                      (x.accelforge_error ? " (AccelForge fails on it too)" : " (looptrace cannot evaluate it)");
      return;
    }
  }
  if (workload.einsums.empty()) m.unevaluated = "the workload has no Einsum";
}

}  // namespace

// The `!Memory` nodes of the arch, wherever they nest, with their sizes in bits.
void read_memories(const Reader& in, const SpecNode& node, const SpecNode* variables, const Workload& workload,
                   std::map<std::string, ArchMemory>& out, int depth) {
  if (depth > 100) return;
  if (node.is_sequence())
    for (const auto& item : node.items) read_memories(in, *item, variables, workload, out, depth + 1);
  if (!node.is_map()) return;
  const SpecNode* name = node.find("name");
  const SpecNode* size = node.find("size");
  if (node.tag == "!Memory" && name && name->is_scalar() && size && size->is_scalar()) {
    ArchMemory m;
    m.size_text = size->text;
    m.where = size->where;
    std::string lower = size->text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "inf" || lower == ".inf" || lower == "infinity") {
      m.size_bits = std::numeric_limits<double>::infinity();
    } else {
      try {  // a number or an expression of numbers; else it needs AccelForge's context
        const JinjaValue v = RankSizes(in, nullptr, nullptr, variables).value(*size, "size of '" + name->text + "'");
        if (v.is_int()) m.size_bits = double(v.as_int());
        else if (v.is_float()) m.size_bits = v.as_float();
        else m.unevaluated = "it is " + v.type_name() + ", not a number";
      } catch (const SpecError&) {
        per_einsum_sizes(in, *size, variables, workload, m);
      }
    }
    if (const SpecNode* extra = node.find("extra_attributes_for_component_model"); extra && extra->is_map())
      if (const SpecNode* n = extra->find("n_banks"); n && n->is_scalar() && !n->text.empty() && n->text.size() < 10 &&
                                                     std::all_of(n->text.begin(), n->text.end(), ::isdigit) &&
                                                     std::stoll(n->text) > 0)
        m.banks = std::stoll(n->text);
    out.emplace(name->text, std::move(m));
  }
  for (const auto& [k, v] : node.entries) read_memories(in, *v, variables, workload, out, depth + 1);
}

namespace {

// The arch's components by name (!Memory, !Compute, !Container, !Toll, wherever they
// nest) and the spatial dimensions each gives ("spatial: [{name: X, fanout: 4}]").
struct SpatialDim {
  std::string name;
  const SpecNode* entry;  // {name: X, fanout: 4, ...}
};
struct ArchComponents {
  std::map<std::string, std::string> kind;                 // name -> tag, e.g. "!Memory"
  std::map<std::string, std::vector<SpatialDim>> spatial;  // name -> its spatial dimensions

  // The names of `component`'s spatial dimensions (every component's, if empty).
  std::vector<std::string> spatial_names(const std::string& component) const {
    std::vector<std::string> out;
    for (const auto& [c, dims] : spatial)
      if (component.empty() || c == component)
        for (const SpatialDim& d : dims) out.push_back(d.name);
    return out;
  }
};

void read_components(const SpecNode& node, ArchComponents& out, int depth) {
  if (depth > 100) return;
  if (node.is_sequence())
    for (const auto& item : node.items) read_components(*item, out, depth + 1);
  if (!node.is_map()) return;
  const SpecNode* name = node.find("name");
  if (!node.tag.empty() && node.tag != "!nomerge" && name && name->is_scalar()) {
    out.kind.emplace(name->text, node.tag);
    if (const SpecNode* spatial = node.find("spatial"); spatial && spatial->is_sequence())
      for (const auto& dim : spatial->items)
        if (const SpecNode* n = dim->is_map() ? dim->find("name") : nullptr; n && n->is_scalar())
          out.spatial[name->text].push_back({n->text, dim.get()});
  }
  for (const auto& [k, v] : node.entries) read_components(*v, out, depth + 1);
}

// Names a mapping node uses that the arch does not define: a Storage component that
// is no component of the arch, a Compute component that is no !Compute, a !Spatial
// whose name (or component) gives no such spatial dimension. Errors at the node.
void check_against_arch(const MappingNode& node, const ArchComponents& arch, const std::vector<std::string>& computes) {
  auto names = [](const std::map<std::string, std::string>& m) {
    std::vector<std::string> out;
    for (const auto& [k, v] : m) out.push_back(k);
    return out;
  };
  auto fail = [&](const std::string& message) { throw SpecError(node.where, message); };
  if (node.kind == NodeKind::Storage && !node.component.empty() && !arch.kind.count(node.component))
    fail("!Storage component '" + node.component + "' is not a component of the arch" +
         did_you_mean(node.component, names(arch.kind)) + " (the arch has: " + join(names(arch.kind)) + ")");
  if (node.kind == NodeKind::Compute && !node.component.empty() && !computes.empty() &&  // (an arch of memories only)
      std::find(computes.begin(), computes.end(), node.component) == computes.end())
    fail("!Compute component '" + node.component + "' is not a !Compute of the arch" +
         did_you_mean(node.component, computes) + " (its compute units: " + join(computes) + ")");
  if (node.kind == NodeKind::Spatial) {
    if (!node.component.empty() && !arch.kind.count(node.component))
      fail("!Spatial component '" + node.component + "' is not a component of the arch" +
           did_you_mean(node.component, names(arch.kind)));
    if (!node.name.empty()) {
      const std::vector<std::string> allowed = arch.spatial_names(node.component);
      if (std::find(allowed.begin(), allowed.end(), node.name) == allowed.end())
        fail("!Spatial name '" + node.name + "' is not a spatial dimension of " +
             (node.component.empty() ? std::string("the arch") : "'" + node.component + "'") +
             did_you_mean(node.name, allowed) +
             (allowed.empty() ? std::string(" (it has none)") : " (it has: " + join(allowed) + ")"));
    }
  }
  for (const MappingNode& child : node.children) check_against_arch(child, arch, computes);
}

}  // namespace

void check_mapping_against_arch(const SpecNode& arch_node, const Mapping& mapping) {
  ArchComponents arch;
  read_components(arch_node, arch, 0);
  if (arch.kind.empty()) return;  // no component to check against
  std::vector<std::string> computes;
  for (const auto& [name, tag] : arch.kind)
    if (tag == "!Compute") computes.push_back(name);
  check_against_arch(mapping.root, arch, computes);
}

std::vector<ArchFanout> read_fanouts(const Reader& in, const SpecNode& arch_node, const SpecNode* variables) {
  ArchComponents arch;
  read_components(arch_node, arch, 0);
  std::vector<ArchFanout> out;
  for (const auto& [component, dims] : arch.spatial)
    for (const auto& [name, entry] : dims) {
      const SpecNode* fanout = entry->find("fanout");
      if (!fanout || !fanout->is_scalar()) continue;
      const std::string what = "fanout of '" + name + "' of '" + component + "'";
      JinjaValue v;
      try {  // a number or an expression of numbers and variables; else not checked
        v = RankSizes(in, nullptr, nullptr, variables).value(*fanout, what);
      } catch (const SpecError&) {
        continue;
      }
      if (!v.is_int() || v.as_int() <= 0)
        in.fail(*fanout, "the " + what + " must be a positive integer, not " + v.repr() + " (from '" + fanout->text + "')");
      out.push_back({component, name, v.as_int(), fanout->where});
    }
  return out;
}

}  // namespace looptrace::front_end
