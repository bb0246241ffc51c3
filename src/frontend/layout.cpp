#include "looptrace/frontend/layout.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace looptrace {

namespace {

struct Reader {
  std::string file;

  SourceLocation at(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    return {file, m.line + 1, m.column + 1};
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& message) const { throw SpecError(at(n), message); }

  std::string text(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(n, what + " takes a name or a string");
    return n.Scalar();
  }
  // A whole number >= `least`, decimal or 0x hex (addresses are written in hex).
  std::uint64_t number(const YAML::Node& n, const std::string& what, std::uint64_t least = 0) const {
    if (!n.IsScalar()) fail(n, what + " takes a whole number");
    const std::string& s = n.Scalar();
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const std::size_t from = hex ? 2 : 0;
    if (s.size() == from || s.size() - from > (hex ? 16u : 19u) ||
        !std::all_of(s.begin() + std::ptrdiff_t(from), s.end(), [&](char c) { return hex ? std::isxdigit(c) : std::isdigit(c); }))
      fail(n, what + " takes a whole number (decimal or 0x hex), not '" + printable(s) + "'");
    const std::uint64_t v = std::stoull(s.substr(from), nullptr, hex ? 16 : 10);
    if (v < least) fail(n, what + " must be at least " + std::to_string(least) + ", not " + s);
    return v;
  }
  std::vector<std::string> ranks(const YAML::Node& n, const std::string& what) const {
    if (!n.IsSequence()) fail(n, what + " takes a list of ranks, outermost first: [N, K]");
    std::vector<std::string> out;
    for (const YAML::Node& r : n) {
      std::string name = text(r, what);
      if (std::find(out.begin(), out.end(), name) != out.end()) fail(r, what + " names rank " + printable(name) + " twice");
      out.push_back(std::move(name));
    }
    return out;
  }
  std::vector<std::pair<std::string, std::int64_t>> per_rank(const YAML::Node& n, const std::string& what) const {
    if (!n.IsMap()) fail(n, what + " takes a map of rank to a whole number: {K: 8}");
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& kv : n) {
      std::string name = text(kv.first, what);
      for (const auto& [r, v] : out)
        if (r == name) fail(kv.first, what + " names rank " + printable(name) + " twice");
      out.emplace_back(std::move(name), std::int64_t(number(kv.second, what + " of " + kv.first.Scalar(), 1)));
    }
    return out;
  }
  void map_keys(const YAML::Node& n, const std::string& what, std::initializer_list<const char*> known) const {
    if (!n.IsMap()) fail(n, what + " takes a map");
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(kv.first, "unknown key '" + printable(key) + "' in " + what + " (known: " + list + ")");
      }
    }
  }

  TensorLayoutSpec tensor(const std::string& name, const YAML::Node& n, const std::string& level) const {
    map_keys(n, "the layout of " + printable(name), {"order", "block", "block_order", "pad", "base", "align"});
    TensorLayoutSpec t;
    t.tensor = name, t.level = level, t.where = at(n);
    if (auto v = n["order"]) t.order = ranks(v, "order"), t.order_where = at(v);
    if (auto v = n["block_order"]) t.block_order = ranks(v, "block_order"), t.block_order_where = at(v);
    if (auto v = n["block"]) t.block = per_rank(v, "block");
    if (auto v = n["pad"]) t.pad = per_rank(v, "pad");
    if (auto v = n["base"]) t.base = number(v, "base"), t.base_where = at(v);
    if (auto v = n["align"]) t.align = alignment(v);
    return t;
  }
  std::uint64_t alignment(const YAML::Node& n) const {
    const std::uint64_t a = number(n, "align", 1);
    if ((a & (a - 1)) != 0) fail(n, "align takes a power of two, not " + std::to_string(a));
    return a;
  }
  void tensors(const YAML::Node& n, const std::string& level, LayoutSpec& out) const {
    if (!n.IsMap()) fail(n, "tensors takes a map of tensor name to its layout");
    for (const auto& kv : n) {
      const std::string name = text(kv.first, "a tensor");
      for (const auto& t : out.tensors)
        if (t.tensor == name && t.level == level) fail(kv.first, "tensor " + printable(name) + " is given twice");
      out.tensors.push_back(tensor(name, kv.second, level));
    }
  }
  void level(const std::string& name, const YAML::Node& n, LayoutSpec& out) const {
    map_keys(n, "level " + printable(name), {"banks", "bank_bytes", "tensors"});
    out.levels.emplace_back(name, at(n));
    if (n["banks"] || n["bank_bytes"]) {
      LevelBanks b;
      b.level = name, b.where = at(n);
      if (auto v = n["banks"]) b.banks = std::int64_t(number(v, "banks", 1));
      if (auto v = n["bank_bytes"]) b.bank_bytes = std::int64_t(number(v, "bank_bytes", 1));
      out.banks.push_back(b);
    }
    if (auto v = n["tensors"]) tensors(v, name, out);
  }

  // LayoutLoop: "K=4 N=8".
  std::vector<std::pair<std::string, std::int64_t>> factors(const YAML::Node& n) const {
    std::istringstream words(text(n, "factors"));
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
      if (eq == 0 || value.empty() || value.size() > 18 || !std::all_of(value.begin(), value.end(), ::isdigit) ||
          std::stoll(value) < 1)
        fail(n, "factors takes RANK=N words with N at least 1 (\"K=4 N=8\"), not '" + printable(w) + "'");
      out.emplace_back(w.substr(0, eq), std::stoll(value));
    }
    return out;
  }
  void timeloop(const YAML::Node& list, LayoutSpec& out) const {
    for (const YAML::Node& e : list) {
      map_keys(e, "a LayoutLoop entry", {"target", "type", "factors", "permutation", "num_read_ports", "num_write_ports"});
      if (!e["target"]) fail(e, "a LayoutLoop entry needs target: (the memory level)");
      if (!e["type"]) fail(e, "a LayoutLoop entry needs type: interline or intraline");
      const std::string target = text(e["target"], "target"), type = text(e["type"], "type");
      if (type != "interline" && type != "intraline") fail(e["type"], "type takes interline or intraline, not " + printable(type));
      auto it = std::find_if(out.timeloop.begin(), out.timeloop.end(), [&](const auto& l) { return l.target == target; });
      if (it == out.timeloop.end()) {
        it = out.timeloop.insert(out.timeloop.end(), TimeloopLayout{target, {}, {}});
        out.levels.emplace_back(target, at(e));
      }
      TimeloopNest& nest = type == "interline" ? it->interline : it->intraline;
      if (nest.given) fail(e, "target " + printable(target) + " has two " + type + " entries");
      nest.given = true, nest.where = at(e);
      if (auto v = e["permutation"]) {
        nest.permutation = text(v, "permutation");
        std::erase_if(nest.permutation, ::isspace);
      }
      if (auto v = e["factors"]) nest.factors = factors(v);
      for (const char* k : {"num_read_ports", "num_write_ports"})
        if (auto v = e[k]) number(v, k, 1);
    }
  }
};

}  // namespace

LayoutSpec parse_layout(const std::string& text, const std::string& file) {
  Reader r{file};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw SpecError(SourceLocation{file, e.mark.line + 1, e.mark.column + 1}, "invalid YAML: " + e.msg);
  }
  LayoutSpec out;
  out.file = file;
  if (!root.IsMap() || !root["layout"]) throw SpecError(SourceLocation{file, 1, 1}, "a layout file has one key, layout:");
  r.map_keys(root, "a layout file", {"layout"});
  const YAML::Node layout = root["layout"];
  if (layout.IsSequence()) {
    r.timeloop(layout, out);
    return out;
  }
  r.map_keys(layout, "layout", {"align", "tensors", "levels"});
  if (auto v = layout["align"]) out.align = r.alignment(v);
  if (auto v = layout["tensors"]) r.tensors(v, "", out);
  if (auto v = layout["levels"]) {
    if (!v.IsMap()) r.fail(v, "levels takes a map of level name to its banks and tensors");
    for (const auto& kv : v) r.level(r.text(kv.first, "a level"), kv.second, out);
  }
  return out;
}

LayoutSpec load_layout(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(SourceLocation{path, 0, 0}, "cannot read the layout file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_layout(text.str(), path);
}

namespace {

// LayoutLoop's nests for one tensor: the interline permutation (innermost first, one
// character a rank, the ranks the tensor lacks skipped) is `order`, the intraline one
// `block_order`; the intraline factors are the block (the elements of a line), and a
// rank's interline x intraline factors its padded extent.
TensorLayoutSpec from_timeloop(const TimeloopLayout& l, const std::string& tensor, const std::vector<std::string>& ranks) {
  TensorLayoutSpec t;
  t.tensor = tensor, t.level = l.target;
  t.where = l.interline.given ? l.interline.where : l.intraline.where;
  for (const std::string& r : ranks)
    if (r.size() != 1)
      throw SpecError(t.where, "LayoutLoop's permutation names ranks by one character, and tensor " + printable(tensor) +
                                   " has rank " + printable(r));
  auto permutation = [&](const TimeloopNest& n, std::vector<std::string>& out, SourceLocation& where) {
    if (!n.given || n.permutation.empty()) return;
    where = n.where;
    for (auto c = n.permutation.rbegin(); c != n.permutation.rend(); ++c)
      if (std::find(ranks.begin(), ranks.end(), std::string(1, *c)) != ranks.end()) out.emplace_back(1, *c);
  };
  permutation(l.interline, t.order, t.order_where);
  permutation(l.intraline, t.block_order, t.block_order_where);
  auto factor = [&](const TimeloopNest& n, const std::string& r) -> std::int64_t {
    for (const auto& [name, v] : n.factors)
      if (name == r) return v;
    return 0;
  };
  for (const std::string& r : ranks) {
    const std::int64_t inner = factor(l.intraline, r), outer = factor(l.interline, r);
    if (inner > 1) t.block.emplace_back(r, inner);
    if (outer > 0) t.pad.emplace_back(r, outer * std::max<std::int64_t>(inner, 1));
  }
  return t;
}

}  // namespace

std::optional<TensorLayoutSpec> LayoutSpec::find(const std::string& tensor, const std::vector<std::string>& ranks,
                                                 const std::string& level) const {
  const TensorLayoutSpec* every = nullptr;
  for (const auto& t : tensors)
    if (t.tensor == tensor) {
      if (t.level == level) return t;
      if (t.level.empty()) every = &t;
    }
  if (every) return *every;
  for (const auto& l : timeloop)
    if (l.target == level) return from_timeloop(l, tensor, ranks);
  return std::nullopt;
}

const LevelBanks* LayoutSpec::banks_of(const std::string& level) const {
  for (const auto& b : banks)
    if (b.level == level) return &b;
  return nullptr;
}

}  // namespace looptrace
