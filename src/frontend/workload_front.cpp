// The workload front end: AccelForge's `workload:` (Einsums as strings or mappings,
// rank sizes, bits_per_value) read into a Workload.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "front_end.hpp"
#include "looptrace/frontend/concise_einsum.hpp"

namespace looptrace::front_end {

namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

// `text` with every whole-word `word` replaced by `by`.
std::string replace_word(const std::string& text, const std::string& word, const std::string& by) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, word.size(), word) == 0 && (i == 0 || !ident(text[i - 1])) &&
        (i + word.size() == text.size() || !ident(text[i + word.size()]))) {
      out += by;
      i += word.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

void add_rank_variables(Einsum& einsum) {
  for (const auto& access : einsum.accesses)
    for (const auto& expr : access.projection)
      for (const auto& [var, coef] : expr.terms)
        if (!einsum.has_rank_variable(var)) einsum.rank_variables.push_back(var);
}

std::vector<Constraint> read_constraints(const Reader& in, const SpecNode& node, const std::string& what) {
  std::vector<Constraint> out;
  if (node.is_sequence()) {
    for (const auto& c : node.items) out.push_back(in.constraint(*c, what));
  } else if (node.is_map()) {
    in.check_unique_keys(node, "iteration_space_shape");
    for (const auto& [k, v] : node.entries) out.push_back(in.constraint(*v, what));
  } else if (node.is_scalar()) {
    out.push_back(in.constraint(node, what));
  } else if (!node.is_null()) {
    in.fail(node, what + " must be a list of constraints or a mapping of rank variable to constraint");
  }
  return out;
}

// A number of bits per value: a positive integer.
std::int64_t bits_of(const Reader& in, const SpecNode& node, const std::string& tensor) {
  const std::int64_t bits = in.integer(node, "bits_per_value of '" + tensor + "'");
  if (bits <= 0) in.fail(node, "bits_per_value of '" + tensor + "' must be positive, not " + std::to_string(bits));
  return bits;
}

TensorAccess read_tensor_access(const Reader& in, const SpecNode& node) {
  in.check_keys(node, "a tensor access", {"name", "projection", "output"},
                {"persistent", "bits_per_value", "backing_storage_size_scale", "density", "density_distribution"});
  TensorAccess access;
  access.where = node.where;
  const SpecNode* name = node.find("name");
  if (!name) in.fail(node, "a tensor access needs a 'name'");
  access.tensor = in.name(*name, "the tensor name");
  if (const SpecNode* output = node.find("output")) access.is_output = in.boolean(*output, "'output'");
  if (const SpecNode* bits = node.find("bits_per_value")) access.bits_per_value = bits_of(in, *bits, access.tensor);
  const SpecNode* projection = node.find("projection");
  if (!projection) in.fail(node, "tensor access '" + access.tensor + "' needs a 'projection'");
  if (projection->is_sequence()) {
    for (const auto& entry : projection->items) {
      AffineExpr e = in.affine(*entry, "projection entry");
      if (e.terms.size() != 1 || e.terms[0].second != 1 || e.constant != 0)
        in.fail(*entry, "a list projection entry must be one rank variable, not '" + entry->text +
                            "'; write a mapping {Rank: expression} instead");
      access.ranks.push_back(upper(e.terms[0].first));
      access.projection.push_back(std::move(e));
    }
  } else if (projection->is_map()) {
    in.check_unique_keys(*projection, "the projection of tensor '" + access.tensor + "'");
    for (const auto& [k, v] : projection->entries) {
      access.ranks.push_back(k->text);
      access.projection.push_back(in.affine(*v, "projection of rank '" + k->text + "'"));
    }
  } else if (!projection->is_null()) {
    in.fail(*projection, "a projection must be a list of rank variables or a mapping {Rank: expression}");
  }
  return access;
}

Einsum from_concise(const Reader& in, const SpecNode& node) {
  const std::string text = in.string(node, "a concise Einsum");
  ConciseEinsum parsed;
  try {
    parsed = parse_concise_einsum(text);
  } catch (const ExpressionError& e) {
    in.fail_expression(node, e, "Einsum", text);
  }
  Einsum einsum;
  einsum.name = parsed.name;
  einsum.where = node.where;
  for (const std::string& note : parsed.notes) in.warnings.push_back({node.where, "Einsum '" + text + "': " + note});
  for (auto& a : parsed.accesses) einsum.accesses.push_back({a.tensor, a.ranks, a.projection, a.is_output, einsum.where, std::nullopt});
  return einsum;
}

// `tensor_accesses:` next to `einsum:` adds keys to the string's accesses (AccelForge's
// _parse_einsum_entry): only keys the string does not set.
void add_access_keys(const Reader& in, const SpecNode& list, Einsum& einsum, const std::string& text) {
  in.expect_list(list, "tensor_accesses");
  for (const auto& entry : list.items) {
    in.check_keys(*entry, "a tensor access", {"name"},
                  {"persistent", "bits_per_value", "backing_storage_size_scale", "density", "density_distribution",
                   "projection", "output"});
    const SpecNode* name = entry->find("name");
    if (!name) in.fail(*entry, "a tensor access needs a 'name'");
    const std::string tensor = in.name(*name, "the tensor name");
    if (std::none_of(einsum.accesses.begin(), einsum.accesses.end(),
                     [&](const TensorAccess& a) { return a.tensor == tensor; }))
      in.fail(*name, "tensor '" + tensor + "' is not in the Einsum '" + text + "'");
    for (const char* set : {"projection", "output"})
      if (const SpecNode* v = entry->find(set))
        in.fail(*v, "tensor '" + tensor + "' already has its " + set + " from the Einsum '" + text + "'");
    if (const SpecNode* bits = entry->find("bits_per_value"))
      for (TensorAccess& a : einsum.accesses)
        if (a.tensor == tensor) a.bits_per_value = bits_of(in, *bits, tensor);
  }
}

Einsum read_einsum(const Reader& in, const SpecNode& node, const RankSizes& workload_sizes, const SpecNode* variables) {
  if (node.is_scalar()) {
    Einsum e = from_concise(in, node);
    add_rank_variables(e);
    return e;
  }
  in.check_keys(node, "an Einsum", {"name", "tensor_accesses", "einsum", "iteration_space_shape", "rank_sizes", "renames"},
                {"is_copy_operation", "n_instances"});
  Einsum einsum;
  const SpecNode* accesses = node.find("tensor_accesses");
  if (const SpecNode* concise = node.find("einsum")) {
    einsum = from_concise(in, *concise);
    if (accesses) add_access_keys(in, *accesses, einsum, concise->text);
    // AccelForge names an Einsum written as a string after its output tensor, whatever
    // `name:` says (_parse_einsum_entry).
    if (const SpecNode* name = node.find("name"); name && in.name(*name, "the Einsum name") != einsum.name)
      in.warnings.push_back({name->where, "AccelForge names the Einsum '" + concise->text + "' after its output, '" +
                                              einsum.name + "'; its name '" + name->text + "' is not used"});
  } else {
    const SpecNode* name = node.find("name");
    if (!name) in.fail(node, "an Einsum needs a 'name' (or an 'einsum' string)");
    einsum.name = in.name(*name, "the Einsum name");
    if (!accesses) in.fail(node, "Einsum '" + einsum.name + "' needs 'tensor_accesses'");
    in.expect_list(*accesses, "tensor_accesses");
    for (const auto& a : accesses->items) einsum.accesses.push_back(read_tensor_access(in, *a));
  }
  einsum.where = node.where;
  if (const SpecNode* shape = node.find("iteration_space_shape"))
    einsum.constraints = read_constraints(in, *shape, "constraint");
  if (const SpecNode* sizes = node.find("rank_sizes")) einsum.rank_sizes = RankSizes(in, sizes, &workload_sizes, variables).all();
  if (const SpecNode* renames = node.find("renames"))
    einsum.renames = read_rename_list(in, *renames, "renames of Einsum '" + einsum.name + "'");
  add_rank_variables(einsum);
  return einsum;
}

// AccelForge rejects bits_per_value keys that size one tensor twice (All and a name,
// two groups); looptrace reads them by precedence (a name, a group, All), and says so.
void warn_overlapping_bits_keys(const Reader& in, const SpecNode& bits, const std::set<std::string>& tensors) {
  std::map<std::string, std::string> first;  // tensor -> the first key that sizes it
  for (const auto& [k, v] : bits.entries) {
    const std::string& key = k->text;
    if (key == "Other") continue;  // what no other key names: never an overlap
    std::vector<std::string> names;
    if (key.empty() || key == "All") names.assign(tensors.begin(), tensors.end());
    else names = bits_key_names(key);
    std::vector<std::string> twice;
    std::string earlier;
    for (const std::string& t : names) {
      if (!tensors.count(t)) continue;
      auto [it, fresh] = first.emplace(t, key.empty() ? "All" : key);
      if (!fresh) twice.push_back("'" + t + "'"), earlier = it->second;
    }
    if (!twice.empty())
      in.warnings.push_back(
          {k->where, "bits_per_value keys '" + printable(earlier) + "' and '" + printable(key) + "' both size " +
                         join(twice) + ": AccelForge rejects keys that overlap; looptrace takes the most "
                         "specific (a tensor's name, then 'A | B', then All)"});
  }
}

// A bits_per_value key looptrace reads is All, a tensor name or 'A | B'; AccelForge
// evaluates keys as set expressions (Inputs, Outputs, ...). A key naming no tensor is
// said, with the tensors left without a size, never passed over.
void warn_unknown_bits_keys(const Reader& in, const SpecNode& bits, const Workload& w) {
  std::set<std::string> tensors;
  for (const auto& e : w.einsums)
    for (const auto& a : e.accesses) tensors.insert(a.tensor);
  for (const auto& [k, v] : bits.entries) {
    const std::string& key = k->text;
    if (key.empty() || key == "All" || key == "Other") continue;
    std::vector<std::string> unknown;
    for (const std::string& part : bits_key_names(key))
      if (!tensors.count(part)) unknown.push_back("'" + printable(part) + "'");
    if (unknown.empty()) continue;
    std::vector<std::string> unsized;
    for (const std::string& t : tensors)
      if (!w.bits_per_value_of(t)) unsized.push_back("'" + t + "'");
    in.warnings.push_back(
        {k->where, "bits_per_value key '" + printable(key) + "': " + join(unknown) +
                       (unknown.size() > 1 ? " are" : " is") +
                       " no tensor of the workload (looptrace reads All, Other, tensor names and 'A | B'; "
                       "AccelForge's set expressions are not evaluated), so it sizes nothing there" +
                       (unsized.empty() ? std::string()
                                        : "; without a size: " + join(unsized) + " (no byte figures for them)")});
  }
  warn_overlapping_bits_keys(in, bits, tensors);
}

// Einsum lists may nest (an included file's list inside this one's): read in order.
void read_einsum_list(const Reader& in, const SpecNode& list, Workload& w, const RankSizes& sizes,
                      const SpecNode* variables, int depth) {
  if (depth > 100) in.fail(list, "Einsum lists nested too deeply");
  for (const auto& e : list.items) {
    if (e->is_sequence()) {
      read_einsum_list(in, *e, w, sizes, variables, depth + 1);
      continue;
    }
    Einsum einsum = read_einsum(in, *e, sizes, variables);
    if (const Einsum* other = w.find_einsum(einsum.name))
      in.fail(*e, "Einsum '" + einsum.name + "' is defined twice (first at " + other->where.str() + ")");
    w.einsums.push_back(std::move(einsum));
  }
}

// Every access of a tensor names the same ranks, in the same order (AccelForge's
// Workload._validate): the workload model holds this for every later step.
void check_tensor_ranks(const Workload& w) {
  std::map<std::string, std::pair<const TensorAccess*, const Einsum*>> first;  // tensor -> its first access
  for (const auto& e : w.einsums)
    for (const auto& a : e.accesses) {
      auto [it, fresh] = first.emplace(a.tensor, std::make_pair(&a, &e));
      if (!fresh && it->second.first->ranks != a.ranks)
        throw SpecError(a.where, "tensor '" + a.tensor + "' has ranks [" + join(a.ranks) + "] in Einsum '" + e.name +
                                     "' but [" + join(it->second.first->ranks) + "] in Einsum '" +
                                     it->second.second->name + "'; every access of a tensor names the same ranks");
    }
}

// AccelForge hands iteration_space_shape to ISL as written, where a rank size's name
// is no variable: "Error creating isl.Set". A constraint naming one fails here too,
// with the number to write instead.
void check_no_rank_size_names(const Workload& w) {
  std::set<std::string> rank_variables;
  for (const Einsum& e : w.einsums) rank_variables.insert(e.rank_variables.begin(), e.rank_variables.end());
  auto check = [&](const Constraint& c, const std::map<std::string, std::int64_t>& own, const std::string& of) {
    for (const AffineExpr& b : c.bounds)
      for (const auto& [name, coef] : b.terms) {
        if (rank_variables.count(name)) continue;
        auto size = own.find(name);
        if (size == own.end() && (size = w.rank_sizes.find(name)) == w.rank_sizes.end()) continue;
        const std::string value = std::to_string(size->second);
        throw SpecError(c.where, "constraint '" + c.text + "'" + of + " names the rank size '" + name +
                                     "': AccelForge gives iteration_space_shape to ISL as written and fails on it "
                                     "(\"Error creating isl.Set\"); write its value, " + value + ", instead ('" +
                                     replace_word(c.text, name, value) + "')");
      }
  };
  for (const Constraint& c : w.constraints) check(c, {}, "");
  for (const Einsum& e : w.einsums)
    for (const Constraint& c : e.constraints) check(c, e.rank_sizes, " of Einsum '" + e.name + "'");
}

}  // namespace

Workload read_workload(const Reader& in, const SpecNode& node, const SpecNode* variables) {
  in.check_keys(node, "the workload", {"einsums", "iteration_space_shape", "rank_sizes"},
                {"bits_per_value", "persistent_tensors", "n_instances", "densities", "density_distributions"});
  Workload w;
  w.where = node.where;
  if (const SpecNode* shape = node.find("iteration_space_shape"))
    w.constraints = read_constraints(in, *shape, "constraint");
  RankSizes sizes(in, node.find("rank_sizes"), nullptr, variables);
  w.rank_sizes = sizes.all();
  if (const SpecNode* bits = node.find("bits_per_value")) {
    auto one = [&](const SpecNode& v, const std::string& key) {
      const JinjaValue value = sizes.value(v, "bits_per_value" + (key.empty() ? "" : " of '" + key + "'"));
      if (!value.is_int() || value.as_int() <= 0)
        in.fail(v, "bits_per_value" + (key.empty() ? "" : " of '" + key + "'") + " must be a positive integer, not " +
                       value.repr());
      w.bits_per_value.emplace_back(key, value.as_int());
    };
    if (bits->is_map()) {
      in.check_unique_keys(*bits, "bits_per_value");
      for (const auto& [k, v] : bits->entries) one(*v, k->text);
    } else if (!bits->is_null()) {
      one(*bits, "");
    }
  }
  const SpecNode* einsums = node.find("einsums");
  if (!einsums) in.fail(node, "the workload needs 'einsums'");
  in.expect_list(*einsums, "einsums");
  read_einsum_list(in, *einsums, w, sizes, variables, 0);
  check_tensor_ranks(w);
  check_no_rank_size_names(w);
  if (const SpecNode* bits = node.find("bits_per_value"); bits && bits->is_map())
    warn_unknown_bits_keys(in, *bits, w);
  return w;
}

}  // namespace looptrace::front_end
