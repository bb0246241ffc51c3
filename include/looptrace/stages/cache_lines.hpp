// What a cache sees (SEMANTICS "Caches"): the stream turned into line accesses.
//
//   trace_pipeline(...) | cache_lines(64)      at each timestep all reads, then all
//                                              writes, each group in trace order and
//                                              elements ascending, each access the lines
//                                              its bytes cover; a line touched again by
//                                              the same trace and the same read/write in
//                                              one timestep counts once
//   transfer_pipeline(...) | cache_lines(64)   each request one line, in stream order
//
// Addresses come from an AddressMap (the layout `transfers` uses unless one is given),
// through line_of() alone.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/container/vector.hpp>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/stages/pipeline.hpp"
#include "looptrace/stages/transfer_request.hpp"

namespace looptrace {

// The trace of a line access that no trace makes (a transfer request, a lower cache's
// traffic).
inline constexpr std::uint32_t kNoTrace = UINT32_MAX;

struct LineAccess {
  std::int64_t timestep;
  std::uint64_t line;     // address / line bytes
  std::uint32_t trace;    // Schedule::traces, or kNoTrace
  std::uint32_t tensor;   // Schedule::tensors
  bool write;
};

// A batch of line accesses as it is filled: a timestep's lines are appended a run at a
// time into room made without zeroing it (10^5 lines a timestep on a prefill layer).
using LineBuffer = boost::container::vector<LineAccess>;

// Line accesses [begin, end) of a batch that are, one for one, the lines of the same
// trace's group at timestep `previous` (a weight tile a register holds while tokens
// stream past it): what a consumer marked then it need not mark again.
struct RepeatedGroup {
  std::size_t begin, end;
  std::int64_t previous;
};

template <class S>
concept LineSource = Source<S> && std::same_as<BatchOf<S>, std::span<const LineAccess>>;
template <class S>
concept RequestSource = Source<S> && std::same_as<ValueOf<S>, TransferRequest>;

// The byte address of an element: the one place a cache computes one, under the
// layout stage's map (a layout file's order, blocks, padding and base, or row-major).
inline std::uint64_t element_address(const AddressMap& map, std::uint32_t tensor, std::int64_t element) {
  return map.address(tensor, element);
}

// The layout `transfers` uses for the tensors a stream traces (align: 4096 by default);
// with a layout file, its entries for `level` ("" : those for every level).
AddressMap default_address_map(const Schedule& schedule, const StreamContext& context, std::uint64_t align = 4096,
                               const LayoutSpec* layout = nullptr, const std::string& level = "");

// The lines of one timestep of accesses, in the contract's order. Memory follows one
// timestep's tile; nothing is allocated per access once the buffers have grown.
class TimestepLines {
 public:
  TimestepLines() = default;
  // `runs`: each record stands for `multiplicity` consecutive elements (trace_runs_pipeline).
  TimestepLines(const Schedule& schedule, AddressMap map, std::uint64_t line_bytes, bool runs = false);

  // One batch of a timestep's records, traces in order (as the trace pipeline yields
  // them: leaf by leaf in tree order, tensor by tensor): appends the reads' lines to
  // `out` at once and keeps the writes, which come after every read of the timestep.
  void take(std::span<const AccessRecord> records, LineBuffer& out);
  // The timestep is over: appends the writes' lines.
  void end_timestep(LineBuffer& out);
  const AddressMap& addresses() const { return map_; }
  // The groups appended since clear_repeated() that repeat a trace's previous group
  // (their places in `out`, ascending).
  std::span<const RepeatedGroup> repeated() const { return repeated_; }
  void clear_repeated() { repeated_.clear(), ++batch_; }

 private:
  void groups(std::span<const AccessRecord> records, bool writes, LineBuffer& out);
  void group(std::span<const AccessRecord> records, bool write, LineBuffer& out);
  void make_lines(std::span<const AccessRecord> records, bool write, LineBuffer& out);
  bool seen_in_group(std::uint64_t line);
  void last_group(std::uint32_t trace, std::size_t at, const LineBuffer& out, std::int64_t t,
                  const std::int64_t* copied_from = nullptr);

  AddressMap map_;
  unsigned shift_ = 6;
  bool runs_ = false;
  std::vector<std::uint32_t> tensor_;  // per trace
  std::vector<std::uint8_t> output_;   // per trace: 1 for a write
  // The lines of the current group, for layouts whose lines do not ascend: an open
  // addressing set cleared by bumping its generation.
  std::vector<std::uint64_t> set_lines_;
  std::vector<std::uint32_t> set_gen_;
  std::uint32_t gen_ = 0;
  std::size_t set_size_ = 0;
  std::vector<AccessRecord> writes_;  // of the current timestep (outputs: small beside the reads)
  // Per trace: its last group's records and lines (group()).
  struct Memo {
    struct Run {
      std::int64_t element;
      std::uint32_t multiplicity;
    };
    std::vector<Run> records;
    std::vector<LineAccess> lines;
    std::int64_t timestep = 0;  // of the group the lines are
    unsigned misses = 0, skip = 0;
  };
  std::vector<RepeatedGroup> repeated_;
  // Per trace: its last group's place in the batch `batch` (clear_repeated() starts one).
  struct Last {
    std::size_t at = 0, n = 0;
    std::int64_t timestep = 0;
    std::uint64_t batch = 0;
    unsigned misses = 0, skip = 0;  // as Memo's, for the compare of lines
  };
  std::vector<Last> last_;
  std::uint64_t batch_ = 1;
  static constexpr std::size_t kMemoLines = 4096;
  std::vector<Memo> memo_;
};

template <Source Up>
class CacheLines : public Stage<CacheLines<Up>, LineAccess> {
 public:
  CacheLines(Up up, std::uint64_t line_bytes, std::optional<AddressMap> map, bool runs = false) : up_(std::move(up)) {
    line_bytes_ = line_bytes;
    if constexpr (AccessSource<Up>)
      lines_ = TimestepLines(this->schedule(), map ? std::move(*map) : default_address_map(this->schedule(), context()),
                             line_bytes, runs);
  }

  std::span<const LineAccess> next_batch(std::int64_t until = kEndOfTime) {
    out_.clear();
    if constexpr (AccessSource<Up>) {
      lines_.clear_repeated();
      // A timestep's records may come in several batches (one per leaf): its reads go
      // out as they come, its writes when it is over.
      while (out_.size() < kDefaultBatchRecords) {
        const std::int64_t t = later(up_.next_timestep(), floor_);  // a lower bound: always move on
        if (t >= until || t == kEndOfTime) break;
        floor_ = t + 1;
        for (AccessBatch b = up_.next_batch(t + 1); !b.empty(); b = up_.next_batch(t + 1))
          lines_.take(b.records, out_);
        lines_.end_timestep(out_);
      }
    } else {
      const unsigned shift = unsigned(__builtin_ctzll(line_bytes_));
      for (const TransferRequest& r : up_.next_batch(until))
        out_.push_back({r.timestep, r.address >> shift, kNoTrace, r.tensor, r.write});
    }
    return {out_.data(), out_.size()};
  }
  std::int64_t next_timestep() const { return up_.next_timestep(); }
  // The last batch's groups that repeat their trace's previous group (none over requests).
  std::span<const RepeatedGroup> repeated() const {
    if constexpr (AccessSource<Up>) return lines_.repeated();
    else return {};
  }
  // To the first timestep >= t (forward only: a batch ends with a whole timestep, so
  // no line of one is pending). A caller that simulates windows of one stream apart
  // (warp_trace: thousands of them) keeps one pipeline and its grown buffers.
  void seek(std::int64_t t)
    requires SeekableSource<Up>
  {
    up_.seek(t);
    floor_ = later(floor_, t);
  }
  const StreamContext& context() const { return up_.context(); }
  std::uint64_t line_bytes() const { return line_bytes_; }
  const Up& upstream() const { return up_; }

 private:
  Up up_;
  std::uint64_t line_bytes_ = 64;
  std::int64_t floor_ = 0;  // the timesteps before it are done
  TimestepLines lines_;
  LineBuffer out_;
};

struct CacheLinesAdaptor : StageAdaptor {
  std::uint64_t line_bytes = 64;
  std::optional<AddressMap> map;  // --layout goes here; none: default_address_map
  bool runs = false;              // records are runs (trace_runs_pipeline)
  template <Source Up>
    requires AccessSource<Up> || RequestSource<Up>
  CacheLines<Up> operator()(Up up) const {
    return CacheLines<Up>(std::move(up), line_bytes, map, runs);
  }
};

// `... | cache_lines(B)`: line accesses of B bytes (a power of two).
// With `runs`, over trace_runs_pipeline: each record `multiplicity` elements.
inline CacheLinesAdaptor cache_lines(std::uint64_t line_bytes, std::optional<AddressMap> map = {}, bool runs = false) {
  CacheLinesAdaptor a;
  a.line_bytes = line_bytes;
  a.map = std::move(map);
  a.runs = runs;
  return a;
}

}  // namespace looptrace
