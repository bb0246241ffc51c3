// The standard compositions of the stages: every access of a trace, and every
// iteration, as SEMANTICS.md defines them. AccessStream (stream.hpp) pulls the first.
#pragma once

#include <cstddef>
#include <utility>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/dedup.hpp"
#include "looptrace/stages/filter.hpp"
#include "looptrace/stages/leaf_iterations.hpp"
#include "looptrace/stages/merge_by_time.hpp"
#include "looptrace/stages/project.hpp"
#include "looptrace/stages/select_time.hpp"

namespace looptrace {

// Every access of the trace `options` describe, in time order: each leaf's tiles
// projected and deduplicated, merged into time order, filtered, and cut to the
// selected timesteps. Throws SpecError for options that contradict the schedule.
inline auto trace_pipeline(const Schedule& schedule, const TraceOptions& options,
                           std::size_t batch_records = kDefaultBatchRecords) {
  check_spatial_instances(schedule, options.max_tile_points, options.einsums);  // before any allocation
  return leaves(schedule) | project(options.max_tile_points, batch_records) | dedup() |
         merge_by_time(batch_records) | filter_traces(options.tensors, options.einsums) |
         select_time(options);
}
// The same accesses as runs (Project's `runs`): a record stands for `multiplicity`
// consecutive elements from `element`, each accessed once at its timestep; runs of one
// trace at one timestep ascend and do not overlap. What a consumer of the elements
// alone takes at a record per run (cache_lines(B, map, true)), not per element.
inline auto trace_runs_pipeline(const Schedule& schedule, const TraceOptions& options,
                                std::size_t batch_records = kDefaultBatchRecords) {
  check_spatial_instances(schedule, options.max_tile_points, options.einsums);
  return leaves(schedule) | project(options.max_tile_points, batch_records, true) | dedup_runs() |
         merge_by_time(batch_records) | filter_traces(options.tensors, options.einsums) | select_time(options);
}
using TracePipeline =
    decltype(trace_pipeline(std::declval<const Schedule&>(), std::declval<const TraceOptions&>()));

// Each computing leaf's tiles per timestep, one Iteration per spatial iteration, for
// the Einsum filter and the time selection of `options` (tensor filters do not apply).
inline auto iteration_pipeline(const Schedule& schedule, const TraceOptions& options) {
  check_spatial_instances(schedule, options.max_tile_points, options.einsums);
  return leaves(schedule) | filter_traces({}, options.einsums) | merge_by_time() | select_time(options);
}
using IterationPipeline =
    decltype(iteration_pipeline(std::declval<const Schedule&>(), std::declval<const TraceOptions&>()));

}  // namespace looptrace
