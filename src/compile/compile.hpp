// What compile_schedule works out per LoopTree node on the way, kept for describe
// (which formats it) instead of being worked out again. Internal (not installed).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"

namespace looptrace {

struct LoopTreeTable {
  std::unordered_map<const MappingNode*, std::int64_t> iterations;  // loop -> tiles it cuts
  std::unordered_map<const MappingNode*, std::int64_t> durations;   // Compute, Nested, split -> timesteps
};

// compile_schedule, keeping its table; it also measures the branches of a Nested node
// after its continuation, which no path reaches (describe shows them, tracing does not).
Schedule compile_schedule(const Spec& spec, LoopTreeTable& table);

}  // namespace looptrace
