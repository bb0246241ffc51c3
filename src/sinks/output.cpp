#include "looptrace/sinks/output.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

namespace looptrace {

OutputBuffer::OutputBuffer(int fd, std::size_t capacity)
    : fd_(fd), data_(capacity), capacity_(capacity) {}

OutputBuffer::~OutputBuffer() {
  try {
    flush();
  } catch (...) {
  }
}

void OutputBuffer::grow(std::size_t n) {
  data_.resize(n);
  capacity_ = n;
}

void OutputBuffer::flush() {
  std::size_t done = 0;
  while (done < size_) {
    ssize_t w = ::write(fd_, data_.data() + done, size_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      size_ = 0;
      if (errno == EPIPE) throw BrokenPipe();
      throw std::runtime_error(std::string("write failed: ") + std::strerror(errno));
    }
    done += std::size_t(w);
  }
  size_ = 0;
}

}  // namespace looptrace
