// Which lines a cache's stream ever accessed (its cold misses). Internal (cache.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace looptrace {

// The words of a bitmap of lines in pages of 2^16 that hold lines first .. last (first
// <= last): fn(word, mask of those lines in it, how many) in order, until it returns
// true (then so does this); page(number) gives a page's 1024 words, or null to skip it.
template <class Page, class Fn>
bool each_line_word(std::uint64_t first, std::uint64_t last, Page page, Fn fn) {
  for (std::uint64_t l = first;;) {
    const std::uint64_t end = std::min(last, l | 0xFFFF);  // in this page
    if (auto* p = page(l >> 16))
      for (std::uint64_t w = l;;) {
        const std::uint64_t to = std::min(end, w | 63);  // in this word
        const unsigned n = unsigned(to - w + 1);
        const std::uint64_t mask = (n == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << n) - 1) << (w & 63);
        if (fn(p[(w >> 6) & 1023], mask, n)) return true;
        if (to == end) break;
        w = to + 1;
      }
    if (end == last) return false;
    l = end + 1;
  }
}

// The words of a bitmap that hold `count` lines first, first + stride, ... (0 < stride
// < 64): fn(line, mask of those lines in line's word, how many) in order, until it
// returns true (then so does this). A word's lines are one mask, the stride's bits
// shifted; at a power-of-two stride (DeepSeek-V3's softmax: every 4th line, 2^19 a
// block) how many a word holds is a shift, not a division.
template <class Fn>
bool each_strided_word(std::uint64_t first, std::uint64_t stride, std::uint64_t count, Fn fn) {
  static const std::array<std::uint64_t, 64> patterns = [] {
    std::array<std::uint64_t, 64> out{};
    for (std::uint64_t s = 1; s < 64; ++s)
      for (std::uint64_t b = 0; b < 64; b += s) out[s] |= std::uint64_t(1) << b;
    return out;
  }();
  const std::uint64_t pattern = patterns[stride];
  const bool power = std::has_single_bit(stride);
  const unsigned shift = unsigned(std::countr_zero(stride));
  const auto step = [&](std::uint64_t& i, std::uint64_t& l) {
    const unsigned at = unsigned(l & 63);
    const std::uint64_t room = (power ? (63 - at) >> shift : (63 - at) / stride) + 1;
    const std::uint64_t n = std::min<std::uint64_t>(count - i, room);
    const unsigned top = at + unsigned((n - 1) * stride);  // the last one's bit (<= 63)
    const std::uint64_t mask = (pattern << at) & (top == 63 ? ~std::uint64_t(0) : (std::uint64_t(2) << top) - 1);
    i += n;
    const std::uint64_t line = l;
    l += n * stride;
    return fn(line, mask, n);
  };
  std::uint64_t i = 0, l = first;
  if (power && count > 64) {
    // After the first word, each word holds 64 / stride of them at the same bits.
    if (step(i, l)) return true;
    const std::uint64_t per = 64 >> shift, full = pattern << (l & 63);
    for (; count - i >= per; i += per, l += 64)
      if (fn(l, full, per)) return true;
  }
  while (i < count)
    if (step(i, l)) return true;
  return false;
}

// Pages of a bitmap of lines, 1024 words (2^16 lines) each, by number, made as addresses
// reach them (memory follows the lines touched, not the trace): a page below
// kTablePages (lines below 2^36) is found through a table of a pointer per page, up to
// the highest made (8 bytes for each 2^16 lines of the address space below it); past it
// through a map, the last page found there kept at hand. A page stays where it is until
// clear(). SeenLines and LineBits keep their bits in it.
class LinePages {
 public:
  // The page `number`, or null if it was not made. The table's pages inlined, the rest
  // apart (as calls, the three Cs' shadow's bit at each miss was 4% of DeepSeek-V3's
  // softmax; a warp's compares ask of lines all over a tensor, and the map's lookups were
  // a quarter of its scatter to its experts).
  [[gnu::always_inline]] const std::uint64_t* find(std::uint64_t number) const {
    if (number < table_.size()) [[likely]]
      return table_[number] ? table_[number]->data() : nullptr;
    return far(number);
  }
  // The page `number`, made (zeroed) if need be.
  [[gnu::always_inline]] std::uint64_t* make(std::uint64_t number) {
    if (number < table_.size() && table_[number]) [[likely]]
      return table_[number]->data();
    return make_page(number);
  }
  // Every page gone. Up to kSpare of them are kept, zeroed, for the next ones made (a
  // warp's block forgets its lines at each block and touches as many pages again,
  // shifted: fresh pages cost the kernel's faults).
  void clear() {
    for (const std::uint64_t number : made_) {
      std::unique_ptr<Page>& p = number < kTablePages ? table_[number] : far_[number];
      if (spare_.size() < kSpare) p->fill(0), spare_.push_back(std::move(p));
      p.reset();
    }
    made_.clear(), far_.clear();
    last_far_ = ~std::uint64_t(0), last_far_page_ = nullptr;
  }

 private:
  using Page = std::array<std::uint64_t, 1024>;
  static constexpr std::uint64_t kTablePages = std::uint64_t(1) << 20;
  static constexpr std::size_t kSpare = 256;  // 2 MiB
  [[gnu::noinline]] const std::uint64_t* far(std::uint64_t number) const {
    if (number < kTablePages) return nullptr;
    if (number == last_far_) return last_far_page_;
    const auto it = far_.find(number);
    if (it == far_.end()) return nullptr;
    last_far_ = number, last_far_page_ = it->second->data();
    return last_far_page_;
  }
  [[gnu::noinline]] std::uint64_t* make_page(std::uint64_t number) {
    if (number >= kTablePages)
      if (const std::uint64_t* p = far(number)) return const_cast<std::uint64_t*>(p);
    std::unique_ptr<Page>* slot;
    if (number < kTablePages) {
      if (number >= table_.size())
        table_.resize(std::min<std::size_t>(kTablePages, std::max<std::size_t>(number + 1, 2 * table_.size())));
      slot = &table_[number];
    } else {
      slot = &far_[number];
    }
    if (spare_.empty()) {
      *slot = std::make_unique<Page>(Page{});
    } else {
      *slot = std::move(spare_.back());
      spare_.pop_back();
    }
    made_.push_back(number);
    return (*slot)->data();
  }

  std::vector<std::unique_ptr<Page>> table_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Page>> far_;
  std::vector<std::uint64_t> made_;  // the numbers of the pages made since clear()
  std::vector<std::unique_ptr<Page>> spare_;
  mutable std::uint64_t last_far_ = ~std::uint64_t(0);
  mutable const std::uint64_t* last_far_page_ = nullptr;
};

// Which lines were ever accessed: a bitmap of LinePages.
class SeenLines {
 public:
  // Whether `line` was seen before; marks it.
  [[gnu::always_inline]] bool test_and_set(std::uint64_t line) {
    std::uint64_t& word = page(line >> 16)[(line >> 6) & 1023];
    const std::uint64_t bit = std::uint64_t(1) << (line & 63);
    const bool seen = (word & bit) != 0;
    word |= bit;
    return seen;
  }

  // Marks `rows` rows of `row` lines, first + r x stride .. + row - 1; returns how many
  // of them were not seen before. A row inside a word is one mask (a streak's rows of
  // a few lines: GPT-3's feed-forward weights, 8 lines a row).
  std::uint64_t test_and_set_rows(std::uint64_t first, std::uint64_t row, std::uint64_t stride, std::uint64_t rows) {
    std::uint64_t fresh = 0;
    const std::uint64_t ones = row >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << row) - 1;
    for (std::uint64_t r = 0, l = first; r < rows; ++r, l += stride) {
      if ((l & 63) + row > 64) {
        fresh += test_and_set_range(l, l + row - 1);
        continue;
      }
      std::uint64_t& word = page(l >> 16)[(l >> 6) & 1023];
      const std::uint64_t mask = ones << (l & 63);
      if ((word & mask) == 0) fresh += row;
      else if ((word & mask) != mask) fresh += std::uint64_t(std::popcount(mask & ~word));
      word |= mask;
    }
    return fresh;
  }

  // Marks `count` lines first, first + stride, ...; returns how many of them were not
  // seen before. The lines of a word (64 lines) at a time.
  std::uint64_t test_and_set_strided(std::uint64_t first, std::uint64_t stride, std::uint64_t count) {
    std::uint64_t fresh = 0, l = first;
    if (stride > 0 && stride < 64) {  // a word's lines as one mask
      each_strided_word(first, stride, count, [&](std::uint64_t at, std::uint64_t mask, std::uint64_t n) {
        std::uint64_t& word = page(at >> 16)[(at >> 6) & 1023];
        if ((word & mask) == 0) fresh += n;
        else if ((word & mask) != mask) fresh += std::uint64_t(std::popcount(mask & ~word));
        word |= mask;
        return false;
      });
      return fresh;
    }
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

  // Whether none of `rows` rows of `row` lines, first + r x stride .. + row - 1, was
  // seen (changing nothing).
  bool none_in_rows(std::uint64_t first, std::uint64_t row, std::uint64_t stride, std::uint64_t rows) const {
    if (row == 1 && stride > 0 && stride < 64)  // a word's lines as one mask
      return !each_strided_word(first, stride, rows, [&](std::uint64_t at, std::uint64_t mask, std::uint64_t) {
        const std::uint64_t* p = words(at >> 16);
        return p != nullptr && (p[(at >> 6) & 1023] & mask) != 0;
      });
    for (std::uint64_t r = 0, l = first; r < rows; ++r, l += stride) {
      if ((l & 63) + row <= 64) {
        const std::uint64_t* p = words(l >> 16);
        const std::uint64_t mask = (row >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << row) - 1) << (l & 63);
        if (p != nullptr && (p[(l >> 6) & 1023] & mask) != 0) return false;
        continue;
      }
      if (each_line_word(l, l + row - 1, [&](std::uint64_t number) { return words(number); },
                         [](const std::uint64_t& word, std::uint64_t mask, unsigned) { return (word & mask) != 0; }))
        return false;
    }
    return true;
  }

  // Whether `line` was seen (changing nothing).
  bool test(std::uint64_t line) const {
    const std::uint64_t* p = words(line >> 16);
    return p != nullptr && (p[(line >> 6) & 1023] >> (line & 63) & 1) != 0;
  }

  // Marks the lines first .. last (first <= last); fn(a, b) for each run a .. b of them
  // not seen before, in order (a run may cross words and pages).
  template <class Fn>
  void set_fresh(std::uint64_t first, std::uint64_t last, Fn fn) {
    bool open = false;
    std::uint64_t a = 0, b = 0, at = first;  // the open run; the line of the word's mask's lowest bit
    const auto take = [&](std::uint64_t x, std::uint64_t y) {
      if (open && x == b + 1) {
        b = y;
        return;
      }
      if (open) fn(a, b);
      a = x, b = y, open = true;
    };
    each_line_word(first, last, [&](std::uint64_t number) { return page(number); },
                   [&](std::uint64_t& word, std::uint64_t mask, unsigned n) {
                     std::uint64_t fresh = mask & ~word;
                     word |= mask;
                     if (fresh == mask) {
                       take(at, at + n - 1);
                     } else {
                       const std::uint64_t base = at & ~std::uint64_t(63);
                       while (fresh != 0) {
                         const unsigned lo = unsigned(std::countr_zero(fresh));
                         const unsigned len = unsigned(std::countr_one(fresh >> lo));
                         take(base + lo, base + lo + len - 1);
                         fresh &= len == 64 ? 0 : ~(((std::uint64_t(1) << len) - 1) << lo);
                       }
                     }
                     at += n;
                     return false;
                   });
    if (open) fn(a, b);
  }

  // Marks the lines first .. last (first <= last); returns how many of them were not
  // seen before. A word (64 lines) at a time.
  std::uint64_t test_and_set_range(std::uint64_t first, std::uint64_t last) {
    std::uint64_t fresh = 0;
    each_line_word(first, last, [&](std::uint64_t number) { return page(number); },
                   [&](std::uint64_t& word, std::uint64_t mask, unsigned n) {
                     // All fresh or all seen (a tensor's first or later touch) without a
                     // popcount: the build does not assume the CPU has the instruction.
                     if ((word & mask) == 0) fresh += n;
                     else if ((word & mask) != mask) fresh += std::uint64_t(std::popcount(mask & ~word));
                     word |= mask;
                     return false;
                   });
    return fresh;
  }

  // The page `number`'s words, or null where none of its lines was seen.
  const std::uint64_t* words(std::uint64_t number) const { return number == last_page_ ? last_ : pages_.find(number); }

  // Nothing seen (LinePages::clear()).
  void clear() { pages_.clear(), last_page_ = ~std::uint64_t(0), last_ = nullptr; }

 private:
  // The page `number`, made if need be: the last one at once (inlined: it was a call at
  // each word of a strided mark).
  [[gnu::always_inline]] std::uint64_t* page(std::uint64_t number) {
    if (number != last_page_) last_ = pages_.make(number), last_page_ = number;
    return last_;
  }

  LinePages pages_;
  std::uint64_t last_page_ = ~std::uint64_t(0);
  std::uint64_t* last_ = nullptr;
};

// Which lines are in a set that comes and goes (the three Cs' shadow's resident
// lines): a bit per line in LinePages, never cleared (memory follows the addresses
// touched, a 512th of their bytes at 64-byte lines).
class LineBits {
 public:
  [[gnu::always_inline]] bool test(std::uint64_t line) const {
    const std::uint64_t* p = find(line >> 16);
    return p != nullptr && (p[(line >> 6) & 1023] >> (line & 63) & 1) != 0;
  }
  [[gnu::always_inline]] void set(std::uint64_t line) {
    make(line >> 16)[(line >> 6) & 1023] |= std::uint64_t(1) << (line & 63);
  }
  // `line` (in the set) out.
  [[gnu::always_inline]] void clear(std::uint64_t line) {
    const_cast<std::uint64_t*>(find(line >> 16))[(line >> 6) & 1023] &= ~(std::uint64_t(1) << (line & 63));
  }
  // Whether any of the lines first .. last (first <= last) is in the set: a word at a time.
  bool any(std::uint64_t first, std::uint64_t last) const {
    return each_line_word(first, last, [&](std::uint64_t number) { return find(number); },
                          [](std::uint64_t word, std::uint64_t mask, unsigned) { return (word & mask) != 0; });
  }

 private:
  const std::uint64_t* find(std::uint64_t number) const { return pages_.find(number); }
  std::uint64_t* make(std::uint64_t number) { return pages_.make(number); }

  LinePages pages_;
};

}  // namespace looptrace
