// What `looptrace cache` prints: one JSON object (`{"caches": [...], "curve": ...}`) or
// a table a person reads (`--format text`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/cache_run.hpp"

namespace looptrace {

nlohmann::ordered_json cache_json(const CacheRun& run, const Schedule& schedule);
std::string cache_text(const CacheRun& run, const Schedule& schedule);

}  // namespace looptrace
