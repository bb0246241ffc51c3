#include "looptrace/frontend/load.hpp"

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

#include "front_end.hpp"
#include "jinja_internal.hpp"
#include "support/suggest.hpp"
#include "looptrace/frontend/concise_einsum.hpp"
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

using namespace front_end;

// Bounds on what one load may do, far beyond real specs: YAML nodes (aliases and
// includes repeat subtrees), Jinja loop iterations, files loaded through includes.
constexpr std::int64_t kMaxNodes = 500'000;
constexpr std::int64_t kMaxIterations = 1'000'000;
constexpr int kMaxFileLoads = 10'000;

// The top-level keys of AccelForge's Spec.
const std::vector<std::string> kSpecKeys = {"arch",   "config",    "mapper",   "mapping",
                                            "model",  "renames",   "sparse_optimizations",
                                            "variables", "workload"};

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
    // Only a near miss is worth suggesting among file names (paths share long prefixes).
    const auto best = closest(name, nearby, std::max<std::size_t>(2, name.size() / 4));
    return "cannot find '" + name + "'" + (best ? " (did you mean '" + *best + "'?)" : "") + "; looked for " +
           join(searched);
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

Spec load(const std::vector<Source>& sources, const Defines& defines, const LoadOptions& options) {
  const JinjaVariables variables = to_jinja(defines);
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
  if (auto renames = top.find("renames"); renames != top.end())
    spec.workload.default_renames = read_default_renames(in, *renames->second.value);
  spec.warnings.insert(spec.warnings.end(), in.warnings.begin(), in.warnings.end());
  if (auto arch = top.find("arch"); arch != top.end()) {
    read_memories(in, *arch->second.value, variables_node, spec.workload, spec.memories, 0);
    spec.fanouts = read_fanouts(in, *arch->second.value, variables_node);
  }
  auto mapping = top.find("mapping");
  if (mapping != top.end()) {
    spec.mapping = read_mapping(in, *mapping->second.value);
    spec.has_mapping = true;
    if (auto arch = top.find("arch"); arch != top.end()) check_mapping_against_arch(*arch->second.value, spec.mapping);
    lint_mapping(spec);
  } else if (options.require_mapping) {
    throw SpecError("no 'mapping:' in the spec files " + files_read());
  }
  return spec;
}

}  // namespace

Spec load_spec_text(const std::vector<std::pair<std::string, std::string>>& sources,
                    const Defines& defines, const LoadOptions& options) {
  std::vector<Source> s;
  for (const auto& [name, text] : sources) s.push_back({name, text});
  return load(s, defines, options);
}

Spec load_spec(const std::vector<std::string>& files, const Defines& defines, const LoadOptions& options) {
  std::vector<Source> s;
  for (const auto& f : files) s.push_back({f, std::nullopt});
  return load(s, defines, options);
}

}  // namespace looptrace
