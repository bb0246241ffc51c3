// The movement report as one JSON object (`looptrace movement`) or as a table a person
// reads (`--format text`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "looptrace/closed_form/movement.hpp"

namespace looptrace {

nlohmann::ordered_json movement_json(const MovementReport& report);
std::string movement_text(const MovementReport& report);

}  // namespace looptrace
