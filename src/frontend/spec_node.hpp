// The YAML of spec files as a tree that remembers where each node was written (file,
// line, column, and which file included it), after AccelForge's YAML steps: tags such
// as !include_loaded resolved, `<<` and `<<<` merged.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "jinja.hpp"

namespace looptrace {

struct SpecNode;
using SpecNodePtr = std::shared_ptr<const SpecNode>;

struct SpecNode {
  enum class Kind { Null, Scalar, Sequence, Map };
  Kind kind = Kind::Null;
  std::string tag;     // "" when untagged, else as written: "!Storage"
  std::string text;    // a scalar's text
  bool quoted = false;  // a quoted scalar is a string, never a number or an expression
  bool no_merge = false;  // !nomerge: a `<<<` merge leaves it as it is
  std::vector<SpecNodePtr> items;                            // Sequence
  std::vector<std::pair<SpecNodePtr, SpecNodePtr>> entries;  // Map: key, value, in order
  SourceLocation where;
  std::shared_ptr<const std::string> note;  // "included from a.yaml:3:1", or null

  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_sequence() const { return kind == Kind::Sequence; }
  bool is_map() const { return kind == Kind::Map; }
  // The value of a map's key (a scalar key with that text), or nullptr.
  const SpecNode* find(std::string_view key) const;
  // "file:line:column" plus the include note: what error messages name.
  std::string where_str() const;
};

// Throws SpecError at `node`, adding where its file was included from.
[[noreturn]] void fail_at(const SpecNode& node, const std::string& message);

// Where a line of rendered text came from.
struct RenderedSource {
  const RenderedTemplate* rendered;
  SourceLocation location(const YAML::Mark& mark) const;
  std::shared_ptr<const std::string> note(const YAML::Mark& mark) const;
};

// Counts nodes made from YAML (aliases repeat subtrees: "billion laughs").
struct NodeBudget {
  std::int64_t left;
  std::int64_t limit;
};

// Parses rendered YAML text into a tree; throws SpecError for invalid YAML or when the
// document expands (through aliases) to more nodes than the budget has left.
SpecNodePtr parse_yaml(const RenderedTemplate& rendered, NodeBudget& budget);

// A value of the Jinja data (-D values, variables) as a node at `where`.
SpecNodePtr node_from_value(const JinjaValue& v, const SpecNode& where, NodeBudget& budget);

// What `!include_loaded NAME.a.b` can refer to: the files include() loaded under NAME
// (several for include_all), or the file's template data.
struct IncludeResults {
  std::map<std::string, std::vector<SpecNodePtr>> loaded;  // NAME -> the loaded roots
  std::map<std::string, bool> several;                     // NAME came from include_all
  const JinjaVariables* data = nullptr;
};

// Replaces !include_loaded (and !include, !includedir through `load_file`, which loads
// a path relative to the including file) and applies `<<` and `<<<` merges, bottom up,
// as AccelForge's loader does.
using FileLoader = std::function<SpecNodePtr(const std::string& path, const SpecNode& at)>;
SpecNodePtr resolve_tags_and_merges(const SpecNodePtr& root, const IncludeResults& includes,
                                    const FileLoader& load_file, const std::string& directory,
                                    NodeBudget& budget);

}  // namespace looptrace
