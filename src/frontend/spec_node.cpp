#include "spec_node.hpp"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <filesystem>

#include "jinja_internal.hpp"

namespace looptrace {

const SpecNode* SpecNode::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k->is_scalar() && k->text == key) return v.get();
  return nullptr;
}

std::string SpecNode::where_str() const {
  std::string s = where.str();
  if (note) s += " (" + *note + ")";
  return s;
}

void fail_at(const SpecNode& node, const std::string& message) {
  throw SpecError(node.where, node.note ? message + " (" + *node.note + ")" : message);
}

SourceLocation RenderedSource::location(const YAML::Mark& mark) const {
  if (mark.line < 0) return {rendered->files.at(0), 0, 0};
  const int line = mark.line + 1;
  const int file = rendered->source_file_of(line);
  return {rendered->files.at(std::size_t(file)), rendered->source_line_of(line), mark.column + 1};
}

std::shared_ptr<const std::string> RenderedSource::note(const YAML::Mark& mark) const {
  const int file = mark.line < 0 ? 0 : rendered->source_file_of(mark.line + 1);
  const std::string& n = rendered->file_notes.at(std::size_t(file));
  return n.empty() ? nullptr : std::make_shared<const std::string>(n);
}

namespace {

void charge(NodeBudget& budget, std::int64_t n, const SourceLocation& where) {
  budget.left -= n;
  if (budget.left < 0)
    throw SpecError(where, "the spec has more than " + std::to_string(budget.limit) +
                               " nodes once YAML aliases and includes are expanded (do aliases repeat a subtree?)");
}

std::string kind_name(const SpecNode& n);

// Deeper than yaml-cpp parses: only an alias inside its own anchor gets here.
constexpr int kMaxDepth = 2500;

SpecNodePtr convert(const YAML::Node& n, const RenderedSource& src, NodeBudget& budget, int depth) {
  auto out = std::make_shared<SpecNode>();
  out->where = src.location(n.Mark());
  out->note = src.note(n.Mark());
  if (depth > kMaxDepth)
    throw SpecError(out->where, "the YAML is nested more than " + std::to_string(kMaxDepth) +
                                    " levels deep (is an alias inside its own anchor?)");
  charge(budget, 1, out->where);
  const std::string tag = n.Tag();
  if (tag != "?" && tag != "!") out->tag = tag;
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      out->kind = SpecNode::Kind::Scalar;
      out->text = n.Scalar();
      out->quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
      break;
    case YAML::NodeType::Sequence:
      out->kind = SpecNode::Kind::Sequence;
      for (const auto& item : n) out->items.push_back(convert(item, src, budget, depth + 1));
      break;
    case YAML::NodeType::Map:
      out->kind = SpecNode::Kind::Map;
      for (const auto& kv : n) {
        SpecNodePtr key = convert(kv.first, src, budget, depth + 1);
        // Every reader looks keys up by their text: a null (`~:`, `: 2`) or empty key
        // would name nothing, so it is refused where it is written. (A list or mapping
        // as a key is refused by the reader of that part, which knows what it expects.)
        if (key->is_null() || (key->is_scalar() && key->text.empty()))
          fail_at(*key, "a mapping key must be a name, not " +
                            (key->is_null() ? kind_name(*key) : std::string("an empty string")));
        out->entries.emplace_back(std::move(key), convert(kv.second, src, budget, depth + 1));
      }
      break;
    default:
      out->kind = SpecNode::Kind::Null;
  }
  return out;
}

std::string kind_name(const SpecNode& n) {
  switch (n.kind) {
    case SpecNode::Kind::Null: return "nothing (null)";
    case SpecNode::Kind::Scalar: return "a single value";
    case SpecNode::Kind::Sequence: return "a list";
    case SpecNode::Kind::Map: return "a mapping";
  }
  return "?";
}

bool is_merge_key(const SpecNode& key) { return key.is_scalar() && (key.text == "<<" || key.text == "<<<"); }

class Resolver {
 public:
  Resolver(const IncludeResults& includes, const FileLoader& load_file, const std::string& directory,
           NodeBudget& budget)
      : includes_(includes), load_file_(load_file), directory_(directory), budget_(budget) {}

  SpecNodePtr resolve(const SpecNodePtr& n, int depth) {
    if (depth > 10000) fail_at(*n, "the YAML is nested too deeply");
    if (n->tag == "!include_loaded") return include_loaded(*n);
    if (n->tag == "!include") return load_file_(join(include_path(*n)), *n);
    if (n->tag == "!includedir") return include_dir(*n);
    if (n->is_sequence()) {
      auto out = std::make_shared<SpecNode>(*n);
      for (auto& item : out->items) item = resolve(item, depth + 1);
      return finish(out);
    }
    if (n->is_map()) {
      auto out = std::make_shared<SpecNode>(*n);
      for (auto& [k, v] : out->entries) v = resolve(v, depth + 1);
      return finish(merge_keys(out));
    }
    return finish(std::make_shared<SpecNode>(*n));
  }

 private:
  // !nomerge marks what a recursive merge must not change; the tag is consumed.
  SpecNodePtr finish(std::shared_ptr<SpecNode> n) {
    if (n->tag == "!nomerge") {
      if (!n->is_map() && !n->is_sequence()) fail_at(*n, "!nomerge applies to a list or a mapping, not " + kind_name(*n));
      n->tag.clear();
      n->no_merge = true;
    }
    return n;
  }

  std::string include_path(const SpecNode& n) {
    if (!n.is_scalar() || n.text.empty()) fail_at(n, n.tag + " needs a file name");
    std::string p = n.text;
    if (p.back() == ',') p.pop_back();
    return p;
  }

  std::string join(const std::string& p) const {
    namespace fs = std::filesystem;
    if (fs::path(p).is_absolute() || directory_.empty()) return p;
    return (fs::path(directory_) / p).lexically_normal().string();
  }

  SpecNodePtr include_dir(const SpecNode& n) {
    namespace fs = std::filesystem;
    const std::string dir = join(include_path(n));
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail_at(n, "!includedir " + n.text + ": no directory " + dir);
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    auto out = std::make_shared<SpecNode>(n);
    out->tag.clear();
    out->kind = SpecNode::Kind::Sequence;
    for (const auto& f : files) out->items.push_back(load_file_(f, n));
    return out;
  }

  // `!include_loaded NAME.key.key`: what include() loaded, or a template value.
  SpecNodePtr include_loaded(const SpecNode& n) {
    if (!n.is_scalar()) fail_at(n, "!include_loaded needs a name such as gpt3_0.workload, not " + kind_name(n));
    std::vector<std::string> path;
    std::size_t start = 0;
    for (std::size_t dot; (dot = n.text.find('.', start)) != std::string::npos; start = dot + 1)
      path.push_back(n.text.substr(start, dot - start));
    path.push_back(n.text.substr(start));
    std::vector<SpecNodePtr> found;
    bool several = false;
    if (auto it = includes_.loaded.find(path[0]); it != includes_.loaded.end()) {
      found = it->second;
      several = includes_.several.count(path[0]) && includes_.several.at(path[0]);
    } else if (includes_.data && includes_.data->count(path[0])) {
      found.push_back(node_from_value(includes_.data->find(path[0])->second, n, budget_));
    } else {
      std::vector<std::string> names;
      for (const auto& [k, v] : includes_.loaded) names.push_back(k);
      fail_at(n, "!include_loaded " + n.text + ": nothing is named '" + path[0] + "' (include() names what it loads" +
                     (names.empty() ? std::string(")") : ": " + names.front() + (names.size() > 1 ? ", ...)" : ")")) +
                     jinja::did_you_mean(path[0], names));
    }
    for (std::size_t i = 1; i < path.size(); ++i) {
      for (auto& f : found) {
        if (f->is_map()) {
          SpecNodePtr next;
          for (const auto& [k, v] : f->entries)
            if (!next && k->is_scalar() && k->text == path[i]) next = v;
          if (!next) {
            std::vector<std::string> keys;
            for (const auto& [k, v] : f->entries) keys.push_back(k->text);
            std::string list;
            for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
            fail_at(n, "!include_loaded " + n.text + ": no key '" + path[i] + "' in " + f->where_str() +
                           " (it has: " + list + ")" + jinja::did_you_mean(path[i], keys));
          }
          f = std::move(next);
        } else if (f->is_sequence() && !path[i].empty() &&
                   std::all_of(path[i].begin(), path[i].end(), jinja::is_digit) && path[i].size() < 10 &&
                   std::stoul(path[i]) < f->items.size()) {
          f = f->items[std::stoul(path[i])];
        } else {
          fail_at(n, "!include_loaded " + n.text + ": '" + path[i] + "' cannot be looked up in " + kind_name(*f) +
                         " (" + f->where_str() + ")");
        }
      }
    }
    if (!several) return found.at(0);
    auto out = std::make_shared<SpecNode>(n);
    out->tag.clear();
    out->kind = SpecNode::Kind::Sequence;
    out->items = std::move(found);
    return out;
  }

  // AccelForge's merge: keys of `from` missing in `into` are added after its own;
  // recursively (`<<<`) mappings merge and lists concatenate, else `into` wins.
  std::shared_ptr<SpecNode> merge(std::shared_ptr<SpecNode> into, const SpecNodePtr& from, bool recursive,
                                  const SpecNode& at) {
    if (from->is_sequence()) {
      auto combined = std::make_shared<SpecNode>(*from);
      combined->kind = SpecNode::Kind::Map;
      combined->items.clear();
      combined->tag.clear();
      for (const auto& item : from->items) combined = merge(combined, item, recursive, at);
      return merge(std::move(into), combined, recursive, at);
    }
    if (!from->is_map())
      fail_at(*from, std::string("'") + (recursive ? "<<<" : "<<") + "' (at " + at.where.str() +
                         ") needs a mapping or a list of mappings, not " + kind_name(*from));
    charge(budget_, std::int64_t(from->entries.size()) + 1, at.where);
    for (const auto& entry : from->entries) {
      const SpecNodePtr& k = entry.first;
      const SpecNodePtr& v = entry.second;
      auto existing = std::find_if(into->entries.begin(), into->entries.end(), [&](const auto& e) {
        return e.first->is_scalar() && k->is_scalar() && e.first->text == k->text;
      });
      if (existing == into->entries.end()) {
        into->entries.emplace_back(k, v);
        continue;
      }
      if (!recursive || existing->second->no_merge) continue;
      if (existing->second->is_map() && v->is_map()) {
        existing->second = merge(std::make_shared<SpecNode>(*existing->second), v, true, at);
      } else if (existing->second->is_sequence() && v->is_sequence()) {
        auto joined = std::make_shared<SpecNode>(*existing->second);
        joined->items.insert(joined->items.end(), v->items.begin(), v->items.end());
        charge(budget_, std::int64_t(v->items.size()), at.where);
        existing->second = joined;
      }
    }
    return into;
  }

  std::shared_ptr<SpecNode> merge_keys(std::shared_ptr<SpecNode> map) {
    const auto first = std::find_if(map->entries.begin(), map->entries.end(),
                                    [](const auto& e) { return is_merge_key(*e.first); });
    if (first == map->entries.end()) return map;
    if (std::count_if(map->entries.begin(), map->entries.end(), [](const auto& e) { return is_merge_key(*e.first); }) > 1)
      fail_at(*map, "a mapping may have only one '<<' or '<<<' key");
    const SpecNodePtr key = first->first;
    const SpecNodePtr value = first->second;
    map->entries.erase(first);
    return merge(std::move(map), value, key->text == "<<<", *key);
  }

  const IncludeResults& includes_;
  const FileLoader& load_file_;
  const std::string& directory_;
  NodeBudget& budget_;
};

}  // namespace

namespace {

// The 1-based line of a "---" that starts a second document, or 0. (yaml-cpp's LoadAll
// can loop forever on malformed input, so documents are counted here instead.)
int second_document_line(const std::string& text) {
  bool content = false;
  int line = 1;
  for (std::size_t start = 0; start <= text.size(); ++line) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view l(text.data() + start, end - start);
    const bool marker = l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (marker && content) return line;
    const std::size_t first = l.find_first_not_of(" \t\r");
    if (!marker && first != std::string_view::npos && l[first] != '#' && l[0] != '%') content = true;
    if (marker && l.find_first_not_of(" \t\r", 3) != std::string_view::npos) content = true;  // "--- value"
    start = end + 1;
  }
  return 0;
}

}  // namespace

SpecNodePtr parse_yaml(const RenderedTemplate& rendered, NodeBudget& budget) {
  const RenderedSource src{&rendered};
  YAML::Node doc;
  try {
    doc = YAML::Load(rendered.text);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp says only "bad file"
    throw SpecError(src.location(e.mark), "invalid YAML: lists and mappings nested too deeply (the limit is " +
                                              std::to_string(e.depth()) + " levels)");
  } catch (const YAML::Exception& e) {
    const auto note = src.note(e.mark);
    throw SpecError(src.location(e.mark), "invalid YAML: " + e.msg + (note ? " (" + *note + ")" : ""));
  }
  if (const int line = second_document_line(rendered.text)) {
    YAML::Mark mark;
    mark.line = line - 1;
    mark.column = 0;
    throw SpecError(src.location(mark), "a spec file holds one YAML document, not several ('---')");
  }
  try {
    return convert(doc, src, budget, 0);
  } catch (const YAML::Exception& e) {
    throw SpecError(src.location(e.mark), "invalid YAML: " + e.msg);
  }
}

SpecNodePtr node_from_value(const JinjaValue& v, const SpecNode& where, NodeBudget& budget) {
  auto out = std::make_shared<SpecNode>();
  out->where = where.where;
  out->note = where.note;
  charge(budget, 1, where.where);
  switch (v.kind()) {
    case JinjaValue::Kind::None: break;
    case JinjaValue::Kind::Bool:
    case JinjaValue::Kind::Int:
    case JinjaValue::Kind::Float:
    case JinjaValue::Kind::String:
      out->kind = SpecNode::Kind::Scalar;
      out->text = v.str();
      break;
    case JinjaValue::Kind::List:
    case JinjaValue::Kind::Tuple:
      out->kind = SpecNode::Kind::Sequence;
      for (const auto& x : v.list()) out->items.push_back(node_from_value(x, where, budget));
      break;
    case JinjaValue::Kind::Dict:
      out->kind = SpecNode::Kind::Map;
      for (const auto& [k, x] : v.dict()) {
        if (k.str().empty()) fail_at(where, "a mapping key must be a name, not an empty string");
        out->entries.emplace_back(node_from_value(k.str(), where, budget), node_from_value(x, where, budget));
      }
      break;
    default: fail_at(where, jinja::an(v) + " cannot become YAML");
  }
  return out;
}

SpecNodePtr resolve_tags_and_merges(const SpecNodePtr& root, const IncludeResults& includes,
                                    const FileLoader& load_file, const std::string& directory,
                                    NodeBudget& budget) {
  return Resolver(includes, load_file, directory, budget).resolve(root, 0);
}

}  // namespace looptrace
