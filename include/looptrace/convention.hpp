// Which counting the movement figures and the transfer trace follow.
#pragma once

namespace looptrace {

// What the figures mean: SEMANTICS' LoopTree definitions, or Timeloop's (sliding-window
// reuse between a buffer instance's consecutive tiles, reset when the step changes;
// figures per instance; multicast and spatial reduction; partial sums read back).
enum class Convention { looptree, timeloop };

}  // namespace looptrace
