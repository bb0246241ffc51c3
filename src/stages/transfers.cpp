#include "looptrace/stages/transfers.hpp"

#include <algorithm>
#include <bit>
#include <iterator>

#include "looptrace/compile/window_walk.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/support/error.hpp"

namespace looptrace {

void check_transfer_options(const TransferOptions& o) {
  if (!std::has_single_bit(o.line_bytes))
    throw SpecError("--line-bytes takes a power of two (a DRAM line or burst), not " + std::to_string(o.line_bytes));
  // Alignments are powers of two (pages, rows, lines): --align 3 would place tensors
  // at addresses no memory system aligns to.
  if (!std::has_single_bit(o.align))
    throw SpecError("--align takes a power of two (bytes each tensor's start is a multiple of), not " +
                    std::to_string(o.align));
}

void check_timeloop_transfers(const Schedule& s, const TraceOptions& o, const TransferOptions& t) {
  if (t.convention != Convention::timeloop) return;
  if (t.enumerate)
    throw SpecError("transfers --convention timeloop is counted from the tiles (closed form) only: "
                    "--method enumerate follows SEMANTICS' fills and drains");
  const TimeRange window = TimeSelection::from_options(o, s.n_timesteps).window;
  if (o.sample_timesteps || window.from != 0 || window.to != s.n_timesteps)
    throw SpecError("transfers --convention timeloop lists the whole run, as Timeloop counts it: no --from/--to, "
                    "--max-timesteps, --shard or --sample-timesteps");
}

std::vector<std::string> traced_tensors(const Schedule& s, const StreamContext& context) {
  std::vector<std::string> order;
  for (std::size_t i = 0; i < s.traces.size(); ++i)
    if (context.traced(i) && std::find(order.begin(), order.end(), s.traces[i].tensor) == order.end())
      order.push_back(s.traces[i].tensor);
  return order;
}

std::vector<std::uint32_t> children_of(const Schedule& s, const std::string& level,
                                       const std::vector<std::string>& tensors) {
  if (std::find(s.memory_levels.begin(), s.memory_levels.end(), level) == s.memory_levels.end()) {
    std::string known;
    for (const auto& l : s.memory_levels) known += (known.empty() ? "" : ", ") + l;
    throw SpecError("--level names '" + level + "', which no Storage node has (levels: " + known + ")");
  }
  std::vector<std::uint32_t> out;
  for (std::size_t n = 0; n < s.storages.size(); ++n)
    for (const auto& t : s.storages[n].tensors) {
      if (!tensors.empty() && std::find(tensors.begin(), tensors.end(), t) == tensors.end()) continue;
      const int p = s.parent(n, t);
      if (p >= 0 && s.storages[std::size_t(p)].level == level) {
        out.push_back(std::uint32_t(n));
        break;
      }
    }
  return out;
}

void check_transfer_stream(const StreamContext& context) {
  if (context.sampled)
    throw SpecError("a transfer trace needs whole stretches of time: use --from/--to, --max-timesteps "
                    "or --shard, not --sample-timesteps");
}

TimeRange transfer_trace_window(const Schedule& s, const std::vector<std::uint32_t>& children, TimeRange report) {
  TimeRange run = report;
  if (report.empty()) return run;
  for (std::uint32_t c : children) {
    const StorageWindows& node = s.storages[c];
    // The window holding `report.from` or ending there (its drains are at `from`), and
    // the one holding `report.to - 1`.
    WindowWalk windows(node.starts(), node.duration, {0, kEndOfTime});
    windows.seek_ending_from(report.from);
    if (!windows.done() && windows.start() <= report.from) run.from = std::min(run.from, windows.start());
    windows.seek_ending_from(report.to);
    if (!windows.done() && windows.start() < report.to) run.to = std::max(run.to, windows.start() + node.duration);
  }
  return run;
}

namespace {
// A function object, so that the heap's comparisons inline.
constexpr auto kLater = [](const TransferRequest& a, const TransferRequest& b) { return comes_after(a, b); };
}  // namespace

TransferQueue::TransferQueue(const Schedule& s, const TrafficPlan& plan, TransferOptions options, AddressMap addresses)
    : options_(std::move(options)), addresses_(std::move(addresses)) {
  for (const auto& slot : plan.slots) {
    const int parent = s.parent(slot.storage, s.tensors[slot.tensor].name);
    if (parent >= 0 && s.storages[std::size_t(parent)].level == options_.level)
      child_slots_.push_back({slot.storage, slot.tensor});
  }
  drained_before_.resize(child_slots_.size());
}

int TransferQueue::child_of(const TileTraffic& t) const {
  for (std::size_t i = 0; i < child_slots_.size(); ++i)
    if (child_slots_[i].first == t.storage && child_slots_[i].second == t.tensor) return int(i);
  return -1;
}

void TransferQueue::queue_lines(std::span<const std::int64_t> elements, std::int64_t t, bool write,
                                const TileTraffic& w) {
  if (t < options_.report.from || t > options_.report.to || (t == options_.report.to && !options_.report_end))
    return;
  const TensorLayout& layout = addresses_.layouts[w.tensor];
  const std::uint64_t size = layout.bytes, line = options_.line_bytes;
  std::uint64_t next = 0;  // addresses ascend, so lines do: the first line not yet asked for
  auto lines_of = [&](std::uint64_t a) {
    for (std::uint64_t l = std::max(a / line, next); l <= (a + size - 1) / line; ++l) {
      pending_.push_back({t, l * line, write, w.storage, w.tensor});
      std::push_heap(pending_.begin(), pending_.end(), kLater);
    }
    next = std::max(next, (a + size - 1) / line + 1);
  };
  if (layout.identity()) {  // elements ascend, so addresses do
    for (std::int64_t e : elements) lines_of(layout.base + std::uint64_t(e) * size);
    return;
  }
  scratch_.clear();  // reused: no allocation once it has grown to a tile
  for (std::int64_t e : elements) scratch_.push_back(addresses_.address(w.tensor, e));
  std::sort(scratch_.begin(), scratch_.end());
  for (std::uint64_t a : scratch_) lines_of(a);
}

void TransferQueue::take(std::span<const TileTraffic> events) {
  if (events.empty()) {
    settled_ = kEndOfTime;
    return;
  }
  std::int64_t now = events.front().kind == TileTraffic::Kind::open ? events.front().start : events.front().end;
  for (const TileTraffic& t : events) {
    const int child = child_of(t);
    if (child < 0) continue;
    if (t.kind == TileTraffic::Kind::open) {
      open_starts_.push_back(t.start);
      continue;
    }
    open_starts_.erase(std::find(open_starts_.begin(), open_starts_.end(), t.start));
    queue_lines(t.drained, t.end, true, t);
    if (!options_.partial_sums) {
      queue_lines(t.filled, t.start, false, t);
      continue;
    }
    // Read back: written first (drained, not filled), drained by an earlier window.
    std::unordered_set<std::int64_t>& before = drained_before_[std::size_t(child)];
    read_back_.clear();
    std::set_difference(t.drained.begin(), t.drained.end(), t.filled.begin(), t.filled.end(),
                        std::back_inserter(read_back_));
    std::erase_if(read_back_, [&](std::int64_t e) { return !before.contains(e); });
    before.insert(t.drained.begin(), t.drained.end());
    const std::size_t n = read_back_.size();
    read_back_.insert(read_back_.end(), t.filled.begin(), t.filled.end());
    std::inplace_merge(read_back_.begin(), read_back_.begin() + std::ptrdiff_t(n), read_back_.end());
    queue_lines(read_back_, t.start, false, t);
  }
  // Nothing earlier than the oldest open child window's start can still come.
  for (std::int64_t s : open_starts_) now = std::min(now, s);
  settled_ = now;
}

void TransferQueue::release(std::int64_t before, std::vector<TransferRequest>& out) {
  while (!pending_.empty() && pending_.front().timestep < before) {
    std::pop_heap(pending_.begin(), pending_.end(), kLater);
    out.push_back(pending_.back());
    pending_.pop_back();
  }
}

std::int64_t TransferQueue::next_timestep() const {
  const std::int64_t t = std::max<std::int64_t>(settled_, 0);
  return pending_.empty() ? t : std::min(t, pending_.front().timestep);
}

}  // namespace looptrace
