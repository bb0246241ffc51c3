#include "looptrace/stages/reuse_distances.hpp"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace looptrace {

namespace {
constexpr std::uint64_t kNoLine = ~std::uint64_t(0);
constexpr std::size_t kBuckets = 65;  // bucket b: distances in [2^(b-1), 2^b) (b = 0: distance 0)
}  // namespace

// Bits set in a word (no popcnt instruction in the baseline x86-64 build).
inline unsigned ones(std::uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return unsigned((x * 0x0101010101010101ull) >> 56);
}

struct ReuseDistances::Impl {
  // Per line its last-use time (0: never used), in pages of 2^10 lines made as the
  // lines are reached: lines of one tensor are neighbours, so the last page is
  // usually the next one's too (a hash of lines missed the CPU's cache every access);
  // a small direct-mapped table of recent pages goes before the hash of pages.
  static constexpr unsigned kPageBits = 10, kRecentPages = 64;
  // Times in blocks of kBlockWords words of 64: a bit per time, set where some line was
  // last used, and a Fenwick tree over the blocks' counts. A distance is the bits set
  // after the line's last use: counted word by word when that is near, else the tree.
  static constexpr std::size_t kBlockWords = 2, kBlockBits = 6 + 1;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> pages;
  struct Recent {
    std::uint64_t page = kNoLine;
    std::uint32_t* data = nullptr;
  };
  Recent recent[kRecentPages];
  std::vector<std::uint64_t> bits;  // times 0..cap-1 (time 0 never set)
  std::vector<std::uint32_t> tree;  // Fenwick over blocks 1..blocks: lines last used in each
  // The current block (now's): its changes wait here, as no count asks for the blocks
  // before a later one, until `now` leaves it (one update of the tree per 128 times).
  std::uint64_t current = 0;
  std::int64_t pending = 0;
  std::uint64_t now = 0, live = 0;  // the last time given; the lines seen
  std::uint64_t accesses = 0, cold = 0;
  std::vector<std::uint64_t> histogram;
  std::vector<std::uint64_t> tensor_accesses, tensor_cold;
  std::vector<std::uint64_t> tensor_buckets;  // per tensor, kBuckets

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
  void add(std::uint64_t block, std::int32_t v) {
    if (block == current) {
      pending += v;
      return;
    }
    update(block, v);
  }
  void update(std::uint64_t block, std::int64_t v) {
    for (std::uint64_t b = block + 1; b < tree.size(); b += b & (~b + 1)) tree[b] += std::uint32_t(v);
  }
  // Set bits in the blocks before `block`.
  std::uint64_t before(std::uint64_t block) const {
    std::uint64_t s = 0;
    for (std::uint64_t b = block; b > 0; b &= b - 1) s += tree[b];
    return s;
  }
  // Set bits at times <= t.
  std::uint64_t rank(std::uint64_t t) const {
    const std::uint64_t w = t >> 6, first = w & ~std::uint64_t(kBlockWords - 1);
    std::uint64_t s = before(t >> kBlockBits);
    for (std::uint64_t i = first; i < w; ++i) s += ones(bits[i]);
    return s + ones(bits[w] & (~std::uint64_t(0) >> (63 - (t & 63))));
  }
  // Set bits at times > t (t < now).
  std::uint64_t after(std::uint64_t t) const {
    const std::uint64_t w = t >> 6, last = now >> 6;
    if (last - w < 4) {  // near: word by word
      std::uint64_t s = ones(bits[w] & ~(~std::uint64_t(0) >> (63 - (t & 63))));
      for (std::uint64_t i = w + 1; i <= last; ++i) s += ones(bits[i]);
      return s;
    }
    return live - rank(t);
  }
  // Renumbers the last-use times 1..live in order (a time's new number is its rank
  // among the live ones), in a bitmap of eight times as many (a bit per time: a byte
  // per line), so that it comes once every 7 live accesses or more.
  void compact() {
    for (auto& [_, p] : pages)
      for (std::uint32_t& t : p)
        if (t) t = std::uint32_t(rank(t));
    const std::size_t blocks = std::max<std::size_t>(8, (8 * live + 2) / (64 * kBlockWords) + 1);
    bits.assign(blocks * kBlockWords, 0);
    for (std::uint64_t t = 1; t <= live; ++t) bits[t >> 6] |= std::uint64_t(1) << (t & 63);
    tree.assign(blocks + 1, 0);
    for (std::size_t b = 0; b < blocks; ++b)
      for (std::size_t i = 0; i < kBlockWords; ++i) tree[b + 1] += ones(bits[b * kBlockWords + i]);
    for (std::size_t b = 1; b <= blocks; ++b)  // a linear build: each node passes its sum to its parent
      if (const std::size_t p = b + (b & (~b + 1)); p <= blocks) tree[p] += tree[b];
    now = live;
    current = now >> kBlockBits, pending = 0;
  }
  void access(const LineAccess& a) {
    ++accesses, ++tensor_accesses[a.tensor];
    std::uint32_t& last = last_use(a.line);
    if (now + 1 >= bits.size() * 64) compact();  // renumbers `last` too
    if (last == 0) {
      ++cold, ++tensor_cold[a.tensor], ++live;
    } else {
      const std::uint64_t d = after(last);  // lines last used after this one
      bits[last >> 6] &= ~(std::uint64_t(1) << (last & 63));
      add(last >> kBlockBits, -1);
      if (d >= histogram.size()) histogram.resize(std::max<std::size_t>(2 * histogram.size(), d + 1), 0);
      ++histogram[d];
      ++tensor_buckets[a.tensor * kBuckets + std::size_t(std::bit_width(d))];
    }
    ++now;
    if (now >> kBlockBits != current) {
      if (pending != 0) update(current, pending);
      current = now >> kBlockBits, pending = 0;
    }
    bits[now >> 6] |= std::uint64_t(1) << (now & 63);
    add(now >> kBlockBits, 1);
    last = std::uint32_t(now);
  }
};

ReuseDistances::ReuseDistances(std::size_t tensors) : impl_(new Impl) {
  impl_->tensor_accesses.assign(tensors, 0);
  impl_->tensor_cold.assign(tensors, 0);
  impl_->tensor_buckets.assign(tensors * kBuckets, 0);
  impl_->compact();
}
ReuseDistances::ReuseDistances(ReuseDistances&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
ReuseDistances& ReuseDistances::operator=(ReuseDistances&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}
ReuseDistances::~ReuseDistances() { delete impl_; }

void ReuseDistances::run(std::span<const LineAccess> in) {
  for (const LineAccess& a : in) impl_->access(a);
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
