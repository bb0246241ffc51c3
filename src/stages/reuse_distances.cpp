#include "looptrace/stages/reuse_distances.hpp"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace looptrace {

namespace {
constexpr std::uint64_t kNoLine = ~std::uint64_t(0);
constexpr std::size_t kBuckets = 65;  // bucket b: distances in [2^(b-1), 2^b) (b = 0: distance 0)
}  // namespace

struct ReuseDistances::Impl {
  // Per line its last-use time (0: never used), in pages of 2^10 lines made as the
  // lines are reached: lines of one tensor are neighbours, so the last page is
  // usually the next one's too (a hash of lines missed the CPU's cache every access).
  static constexpr unsigned kPageBits = 10;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> pages;
  std::uint64_t last_page = kNoLine;
  std::uint32_t* page = nullptr;
  std::vector<std::uint32_t> tree;  // Fenwick over times 1..cap: 1 where some line was last used
  std::uint64_t now = 0, live = 0;  // the last time given; the lines seen
  std::uint64_t accesses = 0, cold = 0;
  std::vector<std::uint64_t> histogram;
  std::vector<std::uint64_t> tensor_accesses, tensor_cold;
  std::vector<std::uint64_t> tensor_buckets;  // per tensor, kBuckets

  std::uint32_t& last_use(std::uint64_t line) {
    if (line >> kPageBits != last_page) {
      last_page = line >> kPageBits;
      std::vector<std::uint32_t>& p = pages[last_page];
      if (p.empty()) p.assign(std::size_t(1) << kPageBits, 0);
      page = p.data();
    }
    return page[line & ((1u << kPageBits) - 1)];
  }
  void add(std::uint64_t t, std::int32_t v) {
    for (; t < tree.size(); t += t & (~t + 1)) tree[t] += std::uint32_t(v);
  }
  std::uint64_t prefix(std::uint64_t t) const {
    std::uint64_t s = 0;
    for (; t > 0; t &= t - 1) s += tree[t];
    return s;
  }
  // Renumbers the last-use times 1..live in order (a time's new number is its rank
  // among the live ones, which the tree gives), in a tree twice that size.
  void compact() {
    for (auto& [_, p] : pages)
      for (std::uint32_t& t : p)
        if (t) t = std::uint32_t(prefix(t));
    const std::size_t cap = std::max<std::size_t>(4096, 2 * live + 2);
    tree.assign(cap + 1, 0);
    for (std::size_t k = 1; k <= live; ++k) tree[k] = 1;
    for (std::size_t t = 1; t <= cap; ++t)  // a linear build: each node passes its sum to its parent
      if (const std::size_t p = t + (t & (~t + 1)); p <= cap) tree[p] += tree[t];
    now = live;
  }
  void access(const LineAccess& a) {
    ++accesses, ++tensor_accesses[a.tensor];
    std::uint32_t& last = last_use(a.line);
    if (now + 1 >= tree.size()) compact();  // renumbers `last` too
    if (last == 0) {
      ++cold, ++tensor_cold[a.tensor], ++live;
    } else {
      const std::uint64_t d = live - prefix(last);  // lines last used after this one
      add(last, -1);
      if (d >= histogram.size()) histogram.resize(std::max<std::size_t>(2 * histogram.size(), d + 1), 0);
      ++histogram[d];
      ++tensor_buckets[a.tensor * kBuckets + std::size_t(std::bit_width(d))];
    }
    ++now;
    add(now, 1);
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
