#include "looptrace/spec/load.hpp"

#include <glob.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include "jinja_internal.hpp"
#include "looptrace/spec/concise_einsum.hpp"
#include "spec_node.hpp"

namespace looptrace {

namespace fs = std::filesystem;

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

std::string SpecWarning::str() const {
  const std::string w = where.str();
  return (w.empty() ? "" : w + ": ") + "warning: " + message;
}

namespace {

using jinja::did_you_mean;

// Bounds on what one load may do, far beyond real specs: YAML nodes (aliases and
// includes repeat subtrees), Jinja loop iterations, files loaded through includes.
constexpr std::int64_t kMaxNodes = 500'000;
constexpr std::int64_t kMaxIterations = 1'000'000;
constexpr int kMaxFileLoads = 10'000;
// Mapping nodes read (aliases can repeat a subtree many times over).
constexpr std::size_t kMaxMappingNodes = 100'000;

// The top-level keys of AccelForge's Spec.
const std::vector<std::string> kSpecKeys = {"arch",   "config",    "mapper",   "mapping",
                                            "model",  "renames",   "sparse_optimizations",
                                            "variables", "workload"};

std::string join(const std::vector<std::string>& words, const std::string& sep = ", ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// Spec files are kilobytes; a bound keeps /dev/zero or a huge file from exhausting memory.
constexpr std::size_t kMaxFileBytes = 64u << 20;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw SpecError(SourceLocation{path, 0, 0}, "is a directory, not a spec file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw SpecError(SourceLocation{path, 0, 0}, "cannot read the file");
  std::string text;
  char buffer[1 << 16];
  while (f.read(buffer, sizeof buffer) || f.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(f.gcount()));
    if (text.size() > kMaxFileBytes)
      throw SpecError(SourceLocation{path, 0, 0}, "the file is larger than 64 MiB; spec files are far smaller");
  }
  return text;
}

std::string canonical(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path).lexically_normal().string() : p.string();
}

// The directory part of a path as messages show it ("" for the current directory).
std::string directory_of(const std::string& path) { return fs::path(path).parent_path().string(); }

std::string joined(const std::string& dir, const std::string& p) {
  if (dir.empty() || fs::path(p).is_absolute()) return fs::path(p).lexically_normal().string();
  return (fs::path(dir) / p).lexically_normal().string();
}

bool has_include_note(const SpecError& e) { return e.message().find(" (included from ") != std::string::npos; }

// ---------------------------------------------------------------- files and includes

// One file being rendered: AccelForge's load_file_and_includes state.
struct FileState {
  std::string display;    // as messages name it
  std::string directory;  // as messages name it; includes are relative to it
  std::string note;       // "included from a.yaml:3:1, included from b.yaml:9:1", or ""
  JinjaVariables data;    // what the template is rendered with
  std::vector<std::string> include_dirs;  // add_to_path() folders, searched after `directory`
  IncludeResults includes;
  int include_counter = 0;
};

class Loader {
 public:
  Loader(const JinjaVariables& defines, const std::string& include_root)
      : defines_(defines), root_(include_root.empty() ? "" : canonical(include_root)) {}

  std::set<std::string, std::less<>> looked_up;  // every variable name a template looked up

  // Renders, parses and resolves one file (AccelForge's load_yaml).
  SpecNodePtr load_yaml(FileState& st, const std::string& text) {
    RenderedTemplate rendered = render(st, text);
    rendered.file_notes.at(0) = st.note;
    for (std::size_t k = 1; k < rendered.file_notes.size() && !st.note.empty(); ++k)
      rendered.file_notes[k] += ", " + st.note;
    SpecNodePtr root = parse_yaml(rendered, nodes_);
    st.includes.data = &st.data;
    const FileLoader load_file = [this, &st](const std::string& path, const SpecNode& at) {
      return load_tag_include(st, path, at);
    };
    return resolve_tags_and_merges(root, st.includes, load_file, st.directory, nodes_);
  }

 private:
  RenderedTemplate render(FileState& st, const std::string& text) {
    if (++file_loads_ > kMaxFileLoads)
      throw JinjaError("more than " + std::to_string(kMaxFileLoads) + " files loaded through includes");
    const JinjaGlobals globals = make_globals(st);
    JinjaOptions options;
    options.globals = &globals;
    options.max_iterations = kMaxIterations;
    options.iteration_budget = &iterations_;
    options.looked_up = &looked_up;
    options.defines = &defines_;
    // Jinja's own {% include %} / {% import %}: AccelForge's FileSystemLoader looks in the
    // file's folder only, and refuses ".." and absolute names.
    options.load_template = [this, &st](const std::string& name) {
      bool outside = fs::path(name).is_absolute();
      for (const auto& part : fs::path(name)) outside = outside || part == "..";
      if (outside) throw JinjaError("template '" + name + "' is not found: Jinja loads templates only from " +
                                    (st.directory.empty() ? std::string("the file's folder") : st.directory));
      check_name(name);
      const std::string path = joined(st.directory, name);
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        std::vector<std::string> searched{path};
        throw JinjaError(not_found(name, {st.directory}, searched));
      }
      unique_files({path});
      if (++file_loads_ > kMaxFileLoads)
        throw JinjaError("more than " + std::to_string(kMaxFileLoads) + " files loaded through includes");
      return std::make_pair(read_included(path), path);
    };
    try {
      return render_jinja(text, st.data, st.display, options);
    } catch (const SpecError& e) {
      // Errors in this file say where it was included from (deeper ones already do).
      if (st.note.empty() || e.where().file != st.display || has_include_note(e)) throw;
      throw SpecError(e.where(), e.message() + " (" + st.note + ")");
    }
  }

  // The state of a file that `parent` includes at `where`.
  FileState child_of(const FileState& parent, const std::string& path, const JinjaCall& call, bool inherit) {
    FileState child;
    child.display = path;
    child.directory = directory_of(path);
    child.note = "included from " + call.where.str() + (parent.note.empty() ? "" : ", " + parent.note);
    child.data = parent.data;
    if (inherit)
      for (const auto& [k, v] : call.locals)
        if (!k.empty() && k[0] != '_' && !v.is_callable()) child.data[k] = v;
    for (const auto& [k, v] : call.kwargs)
      if (k != "indices" && k != "inherit_parse_data") child.data[k] = v;
    child.include_dirs = parent.include_dirs;
    child.includes.loaded = parent.includes.loaded;
    child.includes.several = parent.includes.several;
    return child;
  }

  // Every file `p` names (a glob, a list of them) relative to the file, then to its
  // add_to_path() folders, as AccelForge's find_paths: display paths, each file once.
  std::vector<std::string> find_paths(const FileState& st, const JinjaValue& p) {
    if (p.is_sequence()) {
      std::vector<std::string> all;
      for (const auto& item : p.list())
        for (auto& f : find_paths(st, item)) all.push_back(std::move(f));
      return unique_files(all);
    }
    if (!p.is_string()) throw JinjaError("a path must be a string, not " + jinja::an(p));
    const std::string& name = p.as_string();
    if (name.empty()) throw JinjaError("an empty path");
    check_name(name);
    std::vector<std::string> dirs;
    if (fs::path(name).is_absolute()) dirs.push_back("");
    else {
      dirs.push_back(st.directory);
      dirs.insert(dirs.end(), st.include_dirs.begin(), st.include_dirs.end());
    }
    std::vector<std::string> found, searched;
    for (const auto& d : dirs) {
      const std::string pattern = joined(d, name);
      if (std::find(searched.begin(), searched.end(), pattern) != searched.end()) continue;
      searched.push_back(pattern);
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (std::size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
      globfree(&g);
    }
    if (found.empty()) throw JinjaError(not_found(name, dirs, searched));
    return unique_files(found);
  }

  std::vector<std::string> unique_files(const std::vector<std::string>& paths) const {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& p : paths) {
      const std::string c = canonical(p);
      if (!root_.empty() && c.compare(0, root_.size(), root_) != 0)
        throw JinjaError("'" + p + "' is outside the folder that includes may read");
      if (seen.insert(c).second) out.push_back(p);
    }
    return out;
  }

  // With an include root, only relative names that stay inside it.
  void check_name(const std::string& name) const {
    if (root_.empty()) return;
    if (fs::path(name).is_absolute() || name.find("..") != std::string::npos)
      throw JinjaError("'" + name + "' is outside the folder that includes may read");
  }

  static std::string not_found(const std::string& name, const std::vector<std::string>& dirs,
                               const std::vector<std::string>& searched) {
    std::vector<std::string> nearby;  // files next to where it was looked for
    std::set<std::string> listed;
    for (const auto& d : dirs) {
      if (!listed.insert(joined(d, name)).second) continue;
      std::error_code ec;
      const fs::path dir = fs::path(joined(d, name)).parent_path();
      for (const auto& entry : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
        const fs::path rel = fs::path(name).parent_path() / entry.path().filename();
        nearby.push_back(rel.string());
      }
    }
    // Only a near miss is worth suggesting among file names.
    std::string hint = did_you_mean(name, nearby);
    if (!hint.empty()) {
      const std::string best = hint.substr(hint.find('\'') + 1, hint.rfind('\'') - hint.find('\'') - 1);
      if (jinja::edit_distance(name, best) > std::max<std::size_t>(2, name.size() / 4)) hint.clear();
    }
    return "cannot find '" + name + "'" + hint + "; looked for " + join(searched);
  }

  std::string read_included(const std::string& path) {
    try {
      return read_file(path);
    } catch (const SpecError& e) {
      throw JinjaError("cannot read '" + path + "': " + e.message());
    }
  }

  // A file being loaded must not include itself, directly or not.
  struct Visit {
    Visit(Loader& loader, const std::string& path) : loader_(loader) {
      const std::string key = canonical(path);
      for (const auto& [k, shown] : loader.stack_)
        if (k == key) {
          std::vector<std::string> chain;
          bool on = false;
          for (const auto& [k2, s2] : loader.stack_) {
            on = on || k2 == key;
            if (on) chain.push_back(s2);
          }
          chain.push_back(path);
          throw JinjaError("include cycle: " + join(chain, ", which includes "));
        }
      loader.stack_.emplace_back(key, path);
    }
    ~Visit() { loader_.stack_.pop_back(); }
    Loader& loader_;
  };

 public:
  // The file stack starts with the file given (push it before loading it).
  std::vector<std::pair<std::string, std::string>> stack_;  // canonical, display

 private:
  JinjaValue include(FileState& st, JinjaCall& call, bool single) {
    if (call.args.empty()) throw JinjaError(std::string(single ? "include" : "include_all") + "() needs a path");
    JinjaValue indices = call.args.size() > 1 ? call.args[1] : JinjaValue(std::string());
    if (const JinjaValue* v = call.kwarg("indices")) indices = *v;
    JinjaValue inherit = call.args.size() > 2 ? call.args[2] : JinjaValue(true);
    if (const JinjaValue* v = call.kwarg("inherit_parse_data")) inherit = *v;
    if (!indices.is_string()) throw JinjaError("include(): indices must be a string such as 'workload.einsums'");
    const std::vector<std::string> paths = find_paths(st, call.args[0]);
    if (single && paths.size() > 1)
      throw JinjaError("include(" + call.args[0].repr() + ") matches " + std::to_string(paths.size()) +
                       " files (" + join(paths) + "); use include_all() for several");
    std::vector<SpecNodePtr> roots;
    for (const auto& path : paths) {
      Visit visit(*this, path);
      FileState child = child_of(st, path, call, inherit.truthy());
      roots.push_back(load_yaml(child, read_included(path)));
    }
    // AccelForge's name: the including file's name, a counter, no punctuation.
    std::string name = fs::path(st.display).stem().string() + "_" + std::to_string(st.include_counter++);
    name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return !jinja::is_ident_char(c); }), name.end());
    st.includes.loaded[name] = std::move(roots);
    st.includes.several[name] = paths.size() > 1;
    std::string path = indices.as_string();
    path.erase(0, path.find_first_not_of('.') == std::string::npos ? path.size() : path.find_first_not_of('.'));
    return "!include_loaded " + name + (path.empty() ? "" : "." + path);
  }

  JinjaValue include_text(FileState& st, JinjaCall& call) {
    if (call.args.empty()) throw JinjaError("include_text() needs a path");
    JinjaValue inherit = call.args.size() > 1 ? call.args[1] : JinjaValue(true);
    if (const JinjaValue* v = call.kwarg("inherit_parse_data")) inherit = *v;
    auto combined = std::make_shared<RenderedTemplate>();
    for (const auto& path : find_paths(st, call.args[0])) {
      Visit visit(*this, path);
      FileState child = child_of(st, path, call, inherit.truthy());
      const RenderedTemplate part = render(child, read_included(path));
      // Several files are joined with a newline, as AccelForge joins them.
      if (!combined->files.empty()) combined->text += '\n';
      const int offset = int(combined->files.size());
      combined->text += part.text;
      combined->files.insert(combined->files.end(), part.files.begin(), part.files.end());
      combined->file_notes.insert(combined->file_notes.end(), part.file_notes.begin(), part.file_notes.end());
      combined->source_line.insert(combined->source_line.end(), part.source_line.begin(), part.source_line.end());
      for (int f : part.source_file) combined->source_file.push_back(f + offset);
    }
    call.pasted = combined;
    return combined->text;
  }

  // `!include path` in YAML: the file's YAML, loaded with this file's data.
  SpecNodePtr load_tag_include(FileState& st, const std::string& path, const SpecNode& at) {
    try {
      check_name(path);
      unique_files({path});
      Visit visit(*this, path);
      FileState child;
      child.display = path;
      child.directory = directory_of(path);
      child.note = "included from " + at.where.str() + (st.note.empty() ? "" : ", " + st.note);
      child.data = st.data;
      return load_yaml(child, read_included(path));
    } catch (const JinjaError& e) {
      fail_at(at, e.what());
    }
  }

  JinjaGlobals make_globals(FileState& st) {
    JinjaGlobals g;
    auto one_path = [](const JinjaCall& call, const char* f) -> const JinjaValue& {
      if (call.args.size() != 1) throw JinjaError(std::string(f) + "() takes one path");
      return call.args[0];
    };
    g["include"] = [this, &st](JinjaCall& call) { return include(st, call, true); };
    g["include_all"] = [this, &st](JinjaCall& call) { return include(st, call, false); };
    g["include_text"] = [this, &st](JinjaCall& call) { return include_text(st, call); };
    g["find_paths"] = [this, &st, one_path](JinjaCall& call) {
      JinjaList out;
      for (const auto& p : find_paths(st, one_path(call, "find_paths"))) out.emplace_back(canonical(p));
      return JinjaValue(std::move(out));
    };
    g["find_path"] = [this, &st, one_path](JinjaCall& call) -> JinjaValue {
      const JinjaValue& p = one_path(call, "find_path");
      if (!p.is_string()) throw JinjaError("find_path() needs a string");
      return canonical(first_existing(st, p.as_string()));
    };
    g["path_exists"] = [this, &st, one_path](JinjaCall& call) -> JinjaValue {
      const JinjaValue& p = one_path(call, "path_exists");
      if (!p.is_string()) throw JinjaError("path_exists() needs a string");
      try {
        first_existing(st, p.as_string());
        return true;
      } catch (const JinjaError&) {
        return false;
      }
    };
    g["add_to_path"] = [this, &st, one_path](JinjaCall& call) -> JinjaValue {
      for (auto& dir : find_paths(st, one_path(call, "add_to_path"))) st.include_dirs.push_back(std::move(dir));
      return std::string();
    };
    g["cwd"] = [&st](JinjaCall& call) -> JinjaValue {
      if (!call.args.empty()) throw JinjaError("cwd() takes no arguments");
      return canonical(st.directory.empty() ? "." : st.directory);
    };
    return g;
  }

  std::string first_existing(const FileState& st, const std::string& name) {
    check_name(name);
    std::vector<std::string> dirs, searched;
    if (fs::path(name).is_absolute()) dirs.push_back("");
    else {
      dirs.push_back(st.directory);
      dirs.insert(dirs.end(), st.include_dirs.begin(), st.include_dirs.end());
    }
    for (const auto& d : dirs) {
      const std::string p = joined(d, name);
      std::error_code ec;
      if (fs::exists(p, ec)) {
        unique_files({p});  // inside the include root, if there is one
        return p;
      }
      if (std::find(searched.begin(), searched.end(), p) == searched.end()) searched.push_back(p);
    }
    throw JinjaError(not_found(name, dirs, searched));
  }

  const JinjaVariables& defines_;
  const std::string root_;  // canonical, or "" for no limit
  NodeBudget nodes_{kMaxNodes, kMaxNodes};
  std::int64_t iterations_ = kMaxIterations;
  int file_loads_ = 0;
};

// ---------------------------------------------------------------- reading the spec

std::string kind_of(const SpecNode& n) {
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
  for (auto& a : parsed.accesses) einsum.accesses.push_back({a.tensor, a.ranks, a.projection, a.is_output, einsum.where});
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
  in.check_keys(node, "an Einsum", {"name", "tensor_accesses", "einsum", "iteration_space_shape", "rank_sizes"},
                {"is_copy_operation", "renames", "n_instances"});
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
  add_rank_variables(einsum);
  return einsum;
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
    if (key.empty() || key == "All") continue;
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
                       " no tensor of the workload (looptrace reads All, tensor names and 'A | B'; "
                       "AccelForge's set expressions are not evaluated), so it sizes nothing there" +
                       (unsized.empty() ? std::string()
                                        : "; without a size: " + join(unsized) + " (no byte figures for them)")});
  }
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
  if (const SpecNode* bits = node.find("bits_per_value"); bits && bits->is_map())
    warn_unknown_bits_keys(in, *bits, w);
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

// The `!Memory` nodes of the arch, wherever they nest, with their sizes in bits.
void read_memories(const Reader& in, const SpecNode& node, const SpecNode* variables,
                   std::map<std::string, ArchMemory>& out, int depth) {
  if (depth > 100) return;
  if (node.is_sequence())
    for (const auto& item : node.items) read_memories(in, *item, variables, out, depth + 1);
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
      } catch (const SpecError&) {
      }
    }
    out.emplace(name->text, std::move(m));
  }
  for (const auto& [k, v] : node.entries) read_memories(in, *v, variables, out, depth + 1);
}

// The arch's components by name (!Memory, !Compute, !Container, !Toll, wherever they
// nest) and the names of the spatial dimensions each gives ("spatial: [{name: X, ...}]").
struct ArchComponents {
  std::map<std::string, std::string> kind;                  // name -> tag, e.g. "!Memory"
  std::map<std::string, std::vector<std::string>> spatial;  // name -> its spatial names
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
          out.spatial[name->text].push_back(n->text);
  }
  for (const auto& [k, v] : node.entries) read_components(*v, out, depth + 1);
}

// Names a mapping node uses that the arch does not define: a Storage component that
// is no component of the arch, a Compute component that is no !Compute, a !Spatial
// whose name (or component) gives no such spatial dimension. Errors at the node.
void check_against_arch(const MappingNode& node, const ArchComponents& arch,
                        const std::vector<std::string>& computes, const std::vector<std::string>& spatial_names) {
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
      const auto given = arch.spatial.find(node.component);
      const std::vector<std::string>& allowed = node.component.empty() ? spatial_names
                                                : given == arch.spatial.end() ? std::vector<std::string>{}
                                                                              : given->second;
      if (std::find(allowed.begin(), allowed.end(), node.name) == allowed.end())
        fail("!Spatial name '" + node.name + "' is not a spatial dimension of " +
             (node.component.empty() ? std::string("the arch") : "'" + node.component + "'") +
             did_you_mean(node.name, allowed) +
             (allowed.empty() ? std::string(" (it has none)") : " (it has: " + join(allowed) + ")"));
    }
  }
  for (const MappingNode& child : node.children) check_against_arch(child, arch, computes, spatial_names);
}

void check_mapping_against_arch(const SpecNode& arch_node, const Mapping& mapping) {
  ArchComponents arch;
  read_components(arch_node, arch, 0);
  if (arch.kind.empty()) return;  // no component to check against
  std::vector<std::string> computes, spatial_names;
  for (const auto& [name, tag] : arch.kind)
    if (tag == "!Compute") computes.push_back(name);
  for (const auto& [component, dims] : arch.spatial) spatial_names.insert(spatial_names.end(), dims.begin(), dims.end());
  check_against_arch(mapping.root, arch, computes, spatial_names);
}

void warn(Spec& spec, SourceLocation where, std::string message) {
  SpecWarning w;
  w.where = std::move(where);
  w.message = std::move(message);
  spec.warnings.push_back(std::move(w));
}

// Mistakes that still trace, said as warnings: a loop's tile_shape larger than its rank
// in every Einsum below it, a Storage node holding a tensor that no Einsum below it
// accesses, Einsums of the workload that no Compute node maps.
class MappingLint {
 public:
  explicit MappingLint(Spec& spec) : spec_(spec) {
    for (const Einsum& e : spec.workload.einsums) {
      try {
        boxes_.emplace(e.name, einsum_box(spec.workload, e));
      } catch (const SpecError&) {  // the compiler reports it, with its location
      }
    }
  }

  void run() {
    std::set<std::string> mapped = einsums_of(spec_.mapping.root);
    std::vector<std::string> unmapped;
    for (const Einsum& e : spec_.workload.einsums)
      if (!mapped.count(e.name)) unmapped.push_back("'" + e.name + "'");
    if (!unmapped.empty() && !mapped.empty())
      warn(spec_, spec_.mapping.root.where,
           "the mapping leaves Einsum" + std::string(unmapped.size() > 1 ? "s " : " ") + join(unmapped) +
               " of the workload unmapped (no !Compute names " +
               (unmapped.size() > 1 ? "them): they are" : "it): it is") + " not traced");
  }

 private:
  // The Einsums computed at or below `node`, warning of what its chain holds.
  std::set<std::string> einsums_of(const MappingNode& node) {
    if (node.kind == NodeKind::Compute) return {node.einsum};
    std::set<std::string> all;
    if (node.kind != NodeKind::Nested) {  // a split: each child is a branch
      for (const MappingNode& c : node.children) merge(all, einsums_of(c));
      return all;
    }
    // A chain: each node is the parent of the ones after it.
    std::vector<std::set<std::string>> below(node.children.size() + 1);
    for (std::size_t i = node.children.size(); i-- > 0;) {
      below[i] = below[i + 1];
      merge(below[i], einsums_of(node.children[i]));
    }
    for (std::size_t i = 0; i < node.children.size(); ++i) check(node.children[i], below[i + 1]);
    return below.front();
  }
  static void merge(std::set<std::string>& into, const std::set<std::string>& from) { into.insert(from.begin(), from.end()); }

  void check(const MappingNode& node, const std::set<std::string>& below) {
    if (below.empty()) return;
    if (node.kind == NodeKind::Storage)
      for (const std::string& t : node.tensors) {
        const bool accessed = std::any_of(below.begin(), below.end(), [&](const std::string& e) {
          const Einsum* einsum = spec_.workload.find_einsum(e);
          return einsum && std::any_of(einsum->accesses.begin(), einsum->accesses.end(),
                                       [&](const TensorAccess& a) { return a.tensor == t; });
        });
        const bool in_workload = std::any_of(spec_.workload.einsums.begin(), spec_.workload.einsums.end(),
                                             [&](const Einsum& e) {
          return std::any_of(e.accesses.begin(), e.accesses.end(), [&](const TensorAccess& a) { return a.tensor == t; });
        });
        if (!accessed && in_workload)  // (one no Einsum accesses at all is an error elsewhere)
          warn(spec_, node.where, "!Storage holds tensor '" + t + "', which no Einsum below it accesses (" +
                                      quoted(below) + ")");
      }
    if (node.is_loop() && node.tile_shape > 0) {
      std::int64_t widest = 0;
      for (const std::string& e : below)
        if (auto box = boxes_.find(e); box != boxes_.end())
          for (std::size_t v = 0; v < box->second.variables.size(); ++v)
            if (box->second.variables[v] == node.rank_variable) widest = std::max(widest, box->second.extent[v]);
      if (widest > 0 && node.tile_shape > widest)
        warn(spec_, node.where, "tile_shape " + std::to_string(node.tile_shape) + " of the !" + node.tag +
                                    " loop over '" + node.rank_variable + "' is larger than its rank (" +
                                    node.rank_variable + " < " + std::to_string(widest) + " below it): one tile");
    }
  }
  static std::string quoted(const std::set<std::string>& names) {
    std::vector<std::string> q;
    for (const auto& n : names) q.push_back("'" + n + "'");
    return join(q);
  }

  Spec& spec_;
  std::map<std::string, EinsumBox> boxes_;
};

struct Source {
  std::string name;
  std::optional<std::string> text;  // none: read the file
};

// A top-level key of the spec files, and the file that gave it first.
struct TopKey {
  SpecNodePtr key, value;
  std::string file;
};

// Renders and reads one file's top-level keys into `top` (the first file's win);
// false when the file is empty.
bool read_top_keys(Loader& loader, const Source& source, const JinjaVariables& variables, Spec& spec,
                   std::map<std::string, TopKey>& top) {
  const std::string text = source.text ? *source.text : read_file(source.name);
  FileState st;
  st.display = source.name;
  st.directory = directory_of(source.name);
  st.data = variables;
  loader.stack_ = {{canonical(source.name), source.name}};
  SpecNodePtr root;
  try {
    root = loader.load_yaml(st, text);
  } catch (const JinjaError& e) {  // from a host function outside any tag (cannot happen)
    throw SpecError({source.name, 0, 0}, e.what());
  }
  if (root->is_null()) {
    warn(spec, SourceLocation{source.name, 0, 0}, "the file is empty (no top-level keys)");
    return false;
  }
  const Reader in;
  if (!root->is_map())
    in.fail(*root, "a spec file must be a mapping of top-level keys (workload:, mapping:, arch:, ...), not " +
                       kind_of(*root));
  in.check_unique_keys(*root, "a spec file");
  for (const auto& [k, v] : root->entries) {
    const std::string& key = k->text;
    if (std::find(kSpecKeys.begin(), kSpecKeys.end(), key) == kSpecKeys.end())
      in.fail(*k, "unknown top-level key '" + key + "' in " + source.name + did_you_mean(key, kSpecKeys) +
                      "; a spec's top-level keys are: " + join(kSpecKeys));
    auto [it, fresh] = top.emplace(key, TopKey{k, v, source.name});
    if (!fresh)
      warn(spec, k->where, "top-level key '" + key + "' is ignored here: " + it->second.file + " (line " +
                               std::to_string(it->second.key->where.line) +
                               ") gives it first, and the first file wins, as in AccelForge");
  }
  return true;
}

// -D values no template looked up are likely typos.
void warn_unused_defines(const Loader& loader, const JinjaVariables& variables, Spec& spec) {
  const auto& used = loader.looked_up;
  std::vector<std::string> candidates;
  for (const auto& name : used)
    if (!variables.count(name)) candidates.push_back(name);
  for (const auto& [name, value] : variables)
    if (!used.count(name))
      warn(spec, SourceLocation{}, "-D " + name + " is not used by any file" + did_you_mean(name, candidates));
}

Spec load(const std::vector<Source>& sources, const JinjaVariables& variables, const LoadOptions& options) {
  Loader loader(variables, options.include_root);
  Spec spec;
  std::map<std::string, TopKey> top;
  std::vector<std::string> empty_files;
  std::set<std::string> seen_files;
  for (const auto& source : sources) {
    spec.files.push_back(source.name);
    const std::string identity = source.text ? "text:" + source.name : canonical(source.name);
    if (!seen_files.insert(identity).second) {
      warn(spec, SourceLocation{source.name, 0, 0}, "the file is given twice; it is read once");
      continue;
    }
    if (!read_top_keys(loader, source, variables, spec, top)) empty_files.push_back(source.name);
  }
  warn_unused_defines(loader, variables, spec);

  auto files_read = [&] {
    std::string s = join(spec.files);
    if (!empty_files.empty()) s += " (" + join(empty_files) + (empty_files.size() == 1 ? " is" : " are") + " empty)";
    return s;
  };
  const Reader in;
  auto workload = top.find("workload");
  if (workload == top.end()) throw SpecError("no 'workload:' in the spec files " + files_read());
  const SpecNode* variables_node = top.count("variables") ? top.at("variables").value.get() : nullptr;
  spec.workload = read_workload(in, *workload->second.value, variables_node);
  spec.warnings.insert(spec.warnings.end(), in.warnings.begin(), in.warnings.end());
  if (auto arch = top.find("arch"); arch != top.end()) read_memories(in, *arch->second.value, variables_node, spec.memories, 0);
  auto mapping = top.find("mapping");
  if (mapping != top.end()) {
    spec.mapping = read_mapping(in, *mapping->second.value);
    spec.has_mapping = true;
    if (auto arch = top.find("arch"); arch != top.end()) check_mapping_against_arch(*arch->second.value, spec.mapping);
    MappingLint(spec).run();
  } else if (options.require_mapping) {
    throw SpecError("no 'mapping:' in the spec files " + files_read());
  }
  return spec;
}

}  // namespace

Spec load_spec_text(const std::vector<std::pair<std::string, std::string>>& sources,
                    const JinjaVariables& variables, const LoadOptions& options) {
  std::vector<Source> s;
  for (const auto& [name, text] : sources) s.push_back({name, text});
  return load(s, variables, options);
}

Spec load_spec(const std::vector<std::string>& files, const JinjaVariables& variables, const LoadOptions& options) {
  std::vector<Source> s;
  for (const auto& f : files) s.push_back({f, std::nullopt});
  return load(s, variables, options);
}

}  // namespace looptrace
