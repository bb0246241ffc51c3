// A run that selects nothing still exits 0, but says so on stderr, and why.
#pragma once

#include <string>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"

namespace looptrace::cli {

// Why `options` select no access of `schedule`: the filters share no (Einsum, tensor)
// pair, the timestep window is empty, or the selected Einsums compute at none of the
// selected timesteps.
std::string why_nothing_selected(const Schedule& schedule, const TraceOptions& options);

// "looptrace: note: nothing selected: <why>; <what>" on stderr (what: "the trace is empty").
void note_nothing_selected(const Schedule& schedule, const TraceOptions& options, const std::string& what);

}  // namespace looptrace::cli
