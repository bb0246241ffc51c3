// A buffered writer to a file descriptor: formatting appends to memory, and the bytes
// go out in large writes, never one syscall per line.
#pragma once

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace looptrace {

// The reader went away (EPIPE): not an error for a command piped into `head`.
struct BrokenPipe : std::runtime_error {
  BrokenPipe() : std::runtime_error("broken pipe") {}
};

// A write that failed for another reason (a full disk, a closed descriptor): an
// error the command reports (exit 1), not an internal failure.
struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Ctrl-C (SIGINT) and SIGTERM end a command between two records, never inside one:
// what the buffer on standard output holds (whole records only) is written, and the
// process exits with 128 + the signal (130 for Ctrl-C). A write in progress (a
// WriteInProgress alive) is finished first. Call once, from main(), before any output.
void exit_between_records_on_interrupt();

// While one lives, an interrupt waits for it to end: a flush or a piece written whole.
class WriteInProgress {
 public:
  WriteInProgress();
  ~WriteInProgress();  // exits (128 + signal) when an interrupt came meanwhile
  WriteInProgress(const WriteInProgress&) = delete;
  WriteInProgress& operator=(const WriteInProgress&) = delete;
};

class OutputBuffer {
 public:
  explicit OutputBuffer(int fd, std::size_t capacity = 1 << 20);
  ~OutputBuffer();  // flushes; errors there are swallowed (call flush() to see them)
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  void flush();  // throws BrokenPipe, or WriteError for other write errors

  // Room for at least n more bytes; returns where to write them.
  char* reserve(std::size_t n) {
    if (capacity_ - size_ < n) {
      flush();
      if (capacity_ < n) grow(n);
    }
    return data_.data() + size_;
  }
  void commit(char* end) {
    // The record's bytes are stored before size_ counts them (an interrupt handler
    // writes [0, size_)): a compiler barrier, no instruction.
    std::atomic_signal_fence(std::memory_order_release);
    size_ = std::size_t(end - data_.data());
  }

  void write(std::string_view s) {
    char* p = reserve(s.size());
    std::memcpy(p, s.data(), s.size());
    commit(p + s.size());
  }
  void write_int(std::int64_t v) {
    char* p = reserve(24);
    commit(std::to_chars(p, p + 24, v).ptr);
  }
  void put(char c) {
    char* p = reserve(1);
    *p = c;
    commit(p + 1);
  }

  // For the interrupt handler only: writes the committed bytes with write(2) alone.
  void write_committed_from_signal_handler() const noexcept;

 private:
  void grow(std::size_t n);
  int fd_;
  std::vector<char> data_;
  std::size_t capacity_;
  std::size_t size_ = 0;
};

}  // namespace looptrace
