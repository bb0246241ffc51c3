// Data movement per memory level (SEMANTICS "Data movement"): per level and tensor the
// windows, the largest tile, fills and drains (in elements, and in bytes where the
// workload gives bits_per_value), whether the level is the tensor's home; per level
// the peak footprint and when it happens. Two methods give the same report:
//
// - closed form (the default): a window's tile is the union of its leaves' iteration
//   boxes projected into the tensor, counted as boxes, and windows that move the same
//   amounts are counted once (src/closed_form/movement_boxes.hpp): time and memory follow the loop
//   depth and the number of distinct windows, not the tensors or the trace. A level
//   whose tiles are not boxes, or whose leaves read and write a tensor at the same
//   time (a !Pipeline), is enumerated, and the report lists it (`enumerated`).
// - enumerate: one streaming pass over the accesses, the check of the closed form:
//
//     trace_pipeline(schedule, options) | tile_windows() | window_traffic()
//
// The selection's window bounds the trace: windows are cut at its edges (a window cut
// there is filled again, as if the piece of the trace ran alone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "looptrace/closed_form/layout_costs.hpp"
#include "looptrace/convention.hpp"
#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"  // what a caller compiles the schedule from

namespace looptrace {

// A (level, tensor) held below !Spatial loops, counted per instance (README "Per
// instance"): the instances (the product of the !Spatial loops above its nodes, the
// most of any node), the largest tile one instance holds in one window, and the fills
// of every instance's own tile (read first in the window), summed over the instances.
struct PerInstance {
  std::int64_t instances = 1, max_tile = 0, fills = 0;
};

struct TensorMovement {
  std::string tensor;
  bool home = false;  // some node of the level holding it has no parent for it
  std::int64_t windows = 0, max_tile = 0, fills = 0, drains = 0;
  std::optional<std::int64_t> bytes_per_value;  // from bits_per_value, rounded up
  std::optional<PerInstance> per_instance;  // below !Spatial loops, the whole run
  // --convention timeloop (README "Timeloop's convention"): `max_tile` is one
  // instance's, `fills` summed over the instances, and these are the level's reads and
  // updates as Timeloop counts them (by its children and the compute), summed over its
  // instances; `instances` is theirs; `parent_reads` and `parent_updates` what the
  // level's fills and drains take of its parent (its share of the parent's reads and
  // updates).
  std::int64_t instances = 1, reads = 0, updates = 0, parent_reads = 0, parent_updates = 0;
};

struct FootprintPeak {
  std::int64_t value = 0;      // elements (or bytes)
  std::int64_t timestep = -1;  // the first timestep at which it is reached (-1: no window)
};

// The level's size in one Einsum, where the arch's size names the Einsum's tensors
// (`weight.bits_per_value if weight else 0`), against the level's peak in that Einsum.
struct EinsumCapacity {
  std::string einsum;
  double size_bits = 0;
  std::vector<std::string> bits_of;  // the tensors whose bits_per_value gave the size
  FootprintPeak peak_footprint;      // of the level's windows of this Einsum
  std::optional<FootprintPeak> peak_footprint_bytes;
  std::int64_t instances = 1;        // of the level, under its !Spatial loops in this Einsum
};

struct LevelMovement {
  std::string level;
  std::vector<TensorMovement> tensors;  // in the order the level's nodes list them
  FootprintPeak peak_footprint;
  std::optional<FootprintPeak> peak_footprint_bytes;  // when every tensor has a size
  // The arch's size of the level in bits (when it names one), and what fits. The size
  // is one instance's: the level's nodes below !Spatial loops hold their tiles (whose
  // union the footprint counts) in up to `instances` of them, which together hold
  // instances x size.
  std::optional<double> capacity_bits;
  std::int64_t instances = 1;
  // A size per Einsum (those whose windows the level holds), or an expression looptrace
  // could not evaluate and why.
  std::vector<EinsumCapacity> einsum_capacities;
  std::optional<std::string> capacity_unevaluated;
  std::string capacity_unevaluated_reason;
  std::optional<LevelLayoutCost> layout;  // add_layout_costs(): what its layout costs, as a parent
};

enum class MovementMethod { closed_form, enumerate };

// What the closed form handed to enumeration, and why: one (Storage node, tensor) slot
// of the level, or the whole level (`tensor` empty) where its slots could not be
// counted apart.
struct EnumeratedPart {
  std::string level;
  std::string reason;
  std::string tensor;
};

struct MovementReport {
  std::int64_t n_timesteps = 0;  // the end of the traced window
  std::int64_t from = 0;         // its start
  bool truncated = false;
  MovementMethod method = MovementMethod::closed_form;
  std::vector<LevelMovement> levels;  // tree order
  std::vector<EnumeratedPart> enumerated;  // closed form: what it enumerated
  Convention convention = Convention::looptree;
};

struct MovementOptions {
  MovementMethod method = MovementMethod::closed_form;
  int threads = 1;  // enumerate: workers share the memory levels (the report is the same)
  // Read-modify-write of partial sums, as analytical models count it (off: SEMANTICS,
  // an output is never filled): an element of an output that a window writes first,
  // after an earlier window of the same node drained it (a reduction loop above the
  // node), is filled from the parent too. Never at the tensor's home.
  bool partial_sums = false;
  Convention convention = Convention::looptree;  // timeloop: closed form only, the whole run
};

// The running maximum over time of the sum of the sizes of the windows that contain
// each timestep, where a window's size is known only when it closes. Windows arrive in
// time order (open at their start, close at their end; at one time closes come
// first). Exact, with memory for the windows open at once.
class PeakTracker {
 public:
  void open(std::int64_t start);
  void close(std::int64_t start, std::int64_t size);
  FootprintPeak peak() const { return peak_; }

 private:
  struct Segment {
    std::int64_t start;  // [start, the next segment's start): no open window starts inside
    std::int64_t max, at;  // the largest sum of closed windows over it, and where
    int open;            // open windows starting at `start`
  };
  void finalize(const Segment& s);
  std::vector<Segment> segments_;
  FootprintPeak peak_;
};

struct LayoutSpec;
// Adds to each level that is some node's parent what its layout costs (LevelLayoutCost),
// from its transfer trace with `layout` (null: row-major) at `line_bytes`. Covers the
// whole run or a --max-timesteps prefix: throws SpecError for --from/--to/--shard.
void add_layout_costs(MovementReport& report, const Schedule& schedule, const TraceOptions& options,
                      const LayoutSpec* layout, std::uint64_t line_bytes, std::uint64_t align);

// Throws SpecError for a sampled selection (movement needs whole stretches of time).
MovementReport summarize_movement(const Schedule& schedule, const TraceOptions& options, const MovementOptions& how);
// The closed form; `threads` is unused by it (kept for callers from before the closed
// form: pass MovementOptions to enumerate on workers).
MovementReport summarize_movement(const Schedule& schedule, const TraceOptions& options = {}, int threads = 1);

}  // namespace looptrace
