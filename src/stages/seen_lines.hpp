// Which lines a cache's stream ever accessed (its cold misses). Internal (cache.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace looptrace {

// Which lines were ever accessed: a bitmap in pages of 2^16 lines, made as addresses
// reach them (memory follows the lines touched, not the trace).
class SeenLines {
 public:
  // Whether `line` was seen before; marks it.
  bool test_and_set(std::uint64_t line) {
    std::uint64_t& word = page(line >> 16)[(line >> 6) & 1023];
    const std::uint64_t bit = std::uint64_t(1) << (line & 63);
    const bool seen = (word & bit) != 0;
    word |= bit;
    return seen;
  }

  // Marks `count` lines first, first + stride, ...; returns how many of them were not
  // seen before. The lines of a word (64 lines) at a time.
  std::uint64_t test_and_set_strided(std::uint64_t first, std::uint64_t stride, std::uint64_t count) {
    std::uint64_t fresh = 0, l = first;
    for (std::uint64_t i = 0; i < count;) {
      std::uint64_t& word = page(l >> 16)[(l >> 6) & 1023];
      const std::uint64_t base = l >> 6;
      std::uint64_t mask = 0, n = 0;
      for (; i < count && (l >> 6) == base; ++i, ++n, l += stride) mask |= std::uint64_t(1) << (l & 63);
      if ((word & mask) == 0) fresh += n;
      else if ((word & mask) != mask) fresh += std::uint64_t(std::popcount(mask & ~word));
      word |= mask;
    }
    return fresh;
  }

  // Marks the lines first .. last (first <= last); returns how many of them were not
  // seen before. A word (64 lines) at a time.
  std::uint64_t test_and_set_range(std::uint64_t first, std::uint64_t last) {
    std::uint64_t fresh = 0;
    for (std::uint64_t l = first;;) {
      std::uint64_t* p = page(l >> 16);
      const std::uint64_t end = std::min(last, l | 0xFFFF);  // in this page
      for (;;) {
        const std::uint64_t to = std::min(end, l | 63);       // in this word
        const unsigned n = unsigned(to - l + 1), at = unsigned(l & 63);
        const std::uint64_t mask = (n == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << n) - 1) << at;
        std::uint64_t& word = p[(l >> 6) & 1023];
        // All fresh or all seen (a tensor's first or later touch) without a popcount:
        // the build does not assume the CPU has the instruction.
        if ((word & mask) == 0) fresh += n;
        else if ((word & mask) != mask) fresh += std::uint64_t(std::popcount(mask & ~word));
        word |= mask;
        if (to == end) break;
        l = to + 1;
      }
      if (end == last) return fresh;
      l = end + 1;
    }
  }

 private:
  std::uint64_t* page(std::uint64_t number) {
    if (number != last_page_) {
      auto& p = pages_[number];
      if (p.empty()) p.assign(1024, 0);
      last_ = p.data(), last_page_ = number;
    }
    return last_;
  }

  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> pages_;
  std::uint64_t last_page_ = ~std::uint64_t(0);
  std::uint64_t* last_ = nullptr;
};

}  // namespace looptrace
