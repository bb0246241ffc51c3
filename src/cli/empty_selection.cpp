#include "empty_selection.hpp"

#include <algorithm>
#include <iostream>

#include "looptrace/support/error.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "support/text.hpp"

namespace looptrace::cli {

namespace {

bool listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string range_text(const TimeRange& r) {
  return "[" + std::to_string(r.from) + ", " + std::to_string(r.to) + ")";
}

// The filters: no trace has both a listed Einsum and a listed tensor.
std::string filter_reason(const Schedule& s, const TraceOptions& o) {
  if (o.tensors.empty() || o.einsums.empty()) return {};
  std::vector<std::string> accessed;  // "Matmul1 accesses T1, W1, T2"
  for (const auto& e : o.einsums) {
    std::vector<std::string> tensors;
    for (const auto& t : s.traces) {
      if (t.einsum != e) continue;
      if (listed(o.tensors, t.tensor)) return {};
      if (!listed(tensors, t.tensor)) tensors.push_back(t.tensor);
    }
    accessed.push_back(e + (tensors.empty() ? " computes in no leaf" : " accesses " + join(tensors)));
  }
  return "no Einsum of --einsums " + join(o.einsums) + " accesses a tensor of --tensors " + join(o.tensors) +
         " (" + join(accessed, "; ") + ")";
}

std::string window_reason(const Schedule& s, const TraceOptions& o, const TimeSelection& selection) {
  const std::string n = std::to_string(s.n_timesteps);
  if (o.max_timesteps && *o.max_timesteps == 0) return "--max-timesteps 0 keeps no timestep";
  if (o.from && *o.from >= s.n_timesteps)
    return "--from " + std::to_string(*o.from) + " is at or past the end of the schedule (" + n + " timesteps)";
  if (o.from && o.max_timesteps && *o.from >= *o.max_timesteps)
    return "--from " + std::to_string(*o.from) + " is at or past --max-timesteps " + std::to_string(*o.max_timesteps);
  if (o.from && o.to && *o.from >= *o.to) return "the window " + range_text({*o.from, *o.to}) + " is empty";
  if (o.shard && selection.window.empty()) {
    TraceOptions unsharded = o;
    unsharded.shard.reset();
    const TimeRange whole = TimeSelection::from_options(unsharded, s.n_timesteps).window;
    return "shard " + std::to_string(o.shard->first) + "/" + std::to_string(o.shard->second) + " of the " +
           std::to_string(whole.to - whole.from) + " timesteps of " + range_text(whole) + " is empty";
  }
  if (selection.window.empty()) return "the timestep window " + range_text(selection.window) + " is empty";
  if (o.sample_timesteps && *o.sample_timesteps == 0) return "--sample-timesteps 0 picks no timestep";
  return {};
}

}  // namespace

std::string why_nothing_selected(const Schedule& s, const TraceOptions& o) {
  if (std::string why = filter_reason(s, o); !why.empty()) return why;
  const TimeSelection selection = TimeSelection::from_options(o, s.n_timesteps);
  if (std::string why = window_reason(s, o, selection); !why.empty()) return why;
  const std::string when = o.sample_timesteps
                               ? "the " + std::to_string(selection.ranges.size()) + " sampled timesteps of " +
                                     range_text(selection.window)
                               : "timesteps " + range_text(selection.window);
  if (!o.einsums.empty()) return "--einsums " + join(o.einsums) + " access nothing in " + when;
  return "nothing is accessed in " + when + (o.tensors.empty() ? "" : " of " + join(o.tensors));
}

void note_nothing_selected(const Schedule& s, const TraceOptions& o, const std::string& what) {
  std::cerr << "looptrace: note: nothing selected: " << printable(why_nothing_selected(s, o)) << "; " << what << "\n";
}

}  // namespace looptrace::cli
