// The mapping front end: AccelForge's LoopTree (`!Storage`, `!Temporal`, `!Spatial`,
// `!Compute`, `!Sequential`, ...) read into a Mapping.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "front_end.hpp"

namespace looptrace::front_end {

namespace {

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

std::vector<MappingNode> read_nodes(const Reader& in, const SpecNode& node, int depth);

void read_loop(const Reader& in, const SpecNode& node, MappingNode& out) {
  const std::string what = "a " + out.tag + " loop";
  const SpecNode* rv = node.find("rank_variable");
  if (!rv) in.fail(node, what + " needs 'rank_variable'");
  out.rank_variable = in.string(*rv, "rank_variable");
  const SpecNode* tile = node.find("tile_shape");
  if (!tile) in.fail(node, what + " needs 'tile_shape'");
  out.tile_shape = in.integer(*tile, "tile_shape");
  if (out.tile_shape <= 0)
    in.fail(*tile, "tile_shape must be a positive integer, not " + std::to_string(out.tile_shape));
  if (const SpecNode* initial = node.find("initial_tile_shape")) {
    out.initial_tile_shape = in.integer(*initial, "initial_tile_shape");
    if (*out.initial_tile_shape <= 0)
      in.fail(*initial, "initial_tile_shape must be a positive integer, not " + std::to_string(*out.initial_tile_shape));
  }
}

MappingNode read_node(const Reader& in, const SpecNode& node, int depth) {
  if (depth > 200) in.fail(node, "the mapping is nested more than 200 levels deep");
  if (++in.mapping_nodes > kMaxMappingNodes)
    in.fail(node, "the mapping has more than " + std::to_string(kMaxMappingNodes) +
                      " nodes (do YAML aliases repeat a subtree?)");
  const std::string& tag = node.tag;
  if (tag.empty() || tag == "!")
    in.fail(node, "a mapping node needs a tag such as !Storage, !Temporal, !Spatial, "
                  "!Compute, !Nested, !Sequential or !Pipeline");
  const std::string name = tag[0] == '!' ? tag.substr(1) : tag;
  const TagInfo* info = nullptr;
  for (const auto& t : kTags)
    if (name == t.tag) info = &t;
  if (!info) {
    std::vector<std::string> tags;
    for (const auto& t : kTags) tags.emplace_back(t.tag);
    in.fail(node, "unknown node tag '" + tag + "'" + did_you_mean(name, tags));
  }
  MappingNode out;
  out.kind = info->kind;
  out.tag = name;
  out.where = node.where;
  const std::string what = "a !" + name + " node";
  switch (out.kind) {
    case NodeKind::Storage: {
      in.check_keys(node, what, {"tensors", "component"}, {"persistent"});
      const SpecNode* tensors = node.find("tensors");
      if (!tensors) in.fail(node, what + " needs 'tensors'");
      in.expect_list(*tensors, "tensors");
      for (const auto& t : tensors->items) {
        std::string tensor = in.name(*t, "a tensor name");
        if (std::find(out.tensors.begin(), out.tensors.end(), tensor) != out.tensors.end())
          in.fail(*t, what + " names tensor '" + tensor + "' twice");  // a typo for another tensor?
        out.tensors.push_back(std::move(tensor));
      }
      if (const SpecNode* c = node.find("component")) out.component = in.string(*c, "component");
      break;
    }
    case NodeKind::Temporal:
      in.check_keys(node, what, {"rank_variable", "tile_shape", "initial_tile_shape"}, {"component"});
      read_loop(in, node, out);
      break;
    case NodeKind::Spatial:
      in.check_keys(node, what, {"rank_variable", "tile_shape", "initial_tile_shape", "name", "component"});
      read_loop(in, node, out);
      if (const SpecNode* n = node.find("name")) out.name = in.string(*n, "name");
      if (const SpecNode* c = node.find("component")) out.component = in.string(*c, "component");
      break;
    case NodeKind::Compute: {
      in.check_keys(node, what, {"einsum", "component"});
      const SpecNode* e = node.find("einsum");
      if (!e) in.fail(node, what + " needs 'einsum'");
      out.einsum = in.string(*e, "einsum");
      if (const SpecNode* c = node.find("component")) out.component = in.string(*c, "component");
      break;
    }
    case NodeKind::Nested:
    case NodeKind::Sequential:
    case NodeKind::Pipeline:
    case NodeKind::Parallel: {
      in.check_keys(node, what, {"nodes"}, {"component", "binding"});
      const SpecNode* nodes = node.find("nodes");
      if (!nodes) in.fail(node, what + " needs 'nodes'");
      out.children = read_nodes(in, *nodes, depth + 1);
      break;
    }
    case NodeKind::Ignored:
      break;
  }
  return out;
}

std::vector<MappingNode> read_nodes(const Reader& in, const SpecNode& node, int depth) {
  in.expect_list(node, "nodes");
  std::vector<MappingNode> out;
  for (const auto& child : node.items) out.push_back(read_node(in, *child, depth));
  return out;
}

}  // namespace

Mapping read_mapping(const Reader& in, const SpecNode& node) {
  in.check_keys(node, "the mapping", {"nodes"});
  const SpecNode* nodes = node.find("nodes");
  if (!nodes) in.fail(node, "the mapping needs 'nodes'");
  Mapping m;
  m.root.kind = NodeKind::Nested;
  m.root.tag = "Nested";
  m.root.where = node.where;
  m.root.children = read_nodes(in, *nodes, 1);
  return m;
}

}  // namespace looptrace::front_end
