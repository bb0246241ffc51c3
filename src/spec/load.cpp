#include "looptrace/spec/load.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>

#include "looptrace/spec/concise_einsum.hpp"

namespace looptrace {

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Storage: return "Storage";
    case NodeKind::Temporal: return "Temporal";
    case NodeKind::Spatial: return "Spatial";
    case NodeKind::Compute: return "Compute";
    case NodeKind::Nested: return "Nested";
    case NodeKind::Sequential: return "Sequential";
    case NodeKind::Pipeline: return "Pipeline";
    case NodeKind::Parallel: return "Parallel";
    case NodeKind::Ignored: return "Ignored";
  }
  return "?";
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the nearest candidate, or "" when nothing is close.
std::string suggestion(std::string_view word, std::initializer_list<const char*> candidates) {
  std::string best;
  std::size_t best_distance = word.size() / 2 + 2;
  for (const char* c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) { best_distance = d; best = c; }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string join(std::initializer_list<const char*> words) {
  std::string out;
  for (const char* w : words) out += (out.empty() ? "" : ", ") + std::string(w);
  return out;
}

// YAML aliases can repeat a subtree many times over ("billion laughs"); reading stops
// after this many mapping nodes, far more than any real mapping has.
constexpr std::size_t kMaxMappingNodes = 100'000;

// One file being read: turns yaml-cpp marks into locations in the file the user wrote.
struct Reader {
  std::string file;
  RenderedTemplate rendered;
  mutable std::size_t mapping_nodes = 0;  // read so far, against kMaxMappingNodes

  SourceLocation at(const YAML::Node& node) const { return at(node.Mark()); }
  SourceLocation at(const YAML::Mark& mark) const {
    if (mark.line < 0) return {file, 0, 0};
    return {file, rendered.source_line_of(mark.line + 1), mark.column + 1};
  }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw SpecError(at(node), message);
  }

  void expect_map(const YAML::Node& node, const std::string& what) const {
    if (!node.IsMap()) fail(node, what + " must be a mapping of keys to values");
  }
  void expect_list(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence()) fail(node, what + " must be a list");
  }

  // The text of a key, which must be a single value.
  std::string key(const YAML::Node& k, const std::string& what) const {
    if (!k.IsScalar()) fail(k, "a key in " + what + " must be a single value, not a list or mapping");
    return k.Scalar();
  }

  // yaml-cpp keeps both entries of a repeated key and node["k"] finds the first; a
  // repeated key is an error rather than a silently ignored value.
  void check_unique_keys(const YAML::Node& node, const std::string& what) const {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : node) {
      auto [it, fresh] = seen.emplace(key(kv.first, what), kv.first.Mark());
      if (!fresh)
        fail(kv.first, "key '" + it->first + "' appears twice in " + what + " (first at line " +
                           std::to_string(at(it->second).line) + ")");
    }
  }

  // Every key of `node` must be in `used` or `ignored`, and appear once.
  void check_keys(const YAML::Node& node, const std::string& what,
                  std::initializer_list<const char*> used,
                  std::initializer_list<const char*> ignored = {}) const {
    expect_map(node, what);
    check_unique_keys(node, what);
    for (const auto& kv : node) {
      std::string key = kv.first.Scalar();
      auto is = [&](const char* k) { return key == k; };
      if (std::any_of(used.begin(), used.end(), is) ||
          std::any_of(ignored.begin(), ignored.end(), is))
        continue;
      std::string hint = suggestion(key, used);
      fail(kv.first, "unknown key '" + key + "' in " + what + hint + "; expected one of: " +
                         join(used) + (ignored.size() ? ", " + join(ignored) : ""));
    }
  }

  std::string string(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) fail(node, what + " must be a single value");
    return node.Scalar();
  }
  std::int64_t integer(const YAML::Node& node, const std::string& what) const {
    std::string text = string(node, what);
    try {
      std::size_t used = 0;
      long long v = std::stoll(text, &used, 10);
      if (used == text.size()) return v;
    } catch (const std::out_of_range&) {
      fail(node, what + " must be an integer below 2^63, not '" + text + "'");
    } catch (const std::exception&) {
    }
    fail(node, what + " must be an integer, not '" + text + "'");
  }
  bool boolean(const YAML::Node& node, const std::string& what) const {
    std::string text = string(node, what);
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "true" || lower == "yes" || lower == "1") return true;
    if (lower == "false" || lower == "no" || lower == "0") return false;
    fail(node, what + " must be true or false, not '" + text + "'");
  }

  // An expression or constraint parse error, placed at its column within the scalar.
  [[noreturn]] void fail_expression(const YAML::Node& node, const ExpressionError& e,
                                    const std::string& what, const std::string& text) const {
    SourceLocation where = at(node);
    bool plain = node.Tag() == "?";  // unquoted: the text starts where the node does
    if (where.column > 0) where.column += static_cast<int>(e.column()) + (plain ? 0 : 1);
    throw SpecError(where, what + " '" + text + "': " + e.what());
  }
  AffineExpr affine(const YAML::Node& node, const std::string& what) const {
    std::string text = string(node, what);
    try {
      return parse_affine(text);
    } catch (const ExpressionError& e) {
      fail_expression(node, e, what, text);
    }
  }
  Constraint constraint(const YAML::Node& node, const std::string& what) const {
    std::string text = string(node, what);
    try {
      return {text, parse_constraint(text), at(node)};
    } catch (const ExpressionError& e) {
      fail_expression(node, e, what, text);
    }
  }
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

void add_rank_variables(Einsum& einsum) {
  for (const auto& access : einsum.accesses)
    for (const auto& expr : access.projection)
      for (const auto& [var, coef] : expr.terms)
        if (!einsum.has_rank_variable(var)) einsum.rank_variables.push_back(var);
}

std::vector<Constraint> read_constraints(const Reader& in, const YAML::Node& node,
                                         const std::string& what) {
  std::vector<Constraint> out;
  if (node.IsSequence()) {
    for (const auto& c : node) out.push_back(in.constraint(c, what));
  } else if (node.IsMap()) {
    in.check_unique_keys(node, "iteration_space_shape");
    for (const auto& kv : node) out.push_back(in.constraint(kv.second, what));
  } else if (!node.IsNull()) {
    in.fail(node, what + " must be a list of constraints or a mapping of rank variable to "
                         "constraint");
  }
  return out;
}

std::map<std::string, std::int64_t> read_rank_sizes(const Reader& in, const YAML::Node& node) {
  std::map<std::string, std::int64_t> out;
  if (node.IsNull()) return out;
  in.expect_map(node, "rank_sizes");
  in.check_unique_keys(node, "rank_sizes");
  for (const auto& kv : node) {
    std::int64_t size = in.integer(kv.second, "rank size of '" + kv.first.Scalar() + "'");
    if (size <= 0)
      in.fail(kv.second, "rank size of '" + kv.first.Scalar() + "' must be positive, not " +
                             std::to_string(size));
    out[kv.first.Scalar()] = size;
  }
  return out;
}

TensorAccess read_tensor_access(const Reader& in, const YAML::Node& node) {
  in.check_keys(node, "a tensor access", {"name", "projection", "output"},
                {"persistent", "bits_per_value", "backing_storage_size_scale"});
  TensorAccess access;
  access.where = in.at(node);
  if (!node["name"]) in.fail(node, "a tensor access needs a 'name'");
  access.tensor = in.string(node["name"], "the tensor name");
  if (node["output"]) access.is_output = in.boolean(node["output"], "'output'");
  const YAML::Node projection = node["projection"];
  if (!projection) in.fail(node, "tensor access '" + access.tensor + "' needs a 'projection'");
  if (projection.IsSequence()) {
    for (const auto& entry : projection) {
      AffineExpr e = in.affine(entry, "projection entry");
      if (e.terms.size() != 1 || e.terms[0].second != 1 || e.constant != 0)
        in.fail(entry, "a list projection entry must be one rank variable, not '" +
                           entry.Scalar() + "'; write a mapping {Rank: expression} instead");
      access.ranks.push_back(upper(e.terms[0].first));
      access.projection.push_back(std::move(e));
    }
  } else if (projection.IsMap()) {
    in.check_unique_keys(projection, "the projection of tensor '" + access.tensor + "'");
    for (const auto& kv : projection) {
      access.ranks.push_back(kv.first.Scalar());
      access.projection.push_back(in.affine(kv.second, "projection of rank '" + kv.first.Scalar() + "'"));
    }
  } else if (!projection.IsNull()) {
    in.fail(projection, "a projection must be a list of rank variables or a mapping "
                        "{Rank: expression}");
  }
  return access;
}

Einsum from_concise(const Reader& in, const YAML::Node& node) {
  std::string text = in.string(node, "a concise Einsum");
  ConciseEinsum parsed;
  try {
    parsed = parse_concise_einsum(text);
  } catch (const ExpressionError& e) {
    in.fail_expression(node, e, "Einsum", text);
  }
  Einsum einsum;
  einsum.name = parsed.name;
  einsum.where = in.at(node);
  for (auto& a : parsed.accesses)
    einsum.accesses.push_back({a.tensor, a.ranks, a.projection, a.is_output, einsum.where});
  return einsum;
}

Einsum read_einsum(const Reader& in, const YAML::Node& node) {
  if (node.IsScalar()) {
    Einsum e = from_concise(in, node);
    add_rank_variables(e);
    return e;
  }
  in.check_keys(node, "an Einsum",
                {"name", "tensor_accesses", "einsum", "iteration_space_shape", "rank_sizes"},
                {"is_copy_operation", "renames", "n_instances"});
  Einsum einsum;
  if (node["einsum"]) {
    einsum = from_concise(in, node["einsum"]);
    if (node["tensor_accesses"])
      in.fail(node["tensor_accesses"], "an Einsum has either 'einsum' or 'tensor_accesses', not both");
    if (node["name"]) einsum.name = in.string(node["name"], "the Einsum name");
  } else {
    if (!node["name"]) in.fail(node, "an Einsum needs a 'name' (or an 'einsum' string)");
    einsum.name = in.string(node["name"], "the Einsum name");
    const YAML::Node accesses = node["tensor_accesses"];
    if (!accesses) in.fail(node, "Einsum '" + einsum.name + "' needs 'tensor_accesses'");
    in.expect_list(accesses, "tensor_accesses");
    for (const auto& a : accesses) einsum.accesses.push_back(read_tensor_access(in, a));
  }
  einsum.where = in.at(node);
  if (node["iteration_space_shape"])
    einsum.constraints = read_constraints(in, node["iteration_space_shape"], "constraint");
  if (node["rank_sizes"]) einsum.rank_sizes = read_rank_sizes(in, node["rank_sizes"]);
  add_rank_variables(einsum);
  return einsum;
}

Workload read_workload(const Reader& in, const YAML::Node& node) {
  in.check_keys(node, "the workload", {"einsums", "iteration_space_shape", "rank_sizes"},
                {"bits_per_value", "persistent_tensors", "n_instances"});
  Workload w;
  w.where = in.at(node);
  if (node["iteration_space_shape"])
    w.constraints = read_constraints(in, node["iteration_space_shape"], "constraint");
  if (node["rank_sizes"]) w.rank_sizes = read_rank_sizes(in, node["rank_sizes"]);
  const YAML::Node einsums = node["einsums"];
  if (!einsums) in.fail(node, "the workload needs 'einsums'");
  in.expect_list(einsums, "einsums");
  for (const auto& e : einsums) {
    Einsum einsum = read_einsum(in, e);
    if (w.find_einsum(einsum.name))
      in.fail(e, "Einsum '" + einsum.name + "' is defined twice");
    w.einsums.push_back(std::move(einsum));
  }
  return w;
}

struct TagInfo {
  const char* tag;
  NodeKind kind;
};
constexpr TagInfo kTags[] = {
    {"Storage", NodeKind::Storage},       {"Temporal", NodeKind::Temporal},
    {"Spatial", NodeKind::Spatial},       {"Compute", NodeKind::Compute},
    {"Nested", NodeKind::Nested},         {"Sequential", NodeKind::Sequential},
    {"Pipeline", NodeKind::Pipeline},     {"Parallel", NodeKind::Parallel},
    {"Reservation", NodeKind::Ignored},   {"Toll", NodeKind::Ignored},
    {"TextBox", NodeKind::Ignored},
};

std::vector<MappingNode> read_nodes(const Reader& in, const YAML::Node& node, int depth);

void read_loop(const Reader& in, const YAML::Node& node, MappingNode& out) {
  const std::string what = "a " + out.tag + " loop";
  if (!node["rank_variable"]) in.fail(node, what + " needs 'rank_variable'");
  out.rank_variable = in.string(node["rank_variable"], "rank_variable");
  if (!node["tile_shape"]) in.fail(node, what + " needs 'tile_shape'");
  out.tile_shape = in.integer(node["tile_shape"], "tile_shape");
  if (out.tile_shape <= 0)
    in.fail(node["tile_shape"], "tile_shape must be a positive integer, not " +
                                    std::to_string(out.tile_shape));
  if (node["initial_tile_shape"]) {
    out.initial_tile_shape = in.integer(node["initial_tile_shape"], "initial_tile_shape");
    if (*out.initial_tile_shape <= 0)
      in.fail(node["initial_tile_shape"], "initial_tile_shape must be a positive integer, not " +
                                              std::to_string(*out.initial_tile_shape));
  }
}

MappingNode read_node(const Reader& in, const YAML::Node& node, int depth) {
  if (depth > 200) in.fail(node, "the mapping is nested more than 200 levels deep");
  if (++in.mapping_nodes > kMaxMappingNodes)
    in.fail(node, "the mapping has more than " + std::to_string(kMaxMappingNodes) +
                      " nodes (do YAML aliases repeat a subtree?)");
  std::string tag = node.Tag();
  if (tag.empty() || tag == "?" || tag == "!")
    in.fail(node, "a mapping node needs a tag such as !Storage, !Temporal, !Spatial, "
                  "!Compute, !Nested, !Sequential or !Pipeline");
  std::string name = tag[0] == '!' ? tag.substr(1) : tag;
  const TagInfo* info = nullptr;
  for (const auto& t : kTags)
    if (name == t.tag) info = &t;
  if (!info)
    in.fail(node, "unknown node tag '" + tag + "'" +
                      suggestion(name, {"Storage", "Temporal", "Spatial", "Compute", "Nested",
                                        "Sequential", "Pipeline", "Parallel", "Reservation",
                                        "Toll", "TextBox"}));
  MappingNode out;
  out.kind = info->kind;
  out.tag = name;
  out.where = in.at(node);
  const std::string what = "a !" + name + " node";
  switch (out.kind) {
    case NodeKind::Storage:
      in.check_keys(node, what, {"tensors", "component"});
      if (!node["tensors"]) in.fail(node, what + " needs 'tensors'");
      in.expect_list(node["tensors"], "tensors");
      for (const auto& t : node["tensors"]) out.tensors.push_back(in.string(t, "a tensor name"));
      if (node["component"]) out.component = in.string(node["component"], "component");
      break;
    case NodeKind::Temporal:
      in.check_keys(node, what, {"rank_variable", "tile_shape", "initial_tile_shape"}, {"component"});
      read_loop(in, node, out);
      break;
    case NodeKind::Spatial:
      in.check_keys(node, what,
                    {"rank_variable", "tile_shape", "initial_tile_shape", "name", "component"});
      read_loop(in, node, out);
      if (node["name"]) out.name = in.string(node["name"], "name");
      if (node["component"]) out.component = in.string(node["component"], "component");
      break;
    case NodeKind::Compute:
      in.check_keys(node, what, {"einsum", "component"});
      if (!node["einsum"]) in.fail(node, what + " needs 'einsum'");
      out.einsum = in.string(node["einsum"], "einsum");
      if (node["component"]) out.component = in.string(node["component"], "component");
      break;
    case NodeKind::Nested:
    case NodeKind::Sequential:
    case NodeKind::Pipeline:
    case NodeKind::Parallel:
      in.check_keys(node, what, {"nodes"}, {"component"});
      if (!node["nodes"]) in.fail(node, what + " needs 'nodes'");
      out.children = read_nodes(in, node["nodes"], depth + 1);
      break;
    case NodeKind::Ignored:
      break;
  }
  return out;
}

std::vector<MappingNode> read_nodes(const Reader& in, const YAML::Node& node, int depth) {
  in.expect_list(node, "nodes");
  std::vector<MappingNode> out;
  for (const auto& child : node) out.push_back(read_node(in, child, depth));
  return out;
}

Mapping read_mapping(const Reader& in, const YAML::Node& node) {
  in.check_keys(node, "the mapping", {"nodes"});
  if (!node["nodes"]) in.fail(node, "the mapping needs 'nodes'");
  Mapping m;
  m.root.kind = NodeKind::Nested;
  m.root.tag = "Nested";
  m.root.where = in.at(node);
  m.root.children = read_nodes(in, node["nodes"], 1);
  return m;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw SpecError(SourceLocation{path, 0, 0}, "cannot read the file");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

Spec load_spec_text(const std::vector<std::pair<std::string, std::string>>& sources,
                    const JinjaVariables& variables) {
  // Keep each file's Reader alive so that locations stay tied to their file.
  std::vector<Reader> readers;
  readers.reserve(sources.size());
  std::optional<std::pair<const Reader*, YAML::Node>> workload, mapping;
  for (const auto& [name, text] : sources) {
    readers.push_back({name, render_jinja(text, variables, name)});
    const Reader& in = readers.back();
    YAML::Node doc;
    try {
      doc = YAML::Load(in.rendered.text);
    } catch (const YAML::DeepRecursion& e) {  // yaml-cpp says only "bad file"
      throw SpecError(in.at(e.mark), "invalid YAML: lists and mappings nested too deeply (the limit is " +
                                         std::to_string(e.depth()) + " levels)");
    } catch (const YAML::Exception& e) {
      throw SpecError(in.at(e.mark), "invalid YAML: " + e.msg);
    }
    if (doc.IsNull()) continue;
    in.expect_map(doc, "a spec file");
    in.check_unique_keys(doc, "a spec file");
    for (const auto& kv : doc) {
      std::string key = kv.first.Scalar();
      if (key == "workload") workload.emplace(&in, kv.second);
      else if (key == "mapping") mapping.emplace(&in, kv.second);
    }
  }
  if (!workload) throw SpecError("no 'workload:' in the spec files");
  if (!mapping) throw SpecError("no 'mapping:' in the spec files");
  // Reading only inspects nodes of known kinds, but a yaml-cpp exception must still
  // come out as bad input in the file it was read from, never as an internal error.
  Spec spec;
  try {
    spec.workload = read_workload(*workload->first, workload->second);
  } catch (const YAML::Exception& e) {
    throw SpecError(workload->first->at(e.mark), "invalid YAML: " + e.msg);
  }
  try {
    spec.mapping = read_mapping(*mapping->first, mapping->second);
  } catch (const YAML::Exception& e) {
    throw SpecError(mapping->first->at(e.mark), "invalid YAML: " + e.msg);
  }
  return spec;
}

Spec load_spec(const std::vector<std::string>& files, const JinjaVariables& variables) {
  std::vector<std::pair<std::string, std::string>> sources;
  for (const auto& f : files) sources.emplace_back(f, read_file(f));
  return load_spec_text(sources, variables);
}

}  // namespace looptrace
