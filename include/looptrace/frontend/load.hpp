// YAML (+ Jinja) files to a Spec, read as AccelForge reads them (its YAML loader and
// workload front end): include(), include_text(), add_to_path() and the other globals,
// `!include_loaded`, `<<` and `<<<` merges, rank sizes as expressions. Parsing only:
// what the schedule needs is checked by compile_schedule, which also names the file.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/frontend/arch.hpp"
#include "looptrace/frontend/mapping.hpp"
#include "looptrace/frontend/defines.hpp"
#include "looptrace/frontend/workload.hpp"

namespace looptrace {

// Something a user should hear about that does not stop the load.
struct SpecWarning {
  SourceLocation where;
  std::string message;

  std::string str() const;  // "file:line:column: warning: message"
};

struct Spec {
  Workload workload;
  std::map<std::string, ArchMemory> memories;  // by name
  std::vector<ArchFanout> fanouts;             // the arch's spatial dimensions
  Mapping mapping;
  bool has_mapping = false;
  std::vector<std::string> files;     // the files given, in order (not the included ones)
  std::vector<SpecWarning> warnings;  // a top-level key given twice, a -D nothing used, ...
};

struct LoadOptions {
  bool require_mapping = true;  // false: a workload alone is a spec (looptrace describe)
  // When set, include(), include_text(), find_path() and the other globals may only
  // name files inside this folder (relative paths without ".."): for untrusted specs.
  std::string include_root;
};

// Reads the files in order and merges them by top-level key: the first file that gives
// a key wins (as AccelForge's Spec.from_yaml), with a warning naming both files. Every
// file is a Jinja template rendered with `defines`. Unknown keys and tags, undefined
// variables and failed {% assert %}s are errors (SpecError, naming file:line:column).
Spec load_spec(const std::vector<std::string>& files, const Defines& defines = {},
               const LoadOptions& options = {});

// The same from in-memory text: (name, text) pairs, the name used in messages and as
// the place that includes are relative to.
Spec load_spec_text(const std::vector<std::pair<std::string, std::string>>& sources,
                    const Defines& defines = {}, const LoadOptions& options = {});

}  // namespace looptrace
