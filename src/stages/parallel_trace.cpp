#include "looptrace/parallel_trace.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "looptrace/closed_form/counts.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"

namespace looptrace {

namespace {

// Where a piece is formatted: an OutputBuffer large enough to hold a whole piece,
// writing to a private descriptor. While the piece is formatted the descriptor is an
// anonymous in-memory file (which only sees bytes if the piece outgrows the buffer);
// at the piece's turn, what the file got is written out and the descriptor is pointed
// at the output (dup2), so flushing the buffer writes the rest there directly: no copy
// of the common case, and the order is kept. Slots are reused, so neither the buffer's
// pages nor the file's are allocated twice.
class Slot {
 public:
  explicit Slot(std::size_t capacity) {
    spill_ = ::memfd_create("looptrace-piece", MFD_CLOEXEC);
    if (spill_ < 0) {  // no memfd: an unlinked temporary file
      std::FILE* f = std::tmpfile();
      if (!f) throw std::runtime_error("cannot create a buffer for a trace piece");
      spill_ = ::fcntl(::fileno(f), F_DUPFD_CLOEXEC, 0);
      std::fclose(f);
    }
    fd_ = ::fcntl(spill_, F_DUPFD_CLOEXEC, 0);
    if (spill_ < 0 || fd_ < 0) throw std::runtime_error("cannot create a buffer for a trace piece");
    buffer_ = std::make_unique<OutputBuffer>(fd_, capacity);
  }
  ~Slot() {
    buffer_.reset();  // flushes nothing: the buffer is empty unless something failed
    ::close(fd_);
    ::close(spill_);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // The buffer to format a piece into.
  OutputBuffer& begin() {
    if (::dup2(spill_, fd_) < 0 || ::lseek(spill_, 0, SEEK_SET) < 0)
      throw std::runtime_error("cannot reset a trace piece buffer");
    return *buffer_;
  }

  // Writes the piece to `out`: the bytes that spilled, then the buffer.
  void write_to(int out) {
    const WriteInProgress writing;  // an interrupt waits for the piece to go out whole
    const off_t spilled = ::lseek(spill_, 0, SEEK_CUR);
    if (spilled > 0) send_spill(out, spilled);
    if (::dup2(out, fd_) < 0) throw std::runtime_error("cannot write a trace piece");
    buffer_->flush();
  }

 private:
  void send_spill(int out, off_t size) const {
    void* map = ::mmap(nullptr, std::size_t(size), PROT_READ, MAP_SHARED, spill_, 0);
    if (map == MAP_FAILED) throw std::runtime_error("cannot map a trace piece");
    const char* p = static_cast<const char*>(map);
    std::size_t done = 0;
    int error = 0;
    while (done < std::size_t(size)) {
      const ssize_t n = ::write(out, p + done, std::size_t(size) - done);
      if (n >= 0) done += std::size_t(n);
      else if (errno != EINTR) {
        error = errno;
        break;
      }
    }
    ::munmap(map, std::size_t(size));
    if (error == EPIPE) throw BrokenPipe();
    if (error) throw WriteError(std::string("cannot write the output: ") + std::strerror(error));
  }

  int spill_ = -1, fd_ = -1;
  std::unique_ptr<OutputBuffer> buffer_;
};

std::size_t bytes_per_access(const std::string& format) {
  return format == "binary" ? 24 : format == "csv" ? 48 : 80;
}

struct Piece {
  std::vector<TimeRange> ranges;
  std::unique_ptr<Slot> slot;
  std::exception_ptr error;
  bool ready = false;
};

// Cuts the selection into pieces, in time order; not thread-safe (callers lock).
class Cutter {
 public:
  Cutter(const Schedule& s, const TraceOptions& o, const TimeSelection& sel, std::int64_t target, int threads)
      : selection_(sel), sampled_(o.sample_timesteps.has_value()), target_(std::max<std::int64_t>(1, target)) {
    const TraceFilter filter = TraceFilter::from_names(s, o.tensors, o.einsums);
    counter_.emplace(s, filter.trace_enabled, filter.leaf_enabled, o.max_tile_points);
    if (!selection_.ranges.empty()) cursor_ = selection_.ranges.front().from;
    const std::int64_t k = std::int64_t(selection_.ranges.size());
    sample_group_ = std::clamp<std::int64_t>(k / (std::int64_t(threads) * 16), 1, 4096);
    fallback_ = std::max<std::int64_t>(1, (sel.window.to - sel.window.from) / (std::int64_t(threads) * 64));
  }

  std::optional<std::vector<TimeRange>> next() {
    if (sampled_) {
      if (next_range_ >= selection_.ranges.size()) return std::nullopt;
      const std::size_t end = std::min(selection_.ranges.size(), next_range_ + std::size_t(sample_group_));
      std::vector<TimeRange> out(selection_.ranges.begin() + std::ptrdiff_t(next_range_),
                                 selection_.ranges.begin() + std::ptrdiff_t(end));
      next_range_ = end;
      return out;
    }
    if (selection_.ranges.empty() || cursor_ >= selection_.window.to) return std::nullopt;
    const std::int64_t from = cursor_, to = end_after(from);
    cursor_ = to;
    return std::vector<TimeRange>{{from, to}};
  }

 private:
  std::int64_t count(std::int64_t from, std::int64_t to) {
    try {
      return counter_->accesses({from, to});
    } catch (const SpecError&) {  // an image too large to count: cut by time instead
      counting_ = false;
      return 0;
    }
  }

  // The end of the piece that starts at `from`: as far as `target_` accesses reach
  // (galloping from the last piece's length, then bisecting), at least one timestep.
  std::int64_t end_after(std::int64_t from) {
    const std::int64_t end = selection_.window.to;
    if (!counting_) return std::min(end, from + fallback_);
    std::int64_t lo = from + 1, hi = std::min(end, from + std::max<std::int64_t>(1, last_length_));
    if (count(from, hi) <= target_) {  // grow
      lo = hi;
      while (counting_ && hi < end) {
        const std::int64_t next = std::min(end, from + 2 * (hi - from));
        if (count(from, next) > target_) {
          hi = next;
          break;
        }
        lo = hi = next;
      }
      if (lo == hi) return finish(from, hi);
    }
    // count(from, lo) <= target or lo == from + 1; count(from, hi) > target.
    while (counting_ && hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (count(from, mid) <= target_) lo = mid;
      else hi = mid;
    }
    if (!counting_) return std::min(end, from + fallback_);
    return finish(from, lo);
  }

  std::int64_t finish(std::int64_t from, std::int64_t to) {
    last_length_ = to - from;
    return to;
  }

  TimeSelection selection_;
  bool sampled_;
  std::int64_t target_;
  std::optional<AccessCounter> counter_;
  bool counting_ = true;
  std::int64_t cursor_ = 0, last_length_ = 1024, fallback_ = 1, sample_group_ = 1;
  std::size_t next_range_ = 0;
};

void format_piece(const Schedule& s, const TraceOptions& options, const std::string& format, Piece& piece) {
  OutputBuffer& out = piece.slot->begin();
  auto sink = make_sink(format, s, out);
  for (const TimeRange& r : piece.ranges) {
    TraceOptions o = options;  // the filters, and this range alone
    o.from = r.from;
    o.to = r.to;
    o.max_timesteps.reset();
    o.shard.reset();
    o.sample_timesteps.reset();
    AccessStream stream(s, o);
    for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch()) sink->write(batch);
  }
}

// Workers format the pieces the cutter hands out, at most `max_held` at once; the
// caller writes them out in order and gives their slots back for reuse.
class PieceQueue {
 public:
  PieceQueue(const Schedule& s, const TraceOptions& options, const std::string& format, Cutter& cutter,
             std::size_t max_held, std::size_t capacity)
      : s_(s), options_(options), format_(format), cutter_(cutter), max_held_(max_held), capacity_(capacity) {}

  // The worker loop: take the next piece (or stop), format it, mark it ready.
  void work() {
    for (;;) {
      Piece* piece = admit();
      if (!piece) return;
      try {
        if (!piece->slot) piece->slot = std::make_unique<Slot>(capacity_);
        format_piece(s_, options_, format_, *piece);
      } catch (...) {
        piece->error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        piece->ready = true;
      }
      changed_.notify_all();
    }
  }

  // Writes every piece to fd in order as it becomes ready (rethrowing a worker's error).
  void write_in_order(int fd, const std::function<void(std::int64_t)>& progress) {
    for (;;) {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return (!pieces_.empty() && pieces_.front().ready) || (exhausted_ && pieces_.empty()); });
      if (pieces_.empty()) return;
      // The piece stays in the queue while it is written (no worker touches a ready
      // piece), so its slot is free again before a new piece can be admitted: at most
      // max_held slots ever exist.
      Piece& piece = pieces_.front();
      lock.unlock();
      if (piece.error) std::rethrow_exception(piece.error);
      piece.slot->write_to(fd);
      const std::int64_t last = piece.ranges.empty() ? -1 : piece.ranges.back().to - 1;
      lock.lock();
      spare_.push_back(std::move(piece.slot));
      pieces_.pop_front();
      lock.unlock();
      changed_.notify_all();
      if (progress && last >= 0) progress(last);
    }
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
  }

 private:
  // The next piece to format, queued in order, or null when there is none (or an
  // error in the cutter, queued as a piece so the writer rethrows it in its place).
  Piece* admit() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stop_ || exhausted_ || pieces_.size() < max_held_; });
    if (stop_ || exhausted_) return nullptr;
    std::optional<std::vector<TimeRange>> ranges;
    try {
      ranges = cutter_.next();
    } catch (...) {
      pieces_.push_back({{}, nullptr, std::current_exception(), true});
      exhausted_ = true;
      changed_.notify_all();
      return nullptr;
    }
    if (!ranges) {
      exhausted_ = true;
      changed_.notify_all();
      return nullptr;
    }
    pieces_.push_back({std::move(*ranges), nullptr, nullptr, false});
    Piece* piece = &pieces_.back();  // deque: stays put while others are added or popped
    if (!spare_.empty()) piece->slot = std::move(spare_.back()), spare_.pop_back();
    return piece;
  }

  const Schedule& s_;
  const TraceOptions& options_;
  const std::string& format_;
  Cutter& cutter_;
  const std::size_t max_held_, capacity_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> pieces_;                  // pieces_[0] is the next to write
  std::vector<std::unique_ptr<Slot>> spare_;  // written out, to be reused
  bool exhausted_ = false, stop_ = false;
};

}  // namespace

void write_trace_parallel(const Schedule& s, const TraceOptions& options, const std::string& format,
                          int fd, const ParallelTraceOptions& parallel) {
  const int threads = std::max(1, parallel.threads);
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  OutputBuffer out(fd);  // the header and trailer; pieces go to fd directly
  auto sink = make_sink(format, s, out);  // checks the format before anything runs
  Cutter cutter(s, options, selection,
                std::int64_t(parallel.chunk_bytes / bytes_per_access(format)), threads);
  // Room for a piece and then some: a larger one spills into the slot's file.
  const std::size_t capacity = std::max<std::size_t>(parallel.chunk_bytes + parallel.chunk_bytes / 2, 256);
  PieceQueue queue(s, options, format, cutter, std::size_t(threads) + 2, capacity);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back([&] { queue.work(); });
  auto stop_workers = [&] {
    queue.stop();
    for (auto& w : workers) w.join();
  };
  try {
    sink->begin();
    out.flush();
    queue.write_in_order(fd, parallel.progress);
    sink->end();
    out.flush();
  } catch (...) {
    stop_workers();
    throw;
  }
  stop_workers();
}

}  // namespace looptrace
