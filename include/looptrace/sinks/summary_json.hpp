// The summary as one JSON object (the `looptrace summary` output), and back (the input
// of `looptrace merge`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/closed_form/summary.hpp"

namespace looptrace {

// Tile windows go under "tile_windows" as [start, end] pairs (full form) or under
// "tile_window_runs" as {start, length, period, count} objects (compact form). The
// "merge" object holds what merging shards needs: the window covered, the schedule's
// length, the sample size, and the unclipped windows behind clipped ones.
nlohmann::ordered_json summary_json(const TraceSummary& summary, const Schedule& schedule);
nlohmann::ordered_json summary_json(const TraceSummary& summary);

// Reads what summary_json wrote; throws SpecError naming `name` and the key that is
// missing, mistyped or unknown.
TraceSummary summary_from_json(const nlohmann::ordered_json& json, const std::string& name);

}  // namespace looptrace
