// The summary as one JSON object (the `looptrace summary` output).
#pragma once

#include <nlohmann/json.hpp>

#include "looptrace/schedule.hpp"
#include "looptrace/summary.hpp"

namespace looptrace {

nlohmann::ordered_json summary_json(const TraceSummary& summary, const Schedule& schedule);

}  // namespace looptrace
