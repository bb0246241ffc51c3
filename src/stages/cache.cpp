#include "looptrace/stages/cache.hpp"

#include <algorithm>
#include <bit>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

constexpr std::uint64_t kNoLine = ~std::uint64_t(0);  // an empty way (no address / B is this)

std::string bytes_text(std::uint64_t b) { return std::to_string(b) + " bytes"; }

// What a fill pushed out.
struct Victim {
  bool valid = false, dirty = false;
  std::uint64_t line = 0;
  std::uint32_t tensor = 0;
};

// line -> slot, open addressing with backward-shift deletion; sized once (the lines of
// a cache), so it never grows.
class LineIndex {
 public:
  void init(std::size_t entries) {
    const std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, 2 * entries));
    keys_.assign(cap, kNoLine);
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    shift_ = unsigned(64 - std::countr_zero(cap));
  }
  std::int64_t find(std::uint64_t line) const {
    for (std::size_t i = home(line);; i = (i + 1) & mask_) {
      if (keys_[i] == line) return slots_[i];
      if (keys_[i] == kNoLine) return -1;
    }
  }
  void insert(std::uint64_t line, std::uint32_t slot) {
    std::size_t i = home(line);
    while (keys_[i] != kNoLine) i = (i + 1) & mask_;
    keys_[i] = line, slots_[i] = slot;
  }
  void erase(std::uint64_t line) {
    std::size_t i = home(line);
    while (keys_[i] != line) i = (i + 1) & mask_;
    keys_[i] = kNoLine;
    // Pull back every later entry of the run whose home is not between the hole and it.
    for (std::size_t j = (i + 1) & mask_; keys_[j] != kNoLine; j = (j + 1) & mask_) {
      const std::size_t h = home(keys_[j]);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      keys_[i] = keys_[j], slots_[i] = slots_[j], keys_[j] = kNoLine;
      i = j;
    }
  }

 private:
  std::size_t home(std::uint64_t line) const { return std::size_t((line * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 60;
};

// A fully associative cache of N lines in recency order (LRU: a hit moves the line to
// the front; FIFO: it does not). O(1) per access whatever N.
class Ordered {
 public:
  void init(std::size_t lines, bool promote) {
    n_ = lines, promote_ = promote;
    index_.init(lines);
    line_.assign(lines, kNoLine), dirty_.assign(lines, 0), owner_.assign(lines, 0);
    prev_.assign(lines, -1), next_.assign(lines, -1);
  }
  std::int64_t lookup(std::uint64_t line) const { return index_.find(line); }
  void hit(std::int64_t slot) {
    if (promote_) to_front(std::int32_t(slot));
  }
  Victim fill(std::uint64_t line, bool dirty, std::uint32_t tensor) {
    Victim v;
    std::int32_t s;
    if (used_ < n_) {
      s = std::int32_t(used_++);
    } else {
      s = tail_;
      v = {true, dirty_[std::size_t(s)] != 0, line_[std::size_t(s)], owner_[std::size_t(s)]};
      index_.erase(line_[std::size_t(s)]);
      unlink(s);
    }
    line_[std::size_t(s)] = line, dirty_[std::size_t(s)] = dirty, owner_[std::size_t(s)] = tensor;
    index_.insert(line, std::uint32_t(s));
    push_front(s);
    return v;
  }
  std::uint8_t& dirty(std::int64_t slot) { return dirty_[std::size_t(slot)]; }
  template <class Fn>
  void each_dirty(Fn fn) const {
    for (std::size_t s = 0; s < used_; ++s)
      if (dirty_[s]) fn(owner_[s]);
  }

 private:
  void unlink(std::int32_t s) {
    const std::int32_t p = prev_[std::size_t(s)], n = next_[std::size_t(s)];
    (p >= 0 ? next_[std::size_t(p)] : head_) = n;
    (n >= 0 ? prev_[std::size_t(n)] : tail_) = p;
  }
  void push_front(std::int32_t s) {
    prev_[std::size_t(s)] = -1, next_[std::size_t(s)] = head_;
    (head_ >= 0 ? prev_[std::size_t(head_)] : tail_) = s;
    head_ = s;
  }
  void to_front(std::int32_t s) {
    if (s == head_) return;
    unlink(s);
    push_front(s);
  }

  std::size_t n_ = 0, used_ = 0;
  bool promote_ = true;
  LineIndex index_;
  std::vector<std::uint64_t> line_;
  std::vector<std::uint8_t> dirty_;
  std::vector<std::uint32_t> owner_;
  std::vector<std::int32_t> prev_, next_;
  std::int32_t head_ = -1, tail_ = -1;
};

// A set-associative cache: per set, `ways` tags in a row, and per way a stamp (LRU:
// last use; FIFO: fill; 0: empty, so the lowest empty way is the smallest stamp) or,
// for PLRU, the set's tree (ways - 1 nodes, one byte each: 0 points left, 1 right).
template <CachePolicy P>
class SetAssociative {
 public:
  void init(std::uint64_t sets, std::uint64_t ways) {
    sets_ = sets, ways_ = ways;
    pow2_ = std::has_single_bit(sets), mask_ = sets - 1;
    tag_.assign(sets * ways, kNoLine), dirty_.assign(sets * ways, 0), owner_.assign(sets * ways, 0);
    sig_.assign(sets * ways, signature(kNoLine));
    if constexpr (P == CachePolicy::plru) tree_.assign(sets * ways, 0);
    else stamp_.assign(sets * ways, 0);
  }
  std::int64_t lookup(std::uint64_t line) {
    base_ = std::size_t(pow2_ ? line & mask_ : line % sets_) * ways_;
    const std::uint64_t* t = tag_.data() + base_;
#if defined(__SSE2__)
    // Ways in eights: compare 16-bit signatures eight at a time, then the tags of the
    // ways that match (a branch on which way holds the line mispredicted most of the time).
    if (ways_ % 8 == 0) {
      const __m128i want = _mm_set1_epi16(short(signature(line)));
      const std::uint16_t* g = sig_.data() + base_;
      for (std::size_t w = 0; w < ways_; w += 8) {
        const __m128i have = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + w));
        for (unsigned m = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi16(have, want))); m != 0; m &= m - 4) {
          const std::size_t way = w + unsigned(__builtin_ctz(m)) / 2;
          if (t[way] == line) return std::int64_t(base_ + way);
        }
      }
      return -1;
    }
#endif
    for (std::size_t w = 0; w < ways_; ++w)
      if (t[w] == line) return std::int64_t(base_ + w);
    return -1;
  }
  // After lookup(), in the same set.
  void hit(std::int64_t id) {
    if constexpr (P == CachePolicy::lru) stamp_[std::size_t(id)] = ++clock_;
    if constexpr (P == CachePolicy::plru) touch(std::size_t(id) - base_);
  }
  Victim fill(std::uint64_t line, bool dirty, std::uint32_t tensor) {
    const std::size_t w = victim_way(), id = base_ + w;
    Victim v;
    if (tag_[id] != kNoLine) v = {true, dirty_[id] != 0, tag_[id], owner_[id]};
    tag_[id] = line, sig_[id] = signature(line), dirty_[id] = dirty, owner_[id] = tensor;
    if constexpr (P == CachePolicy::plru) touch(w);
    else stamp_[id] = ++clock_;
    return v;
  }
  std::uint8_t& dirty(std::int64_t id) { return dirty_[std::size_t(id)]; }
  template <class Fn>
  void each_dirty(Fn fn) const {
    for (std::size_t i = 0; i < tag_.size(); ++i)
      if (tag_[i] != kNoLine && dirty_[i]) fn(owner_[i]);
  }

 private:
  std::size_t victim_way() const {
    if constexpr (P == CachePolicy::plru) {
      for (std::size_t w = 0; w < ways_; ++w)
        if (tag_[base_ + w] == kNoLine) return w;
      std::size_t node = 0, lo = 0, hi = ways_;
      const std::uint8_t* tree = tree_.data() + base_;
      while (hi - lo > 1) {
        const std::size_t mid = (lo + hi) / 2;
        if (tree[node]) node = 2 * node + 2, lo = mid;
        else node = 2 * node + 1, hi = mid;
      }
      return lo;
    } else {
      const std::uint64_t* s = stamp_.data() + base_;
      std::size_t best = 0;
      for (std::size_t w = 1; w < ways_; ++w)
        if (s[w] < s[best]) best = w;
      return best;
    }
  }
  // Points every node on the way's path away from it.
  void touch(std::size_t way) {
    std::size_t node = 0, lo = 0, hi = ways_;
    std::uint8_t* tree = tree_.data() + base_;
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (way < mid) tree[node] = 1, node = 2 * node + 1, hi = mid;
      else tree[node] = 0, node = 2 * node + 2, lo = mid;
    }
  }

  // 16 bits of a line (the same line, the same bits; a collision only costs a tag compare).
  static std::uint16_t signature(std::uint64_t line) { return std::uint16_t((line * 0x9E3779B97F4A7C15ull) >> 48); }

  std::uint64_t sets_ = 1, ways_ = 1, mask_ = 0;
  bool pow2_ = true;
  std::size_t base_ = 0;  // the first way of the set of the last lookup
  std::uint64_t clock_ = 0;
  std::vector<std::uint64_t> tag_, stamp_;
  std::vector<std::uint16_t> sig_;  // per way: signature(tag)
  std::vector<std::uint8_t> dirty_, tree_;
  std::vector<std::uint32_t> owner_;
};

// Which lines were ever accessed: a bitmap in pages of 2^16 lines, made as addresses
// reach them (memory follows the lines touched, not the trace).
class SeenLines {
 public:
  // Whether `line` was seen before; marks it.
  bool test_and_set(std::uint64_t line) {
    const std::uint64_t page = line >> 16;
    if (page != last_page_) {
      auto& p = pages_[page];
      if (p.empty()) p.assign(1024, 0);
      last_ = p.data(), last_page_ = page;
    }
    std::uint64_t& word = last_[(line >> 6) & 1023];
    const std::uint64_t bit = std::uint64_t(1) << (line & 63);
    const bool seen = (word & bit) != 0;
    word |= bit;
    return seen;
  }

 private:
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> pages_;
  std::uint64_t last_page_ = kNoLine;
  std::uint64_t* last_ = nullptr;
};

}  // namespace

CacheCounts& CacheCounts::operator+=(const CacheCounts& o) {
  accesses += o.accesses, hits += o.hits, misses += o.misses, cold += o.cold, capacity += o.capacity;
  writebacks += o.writebacks, write_throughs += o.write_throughs;
  return *this;
}

CachePolicy parse_cache_policy(const std::string& text) {
  if (text == "lru") return CachePolicy::lru;
  if (text == "fifo") return CachePolicy::fifo;
  if (text == "plru") return CachePolicy::plru;
  throw SpecError("unknown cache policy '" + text + "'; expected lru, fifo or plru");
}

const char* policy_name(CachePolicy p) {
  return p == CachePolicy::lru ? "lru" : p == CachePolicy::fifo ? "fifo" : "plru";
}

void check_cache_config(const CacheConfig& c) {
  const std::string who = "cache '" + c.name + "': ";
  if (!std::has_single_bit(c.line_bytes))
    throw SpecError(who + "the line size takes a power of two, not " + bytes_text(c.line_bytes));
  if (c.size == 0 || c.size % c.line_bytes != 0)
    throw SpecError(who + "the size (" + bytes_text(c.size) + ") is not a whole number of " +
                    bytes_text(c.line_bytes) + " lines");
  if (c.ways > c.lines())
    throw SpecError(who + std::to_string(c.ways) + " ways are more than its " + std::to_string(c.lines()) + " lines (" +
                    bytes_text(c.size) + " / " + bytes_text(c.line_bytes) + ")");
  if (c.lines() % c.associativity() != 0)
    throw SpecError(who + "the size (" + bytes_text(c.size) + ") is not a multiple of line x ways (" +
                    bytes_text(c.line_bytes * c.associativity()) + "): the sets would not be whole");
  if (c.policy == CachePolicy::plru && !std::has_single_bit(c.associativity()))
    throw SpecError(who + "plru is a binary tree over the ways, which takes a power of two, not " +
                    std::to_string(c.associativity()) + " ways");
  if (c.lines() > (std::uint64_t(1) << 31))
    throw SpecError(who + "more than 2^31 lines (" + std::to_string(c.lines()) + ") is not simulated");
}

void lower_lines(std::span<const CacheAccess> in, std::uint64_t upper, std::uint64_t lower,
                 std::vector<LineAccess>& out) {
  out.clear();
  const unsigned shift = unsigned(std::countr_zero(lower));
  const auto add = [&](std::int64_t t, std::uint64_t address, bool write, std::uint32_t tensor) {
    for (std::uint64_t l = address >> shift; l <= (address + upper - 1) >> shift; ++l)
      out.push_back({t, l, kNoTrace, tensor, write});
  };
  for (const CacheAccess& a : in) {
    if (a.is(CacheAccess::dirty)) add(a.timestep, a.victim, true, a.victim_tensor);
    if (a.is(CacheAccess::fetched)) add(a.timestep, a.address, false, a.tensor);
    if (a.is(CacheAccess::through)) add(a.timestep, a.address, true, a.tensor);
  }
}

struct CacheModel::Impl {
  CacheConfig config;
  unsigned shift = 6;
  // Counted per key (a trace, or after the traces a tensor, for what no trace makes):
  // one set of counters per access; report() sums the keys of each tensor.
  struct Tally {
    std::uint64_t accesses = 0, hits = 0, cold = 0, capacity = 0, write_throughs = 0;
  };
  std::vector<Tally> keys;
  std::vector<std::uint32_t> key_tensor;     // per key
  std::vector<std::uint64_t> writebacks;     // per tensor (of the evicted line)
  std::size_t n_traces = 0;
  SeenLines seen;
  Ordered shadow;  // fully associative LRU of the same lines, for the three Cs
  Ordered ordered;  // the cache itself when fully associative LRU or FIFO
  SetAssociative<CachePolicy::lru> lru;
  SetAssociative<CachePolicy::fifo> fifo;
  SetAssociative<CachePolicy::plru> plru;
  bool finished = false;

  template <class Engine>
  void run(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>& out);
};

template <class Engine>
void CacheModel::Impl::run(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>& out) {
  const bool wt = !config.write_back, wa = config.write_allocate, classify = config.three_cs;
  const std::size_t first = out.size();
  out.resize(first + in.size());
  CacheAccess* o = out.data() + first;
  for (const LineAccess& a : in) {
    // Written in place, field by field: a record built aside and copied stalled on
    // store forwarding (three quarters of the time).
    CacheAccess& r = *o++;
    r.timestep = a.timestep, r.address = a.line << shift, r.victim = 0;
    r.trace = a.trace, r.tensor = a.tensor, r.victim_tensor = 0;
    std::uint8_t flags = a.write ? CacheAccess::write : 0;
    const bool allocate = !a.write || wa;
    bool cold = false, capacity = false;
    if (classify) {
      cold = !seen.test_and_set(a.line);
      const std::int64_t s = shadow.lookup(a.line);
      if (s >= 0) shadow.hit(s);
      else if (allocate) shadow.fill(a.line, false, 0);
      capacity = s < 0 && !cold;
    }
    const std::int64_t id = engine.lookup(a.line);
    if (id >= 0) {
      engine.hit(id);
      flags |= CacheAccess::hit;
      if (a.write && !wt) engine.dirty(id) = 1;
    } else if (allocate) {
      const Victim v = engine.fill(a.line, a.write && !wt, a.tensor);
      flags |= CacheAccess::fetched;
      if (v.valid) {
        flags |= CacheAccess::evicted, r.victim = v.line << shift, r.victim_tensor = v.tensor;
        if (v.dirty) flags |= CacheAccess::dirty, ++writebacks[v.tensor];
      }
    }
    if (a.write && (wt || !allocate)) flags |= CacheAccess::through;
    r.flags = flags;
    const std::size_t key = a.trace != kNoTrace ? a.trace : n_traces + a.tensor;
    key_tensor[key] = a.tensor;
    Tally& c = keys[key];
    c.accesses++, c.hits += id >= 0, c.cold += cold, c.capacity += capacity, c.write_throughs += a.write && wt;
  }
}

CacheModel::CacheModel(const CacheConfig& config, std::size_t n_tensors, std::size_t n_traces) : impl_(new Impl) {
  check_cache_config(config);
  Impl& m = *impl_;
  m.config = config;
  m.shift = unsigned(std::countr_zero(config.line_bytes));
  m.n_traces = n_traces;
  m.keys.resize(n_traces + n_tensors);
  m.key_tensor.assign(n_traces + n_tensors, 0);
  m.writebacks.assign(n_tensors, 0);
  if (config.three_cs) m.shadow.init(config.lines(), true);
  const bool full = config.sets() == 1;
  if (full && config.policy != CachePolicy::plru) m.ordered.init(config.lines(), config.policy == CachePolicy::lru);
  else if (config.policy == CachePolicy::lru) m.lru.init(config.sets(), config.associativity());
  else if (config.policy == CachePolicy::fifo) m.fifo.init(config.sets(), config.associativity());
  else m.plru.init(config.sets(), config.associativity());
}

CacheModel::CacheModel(CacheModel&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
CacheModel& CacheModel::operator=(CacheModel&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}
CacheModel::~CacheModel() { delete impl_; }

const CacheConfig& CacheModel::config() const { return impl_->config; }

void CacheModel::run(std::span<const LineAccess> in, std::vector<CacheAccess>& out) {
  Impl& m = *impl_;
  if (m.config.sets() == 1 && m.config.policy != CachePolicy::plru) return m.run(m.ordered, in, out);
  switch (m.config.policy) {
    case CachePolicy::lru: return m.run(m.lru, in, out);
    case CachePolicy::fifo: return m.run(m.fifo, in, out);
    case CachePolicy::plru: return m.run(m.plru, in, out);
  }
}

void CacheModel::finish() {
  Impl& m = *impl_;
  if (m.finished) return;
  m.finished = true;
  const auto count = [&](std::uint32_t tensor) { ++m.writebacks[tensor]; };
  if (m.config.sets() == 1 && m.config.policy != CachePolicy::plru) m.ordered.each_dirty(count);
  else if (m.config.policy == CachePolicy::lru) m.lru.each_dirty(count);
  else if (m.config.policy == CachePolicy::fifo) m.fifo.each_dirty(count);
  else m.plru.each_dirty(count);
}

CacheReport CacheModel::report() const {
  const Impl& m = *impl_;
  CacheReport r;
  r.config = m.config;
  r.tensors.resize(m.writebacks.size());
  r.traces.resize(m.n_traces);
  for (std::size_t k = 0; k < m.keys.size(); ++k) {
    const Impl::Tally& t = m.keys[k];
    CacheCounts c;
    c.accesses = t.accesses, c.hits = t.hits, c.misses = t.accesses - t.hits, c.cold = t.cold;
    c.capacity = t.capacity, c.write_throughs = t.write_throughs;
    if (k < m.n_traces) r.traces[k] = c;
    if (t.accesses) r.tensors[m.key_tensor[k]] += c;
  }
  for (std::size_t t = 0; t < m.writebacks.size(); ++t) r.tensors[t].writebacks = m.writebacks[t];
  for (const CacheCounts& c : r.tensors) r.total += c;
  return r;
}

}  // namespace looptrace
