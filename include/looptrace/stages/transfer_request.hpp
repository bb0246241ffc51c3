// What a transfer trace is made of: requests (a line read from or written to a level,
// at a timestep, for a child node and tensor), the options that shape them, and where
// each tensor lies in memory. Shared by both engines (transfers.hpp, transfer_boxes.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptrace/record.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/convention.hpp"
#include "looptrace/frontend/layout.hpp"
#include "looptrace/stages/layout.hpp"  // AddressMap: where each tensor lies

namespace looptrace {

struct TransferRequest {
  std::int64_t timestep;
  std::uint64_t address;  // of the line
  bool write;             // a drain written to L (else a fill read from L)
  std::uint32_t child;    // the child Storage node (Schedule::storages)
  std::uint32_t tensor;   // Schedule::tensors

  friend bool operator==(const TransferRequest&, const TransferRequest&) = default;
};

// The contract's order of requests, as "a comes after b": time, writes first, ascending
// address, then child and tensor (two children asking for one line at once need a fixed
// order, or a heap's order would depend on what else is pending and shards would not
// concatenate). Both engines' heaps order by it.
inline bool comes_after(const TransferRequest& a, const TransferRequest& b) {
  if (a.timestep != b.timestep) return a.timestep > b.timestep;
  if (a.write != b.write) return !a.write;
  if (a.address != b.address) return a.address > b.address;
  if (a.child != b.child) return a.child > b.child;
  return a.tensor > b.tensor;
}

struct TransferOptions {
  std::string level;                // L
  std::uint64_t line_bytes = 64;
  std::uint64_t align = 4096;
  TimeRange report{0, kEndOfTime};  // requests outside are dropped (the windows run whole)
  bool report_end = true;           // also keep requests at report.to: the trace ends there
  bool enumerate = false;           // transfer_pipeline: follow the accesses (the check), not boxes
  // Read back partial sums (`movement --partial-sums`): what a child window writes first
  // that an earlier window of the child drained (from the trace's start) is read from
  // the level at the window's start too, with its fills.
  bool partial_sums = false;
  // timeloop: the requests Timeloop's nest analysis counts (README "Transfers in
  // Timeloop's convention"): per window and distinct delta of a multicast group of a
  // child's instances, the part of the tile Timeloop counts as new (reads), an output's
  // updates and the read-backs of its partial sums; the whole run, from the boxes only.
  Convention convention = Convention::looptree;
  const LayoutSpec* layout = nullptr;  // the layouts of `level` (null: row-major); the caller keeps it alive
};

// Refuses (SpecError) a line size or an alignment that is not a power of two.
void check_transfer_options(const TransferOptions& options);


}  // namespace looptrace
