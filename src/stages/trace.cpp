#include "looptrace/trace.hpp"

#include <algorithm>

#include "looptrace/stream.hpp"

namespace looptrace {

std::int64_t TensorAccessTrace::tensor_size() const {
  std::int64_t n = 1;
  for (std::int64_t d : tensor_shape) n *= d;
  return n;
}

std::vector<std::string> AccessTrace::tensors() const {
  std::vector<std::string> out;
  for (const auto& t : traces)
    if (std::find(out.begin(), out.end(), t.tensor) == out.end()) out.push_back(t.tensor);
  return out;
}

std::vector<std::string> AccessTrace::einsums() const {
  std::vector<std::string> out;
  for (const auto& s : einsum_timespans) out.push_back(s.einsum);
  return out;
}

std::vector<std::string> AccessTrace::memory_levels() const {
  std::vector<std::string> out;
  for (const auto& l : tile_windows) out.push_back(l.level);
  return out;
}

std::vector<const TensorAccessTrace*> AccessTrace::for_tensor(const std::string& tensor) const {
  std::vector<const TensorAccessTrace*> out;
  for (const auto& t : traces)
    if (t.tensor == tensor) out.push_back(&t);
  return out;
}

std::vector<TimeRange> AccessTrace::tile_lifetime(const std::string& level,
                                                  const std::string& tensor) const {
  return find_windows(tile_windows, level, tensor);
}

void AccessTrace::write_csv(std::ostream& out) const {
  out << "einsum,tensor,is_output,timestep,element\n";
  for (const auto& t : traces)
    for (std::size_t i = 0; i < t.n_accesses(); ++i)
      out << t.einsum << ',' << t.tensor << ',' << (t.is_output ? "True" : "False") << ','
          << t.timestep[i] << ',' << t.element[i] << '\n';
}

AccessTrace trace_accesses(const Schedule& s, const TraceOptions& options,
                           std::int64_t max_points) {
  const TraceSummary summary = summarize(s, options);
  for (std::size_t i = 0; i < s.leaves.size(); ++i)
    if (summary.leaf_points[i] > max_points)
      throw SpecError(s.leaves[i].where,
                      "Einsum '" + s.leaves[i].einsum + "' enumerates " +
                          std::to_string(summary.leaf_points[i]) + " points, more than max_points = " +
                          std::to_string(max_points) +
                          "; raise the limit, trace a prefix, or stream the trace instead");
  AccessTrace out;
  out.n_timesteps = summary.n_timesteps;
  out.truncated = summary.truncated;
  out.einsum_timespans = summary.einsum_timespans;
  out.tile_windows = summary.tile_windows;
  std::vector<int> slot(s.traces.size(), -1);  // trace -> index in out.traces
  for (const auto& c : summary.traces) {
    const TensorInfo& tensor = s.tensors[s.traces[c.trace].tensor_index];
    slot[c.trace] = int(out.traces.size());
    TensorAccessTrace t{c.tensor, c.einsum, c.is_output, {}, {}, {}, tensor.ranks, tensor.shape};
    t.timestep.reserve(std::size_t(c.n_accesses));
    t.element.reserve(std::size_t(c.n_accesses));
    out.traces.push_back(std::move(t));
  }
  for (const auto& name : summary.tensors) {
    const TensorInfo& tensor = s.tensors[std::size_t(s.find_tensor(name))];
    out.tensor_shapes.emplace_back(name, tensor.shape);
    out.tensor_ranks.emplace_back(name, tensor.ranks);
  }

  AccessStream stream(s, options);
  for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch())
    for (const AccessRecord& r : batch) {
      TensorAccessTrace& t = out.traces[std::size_t(slot[r.trace])];
      t.timestep.push_back(r.timestep);
      t.element.push_back(r.element);
      Coordinates c = unravel(r.element, s.tensors[s.traces[r.trace].tensor_index]);
      t.coordinates.insert(t.coordinates.end(), c.begin(), c.end());
    }
  return out;
}

AccessTrace trace_accesses(const Spec& spec, const TraceOptions& options,
                           std::int64_t max_points) {
  return trace_accesses(compile_schedule(spec), options, max_points);
}

}  // namespace looptrace
