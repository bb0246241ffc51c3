#include "looptrace/sinks/summary_json.hpp"

namespace looptrace {

nlohmann::ordered_json summary_json(const TraceSummary& s, const Schedule& schedule) {
  using json = nlohmann::ordered_json;
  json out;
  out["n_timesteps"] = s.n_timesteps;
  out["truncated"] = s.truncated;
  out["tensors"] = s.tensors;
  out["einsums"] = s.einsums;
  out["memory_levels"] = s.memory_levels;
  json shapes = json::object(), ranks = json::object();
  for (const auto& name : s.tensors) {
    const TensorInfo& t = schedule.tensors[std::size_t(schedule.find_tensor(name))];
    shapes[name] = t.shape;
    ranks[name] = t.ranks;
  }
  out["tensor_shapes"] = shapes;
  out["tensor_ranks"] = ranks;
  json spans = json::object();
  for (const auto& span : s.einsum_timespans) spans[span.einsum] = {span.first, span.end};
  out["einsum_timespans"] = spans;
  json windows = json::object();
  for (const auto& level : s.tile_windows) {
    json per_tensor = json::object();
    for (const auto& t : level.tensors) {
      json list = json::array();
      for (const auto& w : t.windows) list.push_back({w.from, w.to});
      per_tensor[t.tensor] = list;
    }
    windows[level.level] = per_tensor;
  }
  out["tile_windows"] = windows;
  json traces = json::array();
  for (const auto& t : s.traces)
    traces.push_back({{"einsum", t.einsum}, {"tensor", t.tensor}, {"is_output", t.is_output},
                      {"n_accesses", t.n_accesses}});
  out["traces"] = traces;
  out["n_points"] = s.n_points;
  return out;
}

}  // namespace looptrace
