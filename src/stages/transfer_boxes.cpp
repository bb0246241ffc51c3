#include "looptrace/stages/transfer_boxes.hpp"

#include <algorithm>
#include <bit>
#include <boost/container/small_vector.hpp>
#include <map>
#include <stdexcept>
#include <utility>

#include "closed_form/movement_boxes.hpp"
#include "closed_form/timeloop_convention.hpp"
#include "looptrace/stages/filter.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace {

namespace mb = movement_boxes;

namespace {

constexpr std::size_t kBatch = 4096;

// The lines of one box of a tensor's layout digits (TensorLayout::digits, address
// order) in ascending order; a digit takes a range, or rows of one (a lattice). A run
// is the box's elements with the digits before `inner` fixed, and one row of it:
// contiguous, since every digit after `inner` is whole. The digits before `inner` are
// an odometer that keeps its element offset (`outer`) as it turns, so a run costs a
// few additions however many digits the layout has.
struct LineStream {
  // A digit before `inner`: its coordinate, in rows of [from, to) `step` apart (count
  // of them), and the bytes one coordinate moves the address by.
  struct Digit {
    std::int64_t at, end;        // the coordinate, the end of its row
    std::int64_t from, to, step;  // the first row, and the distance between rows
    std::int64_t row, count;     // the row it is in, of how many
    std::uint64_t bytes;         // stride x element size
  };
  boost::container::small_vector<mb::Rows, 12> box;  // per digit (2 per blocked rank)
  boost::container::small_vector<std::uint64_t, 12> stride;  // per digit: its element stride
  boost::container::small_vector<Digit, 12> odometer;  // the digits before `inner`
  std::uint64_t outer = 0;  // the address of the odometer's element with `inner` at 0
  std::uint64_t run_at = 0;  // the current run's first byte
  std::uint64_t run_step = 0, run_bytes = 1;  // between the rows of `inner`; a run's bytes
  std::int64_t inner_row = 0, inner_count = 1;  // the row of `inner` the run is, of how many
  std::uint64_t run_first = 0;  // the first run's offset from `outer`
  const std::vector<LayoutDigit>* digits = nullptr;
  std::uint64_t base = 0, size = 1, line = 64;
  unsigned shift = 6;  // log2(line) when `pow2`
  bool pow2 = true;
  std::uint64_t cur = 0, last = 0;  // the current run's lines still to give, [cur, last]
  std::uint64_t floor = 0;          // every line below was given
  bool write = false, done = false;
  std::uint32_t child = 0, tensor = 0;
  std::uint64_t group = 0;  // Timeloop's convention: a line once per delta sent (its number; else 0)

  void start() {
    const std::size_t ranks = box.size();
    std::size_t inner = ranks == 0 ? 0 : ranks - 1;
    while (inner > 0 && box[inner].range() && box[inner].from == 0 && box[inner].to == (*digits)[inner].extent) --inner;
    odometer.clear();
    outer = base;
    for (std::size_t r = 0; r < inner; ++r) {
      const mb::Rows& b = box[r];
      const std::uint64_t bytes = stride[r] * size;
      odometer.push_back({b.from, b.to, b.from, b.to, b.stride, 0, b.count, bytes});
      outer += std::uint64_t(b.from) * bytes;
    }
    if (ranks == 0) {
      run_first = 0, run_step = 0, run_bytes = size, inner_count = 1;
    } else {
      const mb::Rows& b = box[inner];
      const std::uint64_t bytes = stride[inner] * size;
      run_first = std::uint64_t(b.from) * bytes;
      run_step = std::uint64_t(b.stride) * bytes;
      run_bytes = std::uint64_t(b.to - b.from) * bytes;
      inner_count = b.count;
    }
    inner_row = 0;
    run_at = outer + run_first;
    done = false;
    if (!load()) next_run();
  }
  std::uint64_t line_of(std::uint64_t address) const { return pow2 ? address >> shift : address / line; }
  // The current run's lines; false when all are below `floor`.
  bool load() {
    cur = std::max(line_of(run_at), floor);
    last = line_of(run_at + run_bytes - 1);
    return cur <= last;
  }
  void next_run() {
    for (;;) {
      if (++inner_row < inner_count) {
        run_at += run_step;
        if (load()) return;
        continue;
      }
      inner_row = 0;
      std::size_t r = odometer.size();
      while (r > 0) {  // the odometer over the digits before `inner`, row by row
        Digit& d = odometer[r - 1];
        if (++d.at < d.end) {
          outer += d.bytes;
          break;
        }
        const std::int64_t was = d.at - 1;
        if (++d.row < d.count) {
          d.at = d.from + d.step * d.row;
          d.end = d.to + d.step * d.row;
        } else {
          d.row = 0, d.at = d.from, d.end = d.to;
        }
        outer += std::uint64_t(d.at - was) * d.bytes;  // modulo 2^64: the sum stays exact
        if (d.row != 0) break;
        --r;
      }
      if (r == 0) {
        done = true;
        return;
      }
      run_at = outer + run_first;
      if (load()) return;
    }
  }
  // The heap's order (the streams of one timestep): the contract's on current lines
  // (writes first, then address, child, tensor), then the delta's number.
  bool after(const LineStream& o) const {
    if (write != o.write) return !write;
    if (cur != o.cur) return cur > o.cur;
    return ties_after(o);
  }
  // At one line: child, tensor, then the delta's number.
  bool ties_after(const LineStream& o) const {
    if (child != o.child) return child > o.child;
    if (tensor != o.tensor) return tensor > o.tensor;
    return group > o.group;
  }
};

// Along a blocked rank, a box's span is a partial first block, the whole blocks and a
// partial last block: each a span of block indices and one inside the block.
struct Piece {
  mb::Rows outer;
  Interval inner;
};

// One child (node, tensor): its windows from the boxes (SEMANTICS' fills and drains), or
// in Timeloop's convention (TimeloopSlot: its reads and updates, numbered per delta sent).
struct Cursor {
  std::optional<mb::SlotWindows> windows;
  std::optional<TimeloopSlot> timeloop;
  std::uint32_t child, tensor;
  bool fills_next = true;  // else the current window's drains, at its end
  bool done() const { return windows ? windows->done() : timeloop->done(); }
  const TimeRange& window() const { return windows ? windows->window() : timeloop->window(); }
  void next() { windows ? windows->next() : timeloop->next(); }
  std::int64_t at() const {
    if (done()) return kEndOfTime;
    return fills_next ? window().from : window().to;
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
  std::vector<Piece> pieces;  // add(): per rank of a box, its pieces (from starts[r], counts[r] of them)
  std::vector<std::size_t> starts, counts, choice;
  std::vector<std::size_t> heap;  // of streams, the least on top
  std::int64_t now = -1;          // the timestep the streams are at
  std::vector<TransferRequest> out = std::vector<TransferRequest>(kBatch);  // next_batch's, the first n
  std::size_t n = 0;
  TransferRequest last{-1, 0, false, 0, 0};
  std::uint64_t last_group = 0;
  bool finished = false;

  bool kept(std::int64_t t) const {
    return t >= options.report.from && (t < options.report.to || (t == options.report.to && options.report_end));
  }
  // A box of the tensor is a union of boxes of its layout's digits (Piece); the rows of
  // a lattice rank that is blocked, one such box per row.
  void add(const std::vector<mb::Box>& boxes, bool write, const Cursor& c,
           const std::vector<std::uint64_t>* groups = nullptr) {
    const TensorLayout& layout = addresses.layouts[c.tensor];
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      const mb::Box& b = boxes[i];
      if (std::any_of(b.begin(), b.end(), [](const mb::Rows& s) { return s.empty(); })) continue;
      group = groups ? (*groups)[i] : 0;
      row.assign(b.size(), 0);
      for (;;) {
        add_box(b, layout, write, c);
        std::size_t r = b.size();
        while (r > 0 && (layout.block(std::uint32_t(r - 1)) == 1 || ++row[r - 1] == b[r - 1].count)) row[--r] = 0;
        if (r == 0) break;
      }
    }
  }
  std::vector<std::int64_t> row;  // add(): the row of each blocked rank
  std::uint64_t group = 0;        // add(): the number of the box's delta
  void add_box(const mb::Box& b, const TensorLayout& layout, bool write, const Cursor& c) {
    pieces.clear();
    counts.clear();
    for (std::uint32_t r = 0; r < b.size(); ++r) {
      if (layout.block(r) == 1) {
        starts.resize(counts.size() + 1);
        starts[counts.size()] = pieces.size();
        pieces.push_back({b[r], {0, 1}});
        counts.push_back(1);
      } else {
        split(b[r].row(row[r]), layout.block(r));
      }
    }
    choice.assign(b.size(), 0);
    for (;;) {
      add_stream(layout, write, c);
      std::size_t r = b.size();
      while (r > 0 && ++choice[r - 1] == counts[r - 1]) choice[--r] = 0;
      if (r == 0) break;
    }
  }
  void split(const Interval& s, std::int64_t block) {
    const std::size_t at = pieces.size();
    if (block == 1) {
      pieces.push_back({s, {0, 1}});
    } else if (s.from / block == (s.to - 1) / block) {
      pieces.push_back({{s.from / block, s.from / block + 1}, {s.from % block, (s.to - 1) % block + 1}});
    } else {
      const std::int64_t first = (s.from + block - 1) / block, end = s.to / block;  // the whole blocks
      if (s.from % block != 0) pieces.push_back({{s.from / block, s.from / block + 1}, {s.from % block, block}});
      if (first < end) pieces.push_back({{first, end}, {0, block}});
      if (s.to % block != 0) pieces.push_back({{end, end + 1}, {0, s.to % block}});
    }
    starts.resize(counts.size() + 1);
    starts[counts.size()] = at;
    counts.push_back(pieces.size() - at);
  }
  void add_stream(const TensorLayout& layout, bool write, const Cursor& c) {
    LineStream& st = streams.emplace_back();
    st.box.clear();
    st.stride.clear();
    for (const LayoutDigit& d : layout.digits()) {
      const Piece& p = pieces[starts[d.rank] + choice[d.rank]];
      st.box.push_back(d.inner ? mb::Rows(p.inner) : p.outer);
      st.stride.push_back(d.stride);
    }
    st.digits = &layout.digits();
    st.base = layout.base, st.size = layout.bytes, st.line = options.line_bytes;
    st.pow2 = std::has_single_bit(st.line), st.shift = unsigned(std::countr_zero(st.line));
    st.floor = 0;
    st.write = write, st.child = c.child, st.tensor = c.tensor, st.group = group;
    st.start();
    if (st.done) streams.pop_back();
  }
  void gather(std::int64_t t) {
    now = t;
    streams.clear();
    const bool keep = kept(t);
    for (Cursor& c : cursors)
      while (c.at() == t) {
        if (c.fills_next) {
          if (keep && c.windows) add(c.windows->fills(), false, c);
          if (keep && c.timeloop) add(c.timeloop->reads(), false, c, &c.timeloop->read_groups());
          c.fills_next = false;
        } else {
          if (keep && c.windows) add(c.windows->drains(), true, c);
          if (keep && c.timeloop) add(c.timeloop->writes(), true, c, &c.timeloop->write_groups());
          c.next();
          c.fills_next = true;
        }
      }
    heap.clear();
    for (std::size_t i = 0; i < streams.size(); ++i) heap.push_back(i);
    std::make_heap(heap.begin(), heap.end(), [&](std::size_t a, std::size_t b) { return streams[a].after(streams[b]); });
  }
  // The lines of `st` up to line `limit` (all of them if it is the largest), while
  // `room` lasts: run by run, one request a line. Only the first can repeat the request
  // before it (another box's line: one line of one fill or drain is given once); within
  // a stream the lines ascend.
  void give(LineStream& st, std::uint64_t limit, std::size_t room) {
    if (st.done || n >= room || st.cur > limit) return;
    TransferRequest* o = out.data();
    TransferRequest r{now, st.cur * st.line, st.write, st.child, st.tensor};
    if (!(r == last && st.group == last_group)) o[n++] = r;
    st.floor = ++st.cur;
    for (;;) {
      if (st.cur > st.last) {
        if (st.pow2 && st.inner_count == 1 && !st.odometer.empty()) sweep(st, r, limit, room);
        st.next_run();
        if (st.done) break;
      }
      if (n >= room || st.cur > limit) break;
      const std::uint64_t stop = std::min(st.last, limit);
      const std::uint64_t k = std::min<std::uint64_t>(stop - st.cur + 1, room - n);
      r.address = st.cur * st.line;
      o[n++] = r;
      for (std::uint64_t i = 1; i < k; ++i) {
        r.address += st.line;
        o[n++] = r;
      }
      st.cur += k;
      st.floor = st.cur;
    }
    last = r;
    last_group = st.group;
  }
  // The common case of give(), where runs are a line or two: the runs along the
  // innermost digit of `st`'s odometer, one after the other, as long as each fits
  // whole (in `room`, up to `limit`), with the odometer's state in registers. Leaves
  // `st` after the last run it gave (next_run() goes on from there); `r` is the last
  // request given.
  void sweep(LineStream& st, TransferRequest& r, std::uint64_t limit, std::size_t room) {
    LineStream::Digit& d = st.odometer.back();
    std::int64_t at = d.at;
    std::uint64_t outer = st.outer, floor = st.floor;
    const std::int64_t end = d.end;
    const std::uint64_t step = d.bytes, first = st.run_first + step, span = st.run_bytes - 1;
    const unsigned shift = st.shift;
    TransferRequest* o = out.data();
    std::size_t k = n;
    for (; at + 1 < end; ++at, outer += step) {
      const std::uint64_t a = outer + first;
      std::uint64_t c = std::max(a >> shift, floor);
      const std::uint64_t l = (a + span) >> shift;
      if (c > l) continue;  // all given already
      if (l > limit || l - c >= room - k) break;
      for (; c <= l; ++c) {
        r.address = c << shift;
        o[k++] = r;
      }
      floor = c;
    }
    n = k;
    d.at = at;
    st.outer = outer;
    st.floor = st.cur = floor;
    st.last = floor - 1;
  }
  // The streams merged: the least one gives every line that comes no later than the
  // next least one's current line, then goes back into the heap.
  void emit(std::size_t room) {
    auto later = [&](std::size_t a, std::size_t b) { return streams[a].after(streams[b]); };
    constexpr std::uint64_t kAll = ~std::uint64_t(0);
    while (!heap.empty() && n < room) {
      if (heap.size() == 1) {  // one box left: its lines in a row
        LineStream& st = streams[heap.front()];
        give(st, kAll, room);
        if (st.done) heap.clear();
        return;
      }
      std::pop_heap(heap.begin(), heap.end(), later);
      LineStream& st = streams[heap.back()];
      const LineStream& next = streams[heap.front()];
      // st comes first; of its lines, those before next's current one (or at it, when
      // st's child, tensor and delta come first there: the same request is given once).
      std::uint64_t limit = kAll;
      if (st.write == next.write) limit = st.ties_after(next) ? next.cur - 1 : next.cur;
      give(st, limit, room);
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
  m.context.trace_end = end;
  m.context.traces = TraceFilter::from_names(s, o.tensors, o.einsums).trace_enabled;
  m.addresses = AddressMap::make(s, traced_tensors(s, m.context), options.align, options.layout, options.level);
  const TimeRange clip{0, end};  // a prefix cuts windows; a window or shard only drops requests
  if (report.empty()) return b;  // nothing to report
  // Timeloop's convention: the updates of one child level's tensor, shared by its nodes.
  std::map<std::pair<std::string, std::uint32_t>, std::shared_ptr<TimeloopUpdates>> updates;
  try {
    for (std::uint32_t n : children_of(s, options.level, o.tensors))
      for (const std::string& name : s.storages[n].tensors) {
        const int x = s.find_tensor(name);
        if (x < 0 || (!o.tensors.empty() && std::find(o.tensors.begin(), o.tensors.end(), name) == o.tensors.end()))
          continue;
        const int p = s.parent(n, name);
        if (p < 0 || s.storages[std::size_t(p)].level != options.level) continue;
        Cursor c{{}, {}, n, std::uint32_t(x)};
        if (options.convention == Convention::timeloop)
        {
          std::shared_ptr<TimeloopUpdates>& shared = updates[{s.storages[n].level, std::uint32_t(x)}];
          if (!shared) shared = make_timeloop_updates();
          c.timeloop.emplace(s, n, std::uint32_t(x), o.einsums, shared);
        }
        else
          c.windows.emplace(s, n, std::uint32_t(x), o.einsums, clip, report.from, options.partial_sums);
        m.cursors.push_back(std::move(c));
      }
  } catch (const mb::NotClosed& e) {
    if (why) *why = e.reason;
    return std::nullopt;
  }
  return b;
}

std::span<const TransferRequest> BoxTransfers::next_batch(std::int64_t until) try {
  Impl& m = *impl_;
  m.n = 0;
  while (m.n < kBatch) {
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
  return {m.out.data(), m.n};
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
