#include "looptrace/sinks/output.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <unistd.h>

namespace looptrace {

namespace {

// The interrupt's state, shared with the signal handler: lock-free atomics only.
std::atomic<int> g_writes_in_progress{0};
volatile std::sig_atomic_t g_pending_signal = 0;
std::atomic<const OutputBuffer*> g_stdout_buffer{nullptr};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<const OutputBuffer*>::is_always_lock_free);

extern "C" void on_interrupt(int signal) {
  if (g_writes_in_progress.load() > 0) {  // the write ends, then ~WriteInProgress exits
    g_pending_signal = signal;
    return;
  }
  if (const OutputBuffer* out = g_stdout_buffer.load()) out->write_committed_from_signal_handler();
  ::_exit(128 + signal);
}

}  // namespace

void exit_between_records_on_interrupt() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);  // one handler at a time
  sigaddset(&action.sa_mask, SIGTERM);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

WriteInProgress::WriteInProgress() { g_writes_in_progress.fetch_add(1); }

WriteInProgress::~WriteInProgress() {
  if (g_writes_in_progress.fetch_sub(1) == 1 && g_pending_signal != 0) {
    if (const OutputBuffer* out = g_stdout_buffer.load()) out->write_committed_from_signal_handler();
    ::_exit(128 + g_pending_signal);
  }
}

OutputBuffer::OutputBuffer(int fd, std::size_t capacity)
    : fd_(fd), data_(capacity), capacity_(capacity) {
  const OutputBuffer* none = nullptr;
  if (fd == STDOUT_FILENO) g_stdout_buffer.compare_exchange_strong(none, this);
}

OutputBuffer::~OutputBuffer() {
  try {
    flush();
  } catch (...) {
  }
  const OutputBuffer* self = this;
  g_stdout_buffer.compare_exchange_strong(self, nullptr);
}

void OutputBuffer::write_committed_from_signal_handler() const noexcept {
  std::size_t done = 0;
  while (done < size_) {
    const ssize_t w = ::write(fd_, data_.data() + done, size_ - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += std::size_t(w);
  }
}

void OutputBuffer::grow(std::size_t n) {
  const WriteInProgress moving;  // the handler must not read data_ while it moves
  data_.resize(n);
  capacity_ = n;
}

void OutputBuffer::flush() {
  const WriteInProgress writing;  // an interrupt waits for the buffer to go out whole
  std::size_t done = 0;
  while (done < size_) {
    ssize_t w = ::write(fd_, data_.data() + done, size_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      size_ = 0;
      if (errno == EPIPE) throw BrokenPipe();
      throw WriteError(std::string("cannot write the output: ") + std::strerror(errno));
    }
    done += std::size_t(w);
  }
  size_ = 0;
}

}  // namespace looptrace
