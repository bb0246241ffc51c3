// YAML (+ Jinja) files to a Spec. Parsing only: what the schedule needs is checked by
// compile_schedule, which also names the file and line.
#pragma once

#include <string>
#include <vector>

#include "looptrace/spec/jinja.hpp"
#include "looptrace/spec/mapping.hpp"
#include "looptrace/spec/workload.hpp"

namespace looptrace {

struct Spec {
  Workload workload;
  Mapping mapping;
};

// Reads the files in order and merges them by top-level key (a later file's key
// replaces an earlier one's). Unknown keys and tags are errors.
Spec load_spec(const std::vector<std::string>& files, const JinjaVariables& variables = {});

// The same from in-memory text: (name, text) pairs, the name used in messages.
Spec load_spec_text(const std::vector<std::pair<std::string, std::string>>& sources,
                    const JinjaVariables& variables = {});

}  // namespace looptrace
