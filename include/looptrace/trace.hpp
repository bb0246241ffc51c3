// The materialized trace of the reference (accelforge.tracegen.AccessTrace): every
// access held in memory, per (Einsum, tensor). For small traces and tests; stream
// large ones with AccessStream.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/closed_form/summary.hpp"

namespace looptrace {

// The reference's default bound on the points one leaf may enumerate in memory.
inline constexpr std::int64_t kDefaultMaxPoints = 2'000'000;

struct TensorAccessTrace {
  std::string tensor;
  std::string einsum;
  bool is_output = false;
  std::vector<std::int64_t> timestep;     // per access
  std::vector<std::int64_t> element;      // per access, row-major in tensor_shape
  std::vector<std::int64_t> coordinates;  // n_accesses x ranks.size(), row-major
  std::vector<std::string> ranks;
  std::vector<std::int64_t> tensor_shape;

  std::size_t n_accesses() const { return timestep.size(); }
  std::int64_t tensor_size() const;
  std::span<const std::int64_t> coords(std::size_t access) const {
    return {coordinates.data() + access * ranks.size(), ranks.size()};
  }
};

struct AccessTrace {
  std::vector<TensorAccessTrace> traces;
  std::int64_t n_timesteps = 0;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensor_shapes;
  std::vector<std::pair<std::string, std::vector<std::string>>> tensor_ranks;
  std::vector<EinsumSpan> einsum_timespans;  // ordered by span
  std::vector<LevelWindows> tile_windows;
  bool truncated = false;

  std::vector<std::string> tensors() const;        // in order of first trace
  std::vector<std::string> einsums() const;        // in order of first execution
  std::vector<std::string> memory_levels() const;  // outermost first
  std::vector<const TensorAccessTrace*> for_tensor(const std::string& tensor) const;
  std::vector<TimeRange> tile_lifetime(const std::string& level, const std::string& tensor) const;

  // One row per access: einsum,tensor,is_output,timestep,element (to_dataframe()).
  void write_csv(std::ostream& out) const;
};

// Throws SpecError when one leaf would enumerate more than max_points points.
AccessTrace trace_accesses(const Schedule& schedule, const TraceOptions& options = {},
                           std::int64_t max_points = kDefaultMaxPoints);
AccessTrace trace_accesses(const Spec& spec, const TraceOptions& options = {},
                           std::int64_t max_points = kDefaultMaxPoints);

}  // namespace looptrace
