#include "looptrace/parallel_trace.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "looptrace/counts.hpp"
#include "looptrace/error.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"

namespace looptrace {

namespace {

// A piece's formatted bytes: an anonymous in-memory file, so the formatting code
// writes to it through the same OutputBuffer as to stdout. Files are reused (written
// again from the start), so their pages are allocated once.
class Scratch {
 public:
  Scratch() {
    fd_ = ::memfd_create("looptrace-piece", MFD_CLOEXEC);
    if (fd_ < 0) {  // no memfd: an unlinked temporary file
      std::FILE* f = std::tmpfile();
      if (!f) throw std::runtime_error("cannot create a buffer for a trace piece");
      fd_ = ::dup(::fileno(f));
      std::fclose(f);
    }
  }
  ~Scratch() {
    if (fd_ >= 0) ::close(fd_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  int rewind() {
    if (::lseek(fd_, 0, SEEK_SET) < 0) throw std::runtime_error("cannot rewind a trace piece");
    return fd_;
  }
  void finish() { size_ = ::lseek(fd_, 0, SEEK_CUR); }

  // Writes the bytes to `fd` from a mapping of the file: one copy, in the kernel.
  // (Not sendfile: to a pipe it lends the file's pages, which the next piece written
  // into this file would change before the reader sees them.)
  void send_to(int fd) const {
    if (size_ == 0) return;
    void* map = ::mmap(nullptr, std::size_t(size_), PROT_READ, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED) throw std::runtime_error("cannot map a trace piece");
    const char* p = static_cast<const char*>(map);
    std::size_t done = 0;
    while (done < std::size_t(size_)) {
      const ssize_t n = ::write(fd, p + done, std::size_t(size_) - done);
      if (n >= 0) {
        done += std::size_t(n);
        continue;
      }
      if (errno == EINTR) continue;
      const int error = errno;
      ::munmap(map, std::size_t(size_));
      if (error == EPIPE) throw BrokenPipe();
      throw std::runtime_error(std::string("write failed: ") + std::strerror(error));
    }
    ::munmap(map, std::size_t(size_));
  }

 private:
  int fd_ = -1;
  off_t size_ = 0;
};

std::size_t bytes_per_access(const std::string& format) {
  return format == "binary" ? 24 : format == "csv" ? 48 : 80;
}

struct Piece {
  std::vector<TimeRange> ranges;
  std::unique_ptr<Scratch> bytes;
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
  OutputBuffer out(piece.bytes->rewind());
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
  out.flush();
  piece.bytes->finish();
}

}  // namespace

void write_trace_parallel(const Schedule& s, const TraceOptions& options, const std::string& format,
                          int fd, const ParallelTraceOptions& parallel) {
  const int threads = std::max(1, parallel.threads);
  const TimeSelection selection = TimeSelection::from_options(options, s.n_timesteps);
  OutputBuffer out(fd);  // the header and trailer; pieces go to fd directly
  auto sink = make_sink(format, s, out);  // checks the format before anything runs
  Cutter cutter(s, options, selection,
                std::int64_t(parallel.chunk_bytes / bytes_per_access(format)), threads);
  const std::size_t max_held = std::size_t(threads) + 2;

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Piece> pieces;   // pieces[0] is the next to write
  std::vector<std::unique_ptr<Scratch>> spare;  // written out, to be reused
  bool exhausted = false, stop = false;

  auto work = [&] {
    for (;;) {
      Piece* piece = nullptr;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop || exhausted || pieces.size() < max_held; });
        if (stop || exhausted) return;
        std::optional<std::vector<TimeRange>> ranges;
        try {
          ranges = cutter.next();
        } catch (...) {
          pieces.push_back({{}, nullptr, std::current_exception(), true});
          exhausted = true;
          changed.notify_all();
          return;
        }
        if (!ranges) {
          exhausted = true;
          changed.notify_all();
          return;
        }
        pieces.push_back({std::move(*ranges), nullptr, nullptr, false});
        piece = &pieces.back();  // deque: stays put while others are added or popped
        if (!spare.empty()) piece->bytes = std::move(spare.back()), spare.pop_back();
      }
      try {
        if (!piece->bytes) piece->bytes = std::make_unique<Scratch>();
        format_piece(s, options, format, *piece);
      } catch (...) {
        piece->error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex);
        piece->ready = true;
      }
      changed.notify_all();
    }
  };

  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back(work);
  auto stop_workers = [&] {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    changed.notify_all();
    for (auto& w : workers) w.join();
  };
  try {
    sink->begin();
    out.flush();
    for (;;) {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return (!pieces.empty() && pieces.front().ready) || (exhausted && pieces.empty()); });
      if (pieces.empty()) break;
      Piece piece = std::move(pieces.front());
      pieces.pop_front();
      lock.unlock();
      if (piece.error) std::rethrow_exception(piece.error);
      piece.bytes->send_to(fd);
      lock.lock();
      spare.push_back(std::move(piece.bytes));
      lock.unlock();
      changed.notify_all();
      if (parallel.progress && !piece.ranges.empty()) parallel.progress(piece.ranges.back().to - 1);
    }
    sink->end();
    out.flush();
  } catch (...) {
    stop_workers();
    throw;
  }
  stop_workers();
}

}  // namespace looptrace
