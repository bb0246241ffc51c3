#include "looptrace/stages/transfer_boxes.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <stdexcept>
#include <utility>

#include "closed_form/movement_boxes.hpp"
#include "looptrace/stages/filter.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace {

namespace mb = movement_boxes;

namespace {

constexpr std::size_t kBatch = 4096;

// The lines of one box of a tensor in ascending order. A run is the box's elements
// with the coordinates before rank `inner` fixed: contiguous, since every rank after
// `inner` is whole.
struct LineStream {
  mb::Box box;
  boost::container::small_vector<std::int64_t, 6> coord;  // of the ranks before `inner`
  std::size_t inner = 0;
  const TensorInfo* info = nullptr;
  std::uint64_t base = 0, size = 1, line = 64;
  std::uint64_t cur = 0, last = 0;  // the current run's lines still to give, [cur, last]
  std::uint64_t floor = 0;          // every line below was given
  bool write = false, done = false;
  std::uint32_t child = 0, tensor = 0;

  void start() {
    const std::size_t ranks = box.size();
    inner = ranks == 0 ? 0 : ranks - 1;
    while (inner > 0 && box[inner] == Interval{0, info->shape[inner]}) --inner;  // whole ranks
    coord.resize(inner);
    for (std::size_t r = 0; r < inner; ++r) coord[r] = box[r].from;
    done = false;
    if (!load()) next_run();
  }
  // The current run's lines; false when all are below `floor`.
  bool load() {
    std::uint64_t e0 = 0, n = 1;
    for (std::size_t r = 0; r < inner; ++r) e0 += std::uint64_t(coord[r]) * std::uint64_t(info->strides[r]);
    if (!box.empty()) {
      e0 += std::uint64_t(box[inner].from) * std::uint64_t(info->strides[inner]);
      n = std::uint64_t(box[inner].to - box[inner].from) * std::uint64_t(info->strides[inner]);
    }
    const std::uint64_t a0 = base + e0 * size, a1 = base + (e0 + n) * size - 1;
    cur = std::max(a0 / line, floor);
    last = a1 / line;
    return cur <= last;
  }
  void next_run() {
    for (;;) {
      std::size_t r = inner;
      while (r > 0) {  // the odometer over the ranks before `inner`
        if (++coord[r - 1] < box[r - 1].to) break;
        coord[r - 1] = box[r - 1].from;
        --r;
      }
      if (r == 0) {
        done = true;
        return;
      }
      if (load()) return;
    }
  }
  void step() {
    floor = cur + 1;
    if (++cur > last) next_run();
  }
  // The heap's order (the streams of one timestep): the contract's, on current lines.
  TransferRequest request() const { return {0, cur * line, write, child, tensor}; }
  bool after(const LineStream& o) const { return comes_after(request(), o.request()); }
};

struct Cursor {
  mb::SlotWindows windows;
  std::uint32_t child, tensor;
  bool fills_next = true;  // else the current window's drains, at its end
  std::int64_t at() const {
    if (windows.done()) return kEndOfTime;
    return fills_next ? windows.window().from : windows.window().to;
  }
};

}  // namespace

struct BoxTransfers::Impl {
  const Schedule* schedule = nullptr;
  StreamContext context;
  AddressMap addresses;
  TransferOptions options;
  std::vector<Cursor> cursors;
  std::vector<LineStream> streams;
  std::vector<std::size_t> heap;  // of streams, the least on top
  std::int64_t now = -1;          // the timestep the streams are at
  std::vector<TransferRequest> out;
  TransferRequest last{-1, 0, false, 0, 0};
  bool finished = false;

  bool kept(std::int64_t t) const {
    return t >= options.report.from && (t < options.report.to || (t == options.report.to && options.report_end));
  }
  void add(const std::vector<mb::Box>& boxes, bool write, const Cursor& c) {
    for (const mb::Box& b : boxes) {
      LineStream& st = streams.emplace_back();
      st.box = b;
      st.info = &schedule->tensors[c.tensor];
      st.base = addresses.base[c.tensor], st.size = addresses.bytes[c.tensor], st.line = options.line_bytes;
      st.write = write, st.child = c.child, st.tensor = c.tensor;
      st.start();
      if (st.done) streams.pop_back();
    }
  }
  void gather(std::int64_t t) {
    now = t;
    streams.clear();
    const bool keep = kept(t);
    for (Cursor& c : cursors)
      while (c.at() == t) {
        if (c.fills_next) {
          if (keep) add(c.windows.fills(), false, c);
          c.fills_next = false;
        } else {
          if (keep) add(c.windows.drains(), true, c);
          c.windows.next();
          c.fills_next = true;
        }
      }
    heap.clear();
    for (std::size_t i = 0; i < streams.size(); ++i) heap.push_back(i);
    std::make_heap(heap.begin(), heap.end(), [&](std::size_t a, std::size_t b) { return streams[a].after(streams[b]); });
  }
  void give(LineStream& st) {
    const TransferRequest r{now, st.cur * st.line, st.write, st.child, st.tensor};
    if (!(r == last)) out.push_back(r);  // one line of one fill or drain: once
    last = r;
    st.step();
  }
  void emit(std::size_t room) {
    auto later = [&](std::size_t a, std::size_t b) { return streams[a].after(streams[b]); };
    while (!heap.empty() && out.size() < room) {
      if (heap.size() == 1) {  // one box left: its lines in a row
        LineStream& st = streams[heap.front()];
        while (!st.done && out.size() < room) give(st);
        if (st.done) heap.clear();
        return;
      }
      std::pop_heap(heap.begin(), heap.end(), later);
      LineStream& st = streams[heap.back()];
      give(st);
      if (st.done) heap.pop_back();
      else std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  std::int64_t next_event() const {
    std::int64_t t = kEndOfTime;
    for (const Cursor& c : cursors) t = std::min(t, c.at());
    return t;
  }
};

BoxTransfers::BoxTransfers() : impl_(new Impl()) {}
BoxTransfers::BoxTransfers(BoxTransfers&& other) noexcept : impl_(std::exchange(other.impl_, nullptr)) {}
BoxTransfers& BoxTransfers::operator=(BoxTransfers&& other) noexcept {
  if (this != &other) {
    delete impl_;
    impl_ = std::exchange(other.impl_, nullptr);
  }
  return *this;
}
BoxTransfers::~BoxTransfers() { delete impl_; }

std::optional<BoxTransfers> BoxTransfers::make(const Schedule& s, const TraceOptions& o, const TransferOptions& options,
                                               std::string* why) {
  BoxTransfers b;
  Impl& m = *b.impl_;
  m.schedule = &s;
  m.options = options;  // its report and report_end: what transfer_pipeline chose
  const TimeRange report = options.report;
  const std::int64_t end = std::min(s.n_timesteps, o.max_timesteps.value_or(s.n_timesteps));
  m.context.schedule = &s;
  m.context.window = report;
  m.context.traces = TraceFilter::from_names(s, o.tensors, o.einsums).trace_enabled;
  m.addresses = AddressMap::make(s, traced_tensors(s, m.context), options.align);
  const TimeRange clip{0, end};  // a prefix cuts windows; a window or shard only drops requests
  if (report.empty()) return b;  // nothing to report
  try {
    for (std::uint32_t n : children_of(s, options.level, o.tensors))
      for (const std::string& name : s.storages[n].tensors) {
        const int x = s.find_tensor(name);
        if (x < 0 || (!o.tensors.empty() && std::find(o.tensors.begin(), o.tensors.end(), name) == o.tensors.end()))
          continue;
        const int p = s.parent(n, name);
        if (p < 0 || s.storages[std::size_t(p)].level != options.level) continue;
        m.cursors.push_back({mb::SlotWindows(s, n, std::uint32_t(x), o.einsums, clip, report.from),
                             n, std::uint32_t(x)});
      }
  } catch (const mb::NotClosed& e) {
    if (why) *why = e.reason;
    return std::nullopt;
  }
  return b;
}

std::span<const TransferRequest> BoxTransfers::next_batch(std::int64_t until) try {
  Impl& m = *impl_;
  m.out.clear();
  while (m.out.size() < kBatch) {
    if (!m.heap.empty()) {
      if (m.now >= until) break;
      m.emit(kBatch);
      continue;
    }
    if (m.finished) break;
    const std::int64_t t = m.next_event();
    if (t == kEndOfTime || t > m.options.report.to) {
      m.finished = true;
      break;
    }
    if (t >= until) break;
    m.gather(t);
  }
  return m.out;
} catch (const mb::NotClosed& e) {  // make() refuses what could: a bug if it gets here
  throw std::logic_error("transfers in closed form met a tile that is not a box (" + e.reason +
                         "); --method enumerate gives the trace");
}

std::int64_t BoxTransfers::next_timestep() const {
  return impl_->heap.empty() ? impl_->next_event() : impl_->now;
}
const StreamContext& BoxTransfers::context() const { return impl_->context; }
const AddressMap& BoxTransfers::addresses() const { return impl_->addresses; }

}  // namespace looptrace
