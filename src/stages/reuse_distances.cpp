#include "looptrace/stages/reuse_distances.hpp"

#include <algorithm>
#include <bit>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace looptrace {

namespace {
constexpr std::uint64_t kNoLine = ~std::uint64_t(0);
constexpr std::size_t kBuckets = 65;  // bucket b: distances in [2^(b-1), 2^b) (b = 0: distance 0)
}  // namespace

// Bits set in a word: the popcnt instruction where the CPU has one (the loop is
// compiled both ways: the baseline x86-64 build has none), else the SWAR count.
template <bool kPopcnt>
inline unsigned ones(std::uint64_t x) {
  if constexpr (kPopcnt) {
    return unsigned(__builtin_popcountll(x));
  } else {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return unsigned((x * 0x0101010101010101ull) >> 56);
  }
}

struct ReuseDistances::Impl {
  // Per line its last-use time (0: never used), in pages of 2^10 lines made as the
  // lines are reached: lines of one tensor are neighbours, so the last page is
  // usually the next one's too (a hash of lines missed the CPU's cache every access);
  // a small direct-mapped table of recent pages goes before the hash of pages.
  static constexpr unsigned kPageBits = 10, kRecentPages = 64;
  // A bit per time, set where some line was last used; above the bits, levels of
  // counts: an entry of level 0 counts the bits of 128 times (two words), one of level
  // k + 1 the bits of 8 entries of level k, each level in aligned groups of 8. A
  // distance, the bits after the last use t, is the bits of t's block after it, then
  // at every level the entries after t's in its group up to now's (or the group's
  // last): an 8-lane masked sum a level, added up in a register; above the level where
  // t and now share a group the range is empty. A reuse moves a bit from t to the new
  // time: at every level t's entry loses one and the new time's gains one (the same
  // entry above some level: they cancel). Every access walks every level, so no
  // branch depends on the distance (one that did mispredicted every other access);
  // there are log8 of the times / 128 of them, 4 for 65,000 lines. Times past 2^32
  // are never reached: they are renumbered first.
  static constexpr unsigned kBlockBits = 7, kFanBits = 3, kMaxLevels = 10;  // 2^(7 + 3 * 9) > 2^32
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> pages;
  struct Recent {
    std::uint64_t page = kNoLine;
    std::uint32_t* data = nullptr;
  };
  Recent recent[kRecentPages];
  std::vector<std::uint64_t> bits;    // times 0..cap-1 (time 0 never set)
  std::vector<std::uint32_t> counts;  // every level's entries, whole groups of 8 aligned to 32 bytes
  std::uint32_t* level[kMaxLevels] = {};
  unsigned levels = 0;  // the last has one group
  std::uint64_t cap = 0;
  // The bits of new lines in now's block are counted aside (`pending`) until time
  // leaves the block, so that a cold access touches no level: until then the entries
  // holding that block, at every level, lack them.
  std::uint64_t block = 0;
  std::uint32_t pending = 0;
  std::uint64_t now = 0, live = 0;  // the last time given; the lines seen
  std::uint64_t accesses = 0, cold = 0;
  std::vector<std::uint64_t> histogram;
  std::vector<std::uint64_t> tensor_accesses, tensor_cold;
  std::vector<std::uint64_t> tensor_buckets;  // per tensor, kBuckets
  bool popcnt = false;

  std::uint32_t& last_use(std::uint64_t line) {
    const std::uint64_t page = line >> kPageBits;
    Recent& r = recent[page % kRecentPages];
    if (r.page != page) {
      std::vector<std::uint32_t>& p = pages[page];
      if (p.empty()) p.assign(std::size_t(1) << kPageBits, 0);
      r.page = page, r.data = p.data();
    }
    return r.data[line & ((1u << kPageBits) - 1)];
  }
  // The bit of last use t moves to time u (> t).
  void move(std::uint64_t t, std::uint64_t u) {
    bits[t >> 6] &= ~(std::uint64_t(1) << (t & 63));
    bits[u >> 6] |= std::uint64_t(1) << (u & 63);
    std::uint64_t i = t >> kBlockBits, j = u >> kBlockBits;
    for (unsigned k = 0; k < levels; ++k, i >>= kFanBits, j >>= kFanBits) --level[k][i], ++level[k][j];
  }
  // Time passes into u's block: the pending bits join the levels.
  void enter_block(std::uint64_t u) {
    if (pending != 0)
      for (std::uint64_t k = 0, e = block; k < levels; ++k, e >>= kFanBits) level[k][e] += pending;
    block = u >> kBlockBits, pending = 0;
  }
  // Set bits at times > t (t < now).
  template <bool kPopcnt>
  std::uint64_t after(std::uint64_t t) const {
    // t's block after t: its word, and the block's second word where t is in the first.
    const std::uint64_t w = t >> 6;
    std::uint64_t s = ones<kPopcnt>(bits[w] & (~std::uint64_t(1) << (t & 63)));
    s += ones<kPopcnt>(bits[w | 1] & ((w & 1) - 1));
    // The blocks after t's up to now's: the levels, and now's block's pending bits.
    std::uint64_t i = t >> kBlockBits, n = now >> kBlockBits;
    s += pending & (std::uint64_t(0) - std::uint64_t(i != n));
#if defined(__SSE2__)
    const __m128i lane_a = _mm_setr_epi32(0, 1, 2, 3), lane_b = _mm_setr_epi32(4, 5, 6, 7);
    __m128i sum = _mm_setzero_si128();
    for (unsigned k = 0; k < levels; ++k, i >>= kFanBits, n >>= kFanBits) {
      // Lanes (i, min(n, i | 7)] of i's group.
      const std::uint64_t g = i & ~std::uint64_t(7);
      const __m128i* p = reinterpret_cast<const __m128i*>(level[k] + g);
      const __m128i lo = _mm_set1_epi32(int(i - g)), hi = _mm_set1_epi32(int(std::min(n, i | 7) - g) + 1);
      const __m128i in_a = _mm_and_si128(_mm_cmpgt_epi32(lane_a, lo), _mm_cmpgt_epi32(hi, lane_a));
      const __m128i in_b = _mm_and_si128(_mm_cmpgt_epi32(lane_b, lo), _mm_cmpgt_epi32(hi, lane_b));
      sum = _mm_add_epi32(sum, _mm_add_epi32(_mm_and_si128(_mm_load_si128(p), in_a),
                                             _mm_and_si128(_mm_load_si128(p + 1), in_b)));
    }
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
    s += std::uint32_t(_mm_cvtsi128_si32(sum));
#else
    for (unsigned k = 0; k < levels; ++k, i >>= kFanBits, n >>= kFanBits)
      for (std::uint64_t e = i + 1; e <= std::min(n, i | 7); ++e) s += level[k][e];
#endif
    return s;
  }
  // Renumbers the last-use times 1..live in order (a time's new number is its rank
  // among the live ones), in a bitmap of eight times as many (a bit per time: a byte
  // per line), so that it comes once every 7 live accesses or more; then the levels
  // from the bits.
  void compact() {
    // A time's rank: the bits of the blocks before its block (level 0 turned into
    // running sums in place: exact, as only now's block, the last with bits, lacks its
    // pending ones), then those of its block up to it.
    std::uint32_t run = 0;
    for (std::size_t e = 0; e < bits.size() / 2; ++e) run += std::exchange(level[0][e], run);
    for (auto& [_, p] : pages)
      for (std::uint32_t& t : p)
        if (t) {
          const std::uint64_t w = t >> 6;
          t = level[0][t >> kBlockBits] + ones<false>(bits[w & ~std::uint64_t(1)] & (std::uint64_t(0) - (w & 1))) +
              ones<false>(bits[w] & (~std::uint64_t(0) >> (63 - (t & 63))));
        }
    // Whole groups at every level, up to the level of one group.
    std::uint64_t sizes[kMaxLevels], total = 0;
    const std::uint64_t times = std::max<std::uint64_t>(1024, 8 * live + 2);
    levels = 0;
    for (std::uint64_t span = std::uint64_t(1) << kBlockBits;; span <<= kFanBits) {
      const std::uint64_t entries = (times + span - 1) / span;
      sizes[levels] = (entries + 7) & ~std::uint64_t(7);
      total += sizes[levels++];
      if (entries <= 8) break;
    }
    cap = sizes[0] << kBlockBits;
    bits.assign(cap / 64, 0);
    for (std::uint64_t t = 1; t <= live; ++t) bits[t >> 6] |= std::uint64_t(1) << (t & 63);
    counts.assign(total + 8, 0);  // + 8: room to align the first group
    std::uint32_t* d = counts.data();
    while (reinterpret_cast<std::uintptr_t>(d) % 32 != 0) ++d;
    for (unsigned k = 0; k < levels; d += sizes[k++]) level[k] = d;
    for (std::uint64_t e = 0; e < sizes[0]; ++e) level[0][e] = ones<false>(bits[2 * e]) + ones<false>(bits[2 * e + 1]);
    for (unsigned k = 1; k < levels; ++k)
      for (std::uint64_t e = 0; e < sizes[k - 1]; ++e) level[k][e >> kFanBits] += level[k - 1][e];
    now = live;
    block = now >> kBlockBits, pending = 0;
  }
  template <bool kPopcnt>
  [[gnu::always_inline]] inline void access(const LineAccess& a) {
    ++accesses, ++tensor_accesses[a.tensor];
    std::uint32_t& last = last_use(a.line);
    if (now + 1 >= cap) compact();  // renumbers `last` too
    const std::uint64_t u = now + 1;
    if (u >> kBlockBits != block) enter_block(u);
    if (last == 0) {
      ++cold, ++tensor_cold[a.tensor], ++live;
      bits[u >> 6] |= std::uint64_t(1) << (u & 63);
      ++pending;
    } else {
      const std::uint64_t d = after<kPopcnt>(last);  // lines last used after this one
      move(last, u);
      if (d >= histogram.size()) histogram.resize(std::max<std::size_t>(2 * histogram.size(), d + 1), 0);
      ++histogram[d];
      ++tensor_buckets[a.tensor * kBuckets + std::size_t(std::bit_width(d))];
    }
    last = std::uint32_t(now = u);
  }
#if defined(__x86_64__) || defined(__i386__)
  __attribute__((target("popcnt"))) void run_popcnt(std::span<const LineAccess> in) {
    for (const LineAccess& a : in) access<true>(a);
  }
#endif
  void run_plain(std::span<const LineAccess> in) {
    for (const LineAccess& a : in) access<false>(a);
  }
};

ReuseDistances::ReuseDistances(std::size_t tensors) : impl_(new Impl) {
  impl_->tensor_accesses.assign(tensors, 0);
  impl_->tensor_cold.assign(tensors, 0);
  impl_->tensor_buckets.assign(tensors * kBuckets, 0);
  impl_->compact();
#if defined(__x86_64__) || defined(__i386__)
  impl_->popcnt = __builtin_cpu_supports("popcnt");
#endif
}
ReuseDistances::ReuseDistances(ReuseDistances&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
ReuseDistances& ReuseDistances::operator=(ReuseDistances&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}
ReuseDistances::~ReuseDistances() { delete impl_; }

void ReuseDistances::run(std::span<const LineAccess> in) {
#if defined(__x86_64__) || defined(__i386__)
  if (impl_->popcnt) return impl_->run_popcnt(in);
#endif
  impl_->run_plain(in);
}

std::uint64_t ReuseDistances::accesses() const { return impl_->accesses; }
std::uint64_t ReuseDistances::cold() const { return impl_->cold; }
std::uint64_t ReuseDistances::lines() const { return impl_->live; }
const std::vector<std::uint64_t>& ReuseDistances::histogram() const { return impl_->histogram; }
std::uint64_t ReuseDistances::tensor_accesses(std::uint32_t t) const { return impl_->tensor_accesses[t]; }

std::vector<std::uint64_t> ReuseDistances::misses_at_powers() const {
  // Misses at C: cold + the accesses at distance >= C.
  std::vector<std::uint64_t> out;
  std::uint64_t beyond = impl_->accesses - impl_->cold;  // distances >= C, C = 1 first: all but distance 0
  const auto& h = impl_->histogram;
  std::size_t d = 0;
  for (std::uint64_t c = 1;; c *= 2) {
    for (; d < c && d < h.size(); ++d) beyond -= h[d];
    out.push_back(impl_->cold + beyond);
    if (c >= lines()) break;
  }
  return out;
}

std::vector<std::uint64_t> ReuseDistances::misses_at_powers(std::uint32_t tensor) const {
  const std::uint64_t* b = impl_->tensor_buckets.data() + tensor * kBuckets;
  std::vector<std::uint64_t> out;
  for (std::size_t k = 0;; ++k) {
    // distance >= 2^k: buckets k + 1 and up.
    std::uint64_t beyond = 0;
    for (std::size_t j = k + 1; j < kBuckets; ++j) beyond += b[j];
    out.push_back(impl_->tensor_cold[tensor] + beyond);
    if ((std::uint64_t(1) << k) >= lines()) break;
  }
  return out;
}

}  // namespace looptrace
