// What the spec's front ends (workload, mapping, arch) share: a Reader that checks
// keys and fails at the node it reads, and AccelForge's rank-size expressions; and the
// front ends' entry points, which load.cpp calls in order. Internal to src/frontend.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "jinja_internal.hpp"
#include "looptrace/frontend/load.hpp"
#include "spec_node.hpp"
#include "support/text.hpp"

namespace looptrace::front_end {

using jinja::did_you_mean;

// Mapping nodes read (aliases can repeat a subtree many times over).
constexpr std::size_t kMaxMappingNodes = 100'000;

inline void warn(Spec& spec, SourceLocation where, std::string message) {
  SpecWarning w;
  w.where = std::move(where);
  w.message = std::move(message);
  spec.warnings.push_back(std::move(w));
}

inline std::string kind_of(const SpecNode& n) {
  switch (n.kind) {
    case SpecNode::Kind::Null: return "empty";
    case SpecNode::Kind::Scalar: return "a single value";
    case SpecNode::Kind::Sequence: return "a list";
    case SpecNode::Kind::Map: return "a mapping";
  }
  return "?";
}

struct Reader {
  mutable std::size_t mapping_nodes = 0;  // read so far, against kMaxMappingNodes
  mutable std::vector<SpecWarning> warnings;  // what the readers note; load() keeps them

  [[noreturn]] void fail(const SpecNode& node, const std::string& message) const { fail_at(node, message); }

  void expect_map(const SpecNode& node, const std::string& what) const {
    if (!node.is_map()) fail(node, what + " must be a mapping of keys to values, not " + kind_of(node));
  }
  void expect_list(const SpecNode& node, const std::string& what) const {
    if (!node.is_sequence()) fail(node, what + " must be a list, not " + kind_of(node));
  }

  // The text of a key, which must be a single value.
  std::string key(const SpecNode& k, const std::string& what) const {
    if (!k.is_scalar() && !k.is_null()) fail(k, "a key in " + what + " must be a single value, not a list or mapping");
    return k.text;
  }

  // A repeated key is an error rather than a silently ignored value.
  void check_unique_keys(const SpecNode& node, const std::string& what) const {
    std::map<std::string, const SpecNode*> seen;
    for (const auto& [k, v] : node.entries) {
      auto [it, fresh] = seen.emplace(key(*k, what), k.get());
      if (!fresh)
        fail(*k, "key '" + it->first + "' appears twice in " + what + " (first at line " +
                     std::to_string(it->second->where.line) + ")");
    }
  }

  // Every key of `node` must be in `used` or `ignored`, and appear once.
  void check_keys(const SpecNode& node, const std::string& what, std::initializer_list<const char*> used,
                  std::initializer_list<const char*> ignored = {}) const {
    expect_map(node, what);
    check_unique_keys(node, what);
    for (const auto& [k, v] : node.entries) {
      const std::string& name = k->text;
      auto is = [&](const char* x) { return name == x; };
      if (std::any_of(used.begin(), used.end(), is) || std::any_of(ignored.begin(), ignored.end(), is)) continue;
      std::vector<std::string> known(used.begin(), used.end());
      std::vector<std::string> all = known;
      all.insert(all.end(), ignored.begin(), ignored.end());
      fail(*k, "unknown key '" + name + "' in " + what + did_you_mean(name, all) +
                   "; expected one of: " + join(all));
    }
  }

  std::string string(const SpecNode& node, const std::string& what) const {
    if (!node.is_scalar()) fail(node, what + " must be a single value, not " + kind_of(node));
    return node.text;
  }
  // A name others refer to (a tensor, an Einsum): a single value that is not empty.
  std::string name(const SpecNode& node, const std::string& what) const {
    std::string text = string(node, what);
    if (text.empty()) fail(node, what + " is empty");
    return text;
  }
  std::int64_t integer(const SpecNode& node, const std::string& what) const {
    const std::string text = string(node, what);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(text, &used, 10);
      if (used == text.size()) return v;
    } catch (const std::out_of_range&) {
      fail(node, what + " must be an integer below 2^63, not '" + text + "'");
    } catch (const std::exception&) {
    }
    fail(node, what + " must be an integer, not '" + text + "'");
  }
  bool boolean(const SpecNode& node, const std::string& what) const {
    const std::string text = string(node, what);
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "true" || lower == "yes" || lower == "1") return true;
    if (lower == "false" || lower == "no" || lower == "0") return false;
    fail(node, what + " must be true or false, not '" + text + "'");
  }

  // An expression or constraint parse error, placed at its column within the scalar.
  [[noreturn]] void fail_expression(const SpecNode& node, const ExpressionError& e, const std::string& what,
                                    const std::string& text) const {
    SpecNode at = node;
    if (at.where.column > 0) at.where.column += static_cast<int>(e.column()) + (node.quoted ? 1 : 0);
    fail(at, what + " '" + text + "': " + e.what());
  }
  AffineExpr affine(const SpecNode& node, const std::string& what) const {
    const std::string text = string(node, what);
    try {
      return parse_affine(text);
    } catch (const ExpressionError& e) {
      fail_expression(node, e, what, text);
    }
  }
  Constraint constraint(const SpecNode& node, const std::string& what) const {
    const std::string text = string(node, what);
    try {
      return {text, parse_constraint(text), node.where};
    } catch (const ExpressionError& e) {
      fail_expression(node, e, what, text);
    }
  }
};

// Rank sizes are Python expressions, as AccelForge evaluates them: `128*32`,
// `ceil(256*2/X)` (X another rank size), names from the spec's `variables:`.
class RankSizes {
 public:
  RankSizes(const Reader& in, const SpecNode* sizes, const RankSizes* outer, const SpecNode* variables)
      : in_(in), sizes_(sizes), outer_(outer), variables_(variables) {}

  std::map<std::string, std::int64_t> all() {
    std::map<std::string, std::int64_t> out;
    if (!sizes_ || sizes_->is_null()) return out;
    in_.expect_map(*sizes_, "rank_sizes");
    in_.check_unique_keys(*sizes_, "rank_sizes");
    for (const auto& [k, v] : sizes_->entries) out[k->text] = size_of(k->text);
    return out;
  }

  // A number or an expression over the rank sizes and variables in scope.
  JinjaValue value(const SpecNode& node, const std::string& what) const { return evaluate(node, what); }

  std::optional<JinjaValue> lookup(std::string_view name) const {
    if (sizes_ && sizes_->is_map() && sizes_->find(name)) return JinjaValue(size_of(std::string(name)));
    if (outer_) return outer_->lookup(name);
    if (variables_ && variables_->is_map())
      if (const SpecNode* v = variables_->find(name)) return variable(std::string(name), *v);
    return std::nullopt;
  }

 private:
  std::int64_t size_of(const std::string& rank) const {
    if (auto it = done_.find(rank); it != done_.end()) return it->second;
    const SpecNode* found = sizes_->find(rank);
    if (!found) in_.fail(*sizes_, "rank_sizes has no rank '" + rank + "'");
    const SpecNode& node = *found;
    const std::string what = "rank size of '" + rank + "'";
    if (std::find(busy_.begin(), busy_.end(), rank) != busy_.end())
      in_.fail(node, what + " depends on itself (" + join(busy_, " -> ") + " -> " + rank + ")");
    busy_.push_back(rank);
    const JinjaValue v = evaluate(node, what);
    busy_.pop_back();
    if (!v.is_int()) {
      std::string hint = v.is_float() ? "; use // for integer division" : "";
      in_.fail(node, what + " must be an integer, not " + v.repr() + " (" + v.type_name() + ", from '" + node.text + "')" + hint);
    }
    if (v.as_int() <= 0) in_.fail(node, what + " must be positive, not " + std::to_string(v.as_int()));
    done_[rank] = v.as_int();
    return v.as_int();
  }

  // A YAML number (256 or 256.0), or a Python expression.
  JinjaValue evaluate(const SpecNode& node, const std::string& what) const {
    const std::string text = in_.string(node, what);
    if (node.quoted) in_.fail(node, what + " is a quoted string ('" + text + "'); write a number or an expression");
    if (std::optional<JinjaValue> number = yaml_number(text)) return *number;
    try {
      return evaluate_python_expression(text, [this](std::string_view name) { return lookup(name); });
    } catch (const JinjaError& e) {
      std::string message = e.what();
      const std::string prefix = "name '";
      if (message.rfind(prefix, 0) == 0) {
        const std::string name = message.substr(prefix.size(), message.find('\'', prefix.size()) - prefix.size());
        message += did_you_mean(name, names());
      }
      in_.fail(node, what + " ('" + text + "'): " + message);
    }
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const RankSizes* r = this; r; r = r->outer_)
      if (r->sizes_ && r->sizes_->is_map())
        for (const auto& [k, v] : r->sizes_->entries) out.push_back(k->text);
    if (variables_ && variables_->is_map())
      for (const auto& [k, v] : variables_->entries) out.push_back(k->text);
    return out;
  }

  // AccelForge casts numbers first: 256.0 is 256, True is True, else an expression.
  static std::optional<JinjaValue> yaml_number(const std::string& text) {
    if (text.empty()) return std::nullopt;
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "true") return JinjaValue(true);
    if (lower == "false") return JinjaValue(false);
    errno = 0;
    char* end = nullptr;
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() + text.size() && errno != ERANGE) return JinjaValue(std::int64_t(i));
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(d)) return std::nullopt;
    if (d == std::floor(d) && std::fabs(d) < 9.2e18) return JinjaValue(static_cast<std::int64_t>(d));
    return JinjaValue(d);
  }

  std::optional<JinjaValue> variable(const std::string& name, const SpecNode& node) const {
    if (auto it = variable_values_.find(name); it != variable_values_.end()) return it->second;
    if (!node.is_scalar()) return std::nullopt;
    if (std::find(busy_.begin(), busy_.end(), "variables." + name) != busy_.end())
      in_.fail(node, "variable '" + name + "' depends on itself");
    JinjaValue v;
    if (node.quoted) v = node.text;
    else {
      busy_.push_back("variables." + name);
      v = evaluate(node, "variable '" + name + "'");
      busy_.pop_back();
    }
    variable_values_[name] = v;
    return v;
  }

  const Reader& in_;
  const SpecNode* sizes_;
  const RankSizes* outer_;
  const SpecNode* variables_;
  mutable std::map<std::string, std::int64_t> done_;
  mutable std::map<std::string, JinjaValue> variable_values_;
  mutable std::vector<std::string> busy_;
};

// ---------------------------------------------------------------- tensor sets

// AccelForge's renames: an Einsum's own (`renames: {input: Q}` or a list of {name,
// source, expected_count}) and the spec's defaults (`renames: {einsums: [{name:
// default, tensor_accesses: [...]}]}`).
std::vector<TensorRename> read_rename_list(const Reader& in, const SpecNode& node, const std::string& what);
std::vector<TensorRename> read_default_renames(const Reader& in, const SpecNode& node);

struct SetExpressionError : std::runtime_error {
  SetExpressionError(const std::string& what, bool accelforge_error)
      : std::runtime_error(what), accelforge_error(accelforge_error) {}
  bool accelforge_error;  // AccelForge fails on it too; else looptrace cannot evaluate it
};

struct SetValue;  // a number or a set of tensors (tensor_sets.cpp)

// The symbols AccelForge evaluates the arch with for one Einsum: its tensor sets (All,
// Inputs, Outputs, Intermediates, Shared, each tensor), its renames and defaults, then
// `numbers` (the spec's variables). A one-tensor symbol has `.bits_per_value`.
class EinsumSymbols {
 public:
  using NumberLookup = std::function<std::optional<JinjaValue>(std::string_view)>;
  EinsumSymbols(const Workload& w, const Einsum& e, NumberLookup numbers);
  ~EinsumSymbols();

  struct Number {
    double value = 0;
    std::vector<std::string> bits_of;  // the tensors whose bits_per_value it read
  };
  // Throws SetExpressionError.
  Number evaluate_number(const std::string& text) const;

 private:
  struct Symbol {
    std::shared_ptr<const SetValue> value;  // null: its rename failed
    std::string failure;
    bool accelforge_error = false;
  };
  SetValue symbol(const std::string& name) const;
  SetValue run(const std::string& text, std::vector<std::string>& bits_of) const;

  NumberLookup numbers_;
  std::map<std::string, Symbol> symbols_;
  std::map<std::string, std::optional<std::int64_t>> bits_;
};

// ---------------------------------------------------------------- the front ends

// The `workload:` key: Einsums, their tensor accesses, rank sizes, bits_per_value.
Workload read_workload(const Reader& in, const SpecNode& node, const SpecNode* variables);

// The `mapping:` key: the LoopTree.
Mapping read_mapping(const Reader& in, const SpecNode& node);

// The `arch:` key: what the schedule keeps (memory sizes) ...
// (a size that needs AccelForge's context evaluated for each Einsum of `workload`) ...
void read_memories(const Reader& in, const SpecNode& node, const SpecNode* variables, const Workload& workload,
                   std::map<std::string, ArchMemory>& out, int depth);
// ... the names a mapping may use (errors at the mapping node) ...
void check_mapping_against_arch(const SpecNode& arch_node, const Mapping& mapping);
// ... and the fanouts of its spatial dimensions, where they are numbers.
std::vector<ArchFanout> read_fanouts(const Reader& in, const SpecNode& arch_node, const SpecNode* variables);

// Mistakes in a mapping that still trace, as warnings on `spec`.
void lint_mapping(Spec& spec);

}  // namespace looptrace::front_end
