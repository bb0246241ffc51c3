#include "looptrace/stream.hpp"

#include <algorithm>

namespace looptrace {

TraceFilter TraceFilter::from_options(const Schedule& s, const TraceOptions& o) {
  for (const auto& t : o.tensors)
    if (s.find_tensor(t) < 0) {
      std::string known;
      for (const auto& x : s.tensors) known += (known.empty() ? "" : ", ") + x.name;
      throw SpecError("--tensors names '" + t + "', which no traced Einsum accesses (tensors: " +
                      known + ")");
    }
  for (const auto& e : o.einsums)
    if (s.find_einsum(e) < 0) {
      std::string known;
      for (const auto& x : s.einsums) known += (known.empty() ? "" : ", ") + x;
      throw SpecError("--einsums names '" + e + "', which the workload does not define (Einsums: " +
                      known + ")");
    }
  auto keeps = [](const std::vector<std::string>& list, const std::string& name) {
    return list.empty() || std::find(list.begin(), list.end(), name) != list.end();
  };
  TraceFilter f;
  for (const auto& t : s.traces)
    f.trace_enabled.push_back(keeps(o.tensors, t.tensor) && keeps(o.einsums, t.einsum));
  for (const auto& l : s.leaves) f.leaf_enabled.push_back(keeps(o.einsums, l.einsum));
  return f;
}

std::vector<LeafSource> make_leaf_sources(const Schedule& s, const TraceFilter& f,
                                          std::int64_t max_tile_points) {
  std::vector<LeafSource> out;
  for (std::size_t i = 0; i < s.leaves.size(); ++i) {
    if (!f.leaf_enabled[i]) continue;
    std::vector<bool> enabled;
    for (const auto& lt : s.leaves[i].tensors) enabled.push_back(f.trace_enabled[lt.trace]);
    out.emplace_back(s, s.leaves[i], std::move(enabled), max_tile_points);
  }
  return out;
}

AccessStream::AccessStream(const Schedule& schedule, const TraceOptions& options)
    : schedule_(&schedule),
      merge_(make_leaf_sources(schedule, TraceFilter::from_options(schedule, options),
                               options.max_tile_points),
             TimeSelection::from_options(options, schedule.n_timesteps)) {}

std::span<const AccessRecord> AccessStream::next_batch(std::size_t target) {
  buffer_.clear();
  while (buffer_.size() < target) {
    bool more = merge_.pump([&](LeafSource& leaf) {
      leaf.emit(buffer_);
      return buffer_.size() < target;
    });
    if (!more) break;
  }
  return buffer_;
}

}  // namespace looptrace
