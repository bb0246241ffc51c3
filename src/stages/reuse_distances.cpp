#include "looptrace/stages/reuse_distances.hpp"

#include <algorithm>
#include <bit>

namespace looptrace {

namespace {
constexpr std::uint64_t kNoLine = ~std::uint64_t(0);
constexpr std::size_t kBuckets = 65;  // bucket b: distances in [2^(b-1), 2^b) (b = 0: distance 0)
}  // namespace

struct ReuseDistances::Impl {
  // line -> dense id, open addressing; grows by doubling (once per doubling of lines).
  std::vector<std::uint64_t> keys;
  std::vector<std::uint32_t> ids;
  std::size_t mask = 0;
  unsigned shift = 64;
  std::vector<std::uint64_t> last;     // per id: its last-use time (1-based)
  std::vector<std::uint32_t> tree;     // Fenwick over times 1..cap: 1 where some line was last used
  std::vector<std::uint32_t> owner;    // per time: the id used then
  std::uint64_t now = 0;
  std::uint64_t accesses = 0, cold = 0;
  std::vector<std::uint64_t> histogram;
  std::vector<std::uint64_t> tensor_accesses, tensor_cold;
  std::vector<std::uint64_t> tensor_buckets;  // per tensor, kBuckets

  std::size_t home(std::uint64_t line) const { return std::size_t((line * 0x9E3779B97F4A7C15ull) >> shift); }
  void grow_index() {
    const std::size_t cap = std::max<std::size_t>(1024, 2 * keys.size());
    std::vector<std::uint64_t> old_keys(cap, kNoLine);
    std::vector<std::uint32_t> old_ids(cap, 0);
    old_keys.swap(keys), old_ids.swap(ids);
    mask = cap - 1, shift = unsigned(64 - std::countr_zero(cap));
    for (std::size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kNoLine) insert_new(old_keys[i], old_ids[i]);
  }
  void insert_new(std::uint64_t line, std::uint32_t id) {
    std::size_t i = home(line);
    while (keys[i] != kNoLine) i = (i + 1) & mask;
    keys[i] = line, ids[i] = id;
  }
  // The id of `line`, and whether it was new.
  std::pair<std::uint32_t, bool> id_of(std::uint64_t line) {
    if (2 * (last.size() + 1) > keys.size()) grow_index();
    std::size_t i = home(line);
    for (; keys[i] != kNoLine; i = (i + 1) & mask)
      if (keys[i] == line) return {ids[i], false};
    keys[i] = line, ids[i] = std::uint32_t(last.size());
    last.push_back(0);
    return {ids[i], true};
  }
  void add(std::uint64_t t, std::int32_t v) {
    for (; t < tree.size(); t += t & (~t + 1)) tree[t] += std::uint32_t(v);
  }
  std::uint64_t prefix(std::uint64_t t) const {
    std::uint64_t s = 0;
    for (; t > 0; t &= t - 1) s += tree[t];
    return s;
  }
  // Renumbers the live last-use times 1..lines in order, in a tree twice that size.
  void compact() {
    const std::size_t cap = std::max<std::size_t>(4096, 2 * last.size() + 2);
    std::vector<std::uint32_t> order;
    order.reserve(last.size());
    for (std::uint64_t t = 1; t <= now && t < owner.size(); ++t)
      if (last[owner[t]] == t) order.push_back(owner[t]);
    tree.assign(cap + 1, 0);
    owner.assign(cap + 1, 0);
    for (std::size_t k = 0; k < order.size(); ++k) {
      last[order[k]] = k + 1;
      owner[k + 1] = order[k];
      tree[k + 1] += 1;  // a linear Fenwick build: each node passes its sum to its parent
    }
    for (std::size_t t = 1; t <= cap; ++t)
      if (const std::size_t p = t + (t & (~t + 1)); p <= cap) tree[p] += tree[t];
    now = order.size();
  }
  void access(const LineAccess& a) {
    ++accesses, ++tensor_accesses[a.tensor];
    const auto [id, fresh] = id_of(a.line);
    if (now + 1 >= tree.size()) compact();
    if (fresh) {
      ++cold, ++tensor_cold[a.tensor];
    } else {
      const std::uint64_t p = last[id];
      const std::uint64_t d = last.size() - prefix(p);  // lines last used after p (this one was last used at p)
      add(p, -1);
      if (d >= histogram.size()) histogram.resize(std::max<std::size_t>(2 * histogram.size(), d + 1), 0);
      ++histogram[d];
      ++tensor_buckets[a.tensor * kBuckets + std::size_t(std::bit_width(d))];
    }
    ++now;
    add(now, 1);
    owner[now] = id;
    last[id] = now;
  }
};

ReuseDistances::ReuseDistances(std::size_t tensors) : impl_(new Impl) {
  impl_->tensor_accesses.assign(tensors, 0);
  impl_->tensor_cold.assign(tensors, 0);
  impl_->tensor_buckets.assign(tensors * kBuckets, 0);
  impl_->grow_index();
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
std::uint64_t ReuseDistances::lines() const { return impl_->last.size(); }
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
