// A buffered writer to a file descriptor: formatting appends to memory, and the bytes
// go out in large writes, never one syscall per line.
#pragma once

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

class OutputBuffer {
 public:
  explicit OutputBuffer(int fd, std::size_t capacity = 1 << 20);
  ~OutputBuffer();  // flushes; errors there are swallowed (call flush() to see them)
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  void flush();  // throws BrokenPipe, or std::runtime_error for other write errors

  // Room for at least n more bytes; returns where to write them.
  char* reserve(std::size_t n) {
    if (capacity_ - size_ < n) {
      flush();
      if (capacity_ < n) grow(n);
    }
    return data_.data() + size_;
  }
  void commit(char* end) { size_ = std::size_t(end - data_.data()); }

  void write(std::string_view s) {
    char* p = reserve(s.size());
    std::memcpy(p, s.data(), s.size());
    size_ += s.size();
  }
  void write_int(std::int64_t v) {
    char* p = reserve(24);
    commit(std::to_chars(p, p + 24, v).ptr);
  }
  void put(char c) { *reserve(1) = c, ++size_; }

 private:
  void grow(std::size_t n);
  int fd_;
  std::vector<char> data_;
  std::size_t capacity_;
  std::size_t size_ = 0;
};

}  // namespace looptrace
