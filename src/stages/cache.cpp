#include "looptrace/stages/cache.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "looptrace/support/error.hpp"
#include "stages/seen_lines.hpp"

namespace looptrace {

namespace {

constexpr std::uint64_t kNoLine = ~std::uint64_t(0);  // an empty way (no address / B is this)

std::string bytes_text(std::uint64_t b) { return std::to_string(b) + " bytes"; }

// What a fill pushed out.
struct Victim {
  bool valid = false, dirty = false;
  std::uint64_t line = 0;
  std::uint32_t tensor = 0;
  std::uint32_t stamp = 0;  // KeyedSets: the line's last use (StampShadow)
};

// line -> value, open addressing with backward-shift deletion; sized once (for at most
// `entries` lines at a time: a cache's lines), so it never grows. A line and its value
// share an entry: a probe is one miss of the CPU's caches, not two. The hash of Ordered
// (value: its slot), of LruShadow (the last use) and of StampShadow's lines aside.
template <class Value>
class LineMap {
 public:
  static constexpr std::uint32_t npos = ~std::uint32_t(0);
  void init(std::size_t entries) {
    const std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, 2 * entries));
    e_.assign(cap, Entry{});
    mask_ = cap - 1, shift_ = unsigned(64 - std::countr_zero(cap));
  }
  // Its entry, or npos.
  std::uint32_t find(std::uint64_t line) const {
    for (std::size_t i = home(line);; i = (i + 1) & mask_) {
      if (e_[i].line == line) return std::uint32_t(i);
      if (e_[i].line == kNoLine) return npos;
    }
  }
  std::uint64_t line(std::uint32_t i) const { return e_[i].line; }
  Value& value(std::uint32_t i) { return e_[i].value; }
  Value value(std::uint32_t i) const { return e_[i].value; }
  // Where `line` (not present) went.
  std::uint32_t insert(std::uint64_t line, Value value) {
    std::size_t i = home(line);
    while (e_[i].line != kNoLine) i = (i + 1) & mask_;
    e_[i].line = line, e_[i].value = value;
    return std::uint32_t(i);
  }
  // Empties entry i, pulling back every later entry of the run whose home is not
  // between the hole and it: moved(its value, its new entry) for each.
  template <class Moved>
  void erase_at(std::uint32_t at, Moved moved) {
    std::size_t i = at;
    e_[i].line = kNoLine;
    for (std::size_t j = (i + 1) & mask_; e_[j].line != kNoLine; j = (j + 1) & mask_) {
      const std::size_t h = home(e_[j].line);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      e_[i] = e_[j], e_[j].line = kNoLine;
      moved(e_[i].value, std::uint32_t(i));
      i = j;
    }
  }
  void erase_at(std::uint32_t at) {
    erase_at(at, [](Value, std::uint32_t) {});
  }
  // Empties entry i without pulling any back: only while emptying every entry.
  void vacate(std::uint32_t i) { e_[i].line = kNoLine; }
  // fn(entry, line, value) for every line held (value by reference where not const).
  template <class Fn>
  void each(Fn fn) {
    for (std::size_t i = 0; i < e_.size(); ++i)
      if (e_[i].line != kNoLine) fn(std::uint32_t(i), e_[i].line, e_[i].value);
  }
  template <class Fn>
  void each(Fn fn) const {
    for (std::size_t i = 0; i < e_.size(); ++i)
      if (e_[i].line != kNoLine) fn(std::uint32_t(i), e_[i].line, Value(e_[i].value));
  }

 private:
  struct Entry {
    std::uint64_t line = kNoLine;
    Value value{};
  };
  std::size_t home(std::uint64_t line) const { return std::size_t((line * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<Entry> e_;
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
  std::int64_t lookup(std::uint64_t line) const {
    const std::uint32_t i = index_.find(line);
    return i == LineMap<std::uint32_t>::npos ? -1 : std::int64_t(index_.value(i));
  }
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
      index_.erase_at(index_.find(line_[std::size_t(s)]));
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
  // Its lines newest first (one set of n_ ways).
  void snapshot(CacheSnapshot& out) const {
    out.lines.assign(n_, kNoLine), out.dirty.assign(n_, 0), out.owner.assign(n_, 0);
    std::size_t k = 0;
    for (std::int32_t s = head_; s >= 0; s = next_[std::size_t(s)], ++k) {
      out.lines[k] = line_[std::size_t(s)], out.dirty[k] = dirty_[std::size_t(s)], out.owner[k] = owner_[std::size_t(s)];
    }
  }
  // Holds the lines of `s` (a snapshot of it), each moved to by(l, its owner), in their
  // order.
  template <class Shift>
  void restore(const CacheSnapshot& s, Shift&& by) {
    index_.init(n_);
    used_ = 0, head_ = tail_ = -1;
    for (std::size_t k = s.lines.size(); k-- > 0;)
      if (s.lines[k] != kNoLine) fill(by(s.lines[k], s.owner[k]), s.dirty[k] != 0, s.owner[k]);
  }
  // Every line l moved to by(l, its owner); the order is kept.
  template <class Shift>
  void shift(Shift&& by) {
    index_.init(n_);
    for (std::size_t s = 0; s < used_; ++s) {
      line_[s] = by(line_[s], owner_[s]);
      index_.insert(line_[s], std::uint32_t(s));
    }
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
  LineMap<std::uint32_t> index_;  // line -> its slot
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
        for (unsigned m = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi16(have, want))); m != 0; m &= m - 1, m &= m - 1) {
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

// What SmallSets and PlruSets share, data-oriented: per set one 128-byte block (`Meta`:
// its ways' 32-bit keys in the first 64 bytes, compared sixteen at a time, then the
// policy's state and the dirty bytes), and beside it per way its tag, owner and stamp
// (the line's last use as the three Cs' shadow counts time: StampShadow). A hit reads
// the block alone, its two lines at once; a way's id is set * ways + way.
template <class Meta>
class KeyedSets {
 public:
  // Whether way `id` (of `set`, the line's) holds `line`; if so, as lookup() found it
  // there (hit() and dirty() then act on it), with no other read. (Plain C++: the
  // replays call it on every target.)
  [[gnu::always_inline]] bool holds_at(std::uint64_t line, std::int64_t id, std::size_t set) {
    if (tag_[std::size_t(id)] != line) return false;
    set_ = set;
    return true;
  }
#if defined(__SSE2__)
  // lookup() where the way `id` may hold the line (the way a record saw it in): one tag
  // read where it does, not the set's keys.
  [[gnu::always_inline]] std::int64_t lookup_at(std::uint64_t line, std::int64_t id) {
    if (id >= 0 && tag_[std::size_t(id)] == line) {
      set_ = set_of(line);
      return id;
    }
    return lookup(line);
  }
  [[gnu::always_inline]] std::int64_t lookup(std::uint64_t line) {
    set_ = set_of(line);
    const __m128i* k = reinterpret_cast<const __m128i*>(meta_[set_].key);
    const std::uint32_t want = key_of(line);
    const __m128i w = _mm_set1_epi32(int(want));
    const __m128i lo = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(k), w), _mm_cmpeq_epi32(_mm_load_si128(k + 1), w));
    const __m128i hi = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(k + 2), w), _mm_cmpeq_epi32(_mm_load_si128(k + 3), w));
    // bit w: way w's key is the line's (the lanes past the ways masked: kNoLine's key is theirs)
    unsigned bits = unsigned(_mm_movemask_epi8(_mm_packs_epi16(lo, hi))) & lane_bits_;
    const std::size_t base = set_ * ways_;
    if (want != kFarKey) [[likely]]  // the key is the line
      return bits != 0 ? std::int64_t(base + unsigned(__builtin_ctz(bits))) : -1;
    for (const std::uint64_t* t = tag_.data() + base; bits != 0; bits &= bits - 1) {
      const std::size_t way = unsigned(__builtin_ctz(bits));
      if (t[way] == line) return std::int64_t(base + way);
    }
    return -1;
  }
#else
  std::int64_t lookup(std::uint64_t) { return -1; }
#endif
  // After lookup(), in the same set.
  std::uint8_t& dirty(std::int64_t id) { return meta_[set_].dirty[std::size_t(id) - set_ * ways_]; }
  // A set's state kept aside as bytes (Replays' snapshots: its block and its ways'
  // owners), and whether a copy kept aside is the set as it is now, way for way: the
  // same keys (and none of a far line, whose tag the block does not hold), the policy's
  // state, the dirty bytes and the owners (a line two tensors share is written back
  // as the one that brought it in).
  static constexpr std::size_t kBlockBytes = sizeof(Meta) + 16 * sizeof(std::uint32_t);
  void keep_block(std::size_t set, unsigned char* out) const {
    std::memcpy(out, static_cast<const void*>(&meta_[set]), sizeof(Meta));
    std::memcpy(out + sizeof(Meta), owner_.data() + set * ways_, ways_ * sizeof(std::uint32_t));
  }
  bool is_block(std::size_t set, const unsigned char* kept) const {
    Meta was;
    std::memcpy(static_cast<void*>(&was), kept, sizeof(Meta));
    const Meta& now = meta_[set];
    for (std::size_t w = 0; w < ways_; ++w)
      if (now.key[w] == kFarKey) return false;
    return now.same(was) &&
           std::memcmp(kept + sizeof(Meta), owner_.data() + set * ways_, ways_ * sizeof(std::uint32_t)) == 0;
  }
  std::size_t set_of_line(std::uint64_t line) const { return set_of(line); }
  // The way the last fill put its line in.
  std::int64_t filled() const { return filled_; }
  std::uint32_t& stamp(std::int64_t id) { return stamp_[std::size_t(id)]; }
  template <class Fn>
  void each_dirty(Fn fn) const {
    for (std::size_t i = 0; i < tag_.size(); ++i)
      if (tag_[i] != kNoLine && meta_[i / ways_].dirty[i % ways_]) fn(owner_[i]);
  }
  // fn(line, stamp) for every line held.
  template <class Fn>
  void each_stamp(Fn fn) {
    for (std::size_t i = 0; i < tag_.size(); ++i)
      if (tag_[i] != kNoLine) fn(tag_[i], stamp_[i]);
  }
  template <class Fn>
  void each_stamp(Fn fn) const {
    for (std::size_t i = 0; i < tag_.size(); ++i)
      if (tag_[i] != kNoLine) fn(tag_[i], std::uint32_t(stamp_[i]));
  }

 protected:
  void init_sets(std::uint64_t sets, std::uint64_t ways) {
    sets_ = sets, ways_ = ways;
    pow2_ = std::has_single_bit(sets), mask_ = sets - 1;
    meta_.assign(sets, Meta{});
    for (Meta& m : meta_) std::fill(std::begin(m.key), std::end(m.key), kEmptyKey);
    tag_.assign(sets * ways, kNoLine), owner_.assign(sets * ways, 0), stamp_.assign(sets * ways, 0);
    lane_bits_ = ways >= 16 ? 0xFFFFu : (1u << ways) - 1;
  }
  std::size_t set_of(std::uint64_t line) const { return std::size_t(pow2_ ? line & mask_ : line % sets_); }
  // Way `way` of the last lookup's set now holds `line`; what it held, if anything.
  // Without a stamp (the shadow is not on the stamps) the stamps are neither read nor
  // written: a stream's fills would wait on them.
  [[gnu::always_inline]] Victim replace(std::size_t way, bool full, std::uint64_t line, bool dirty, std::uint32_t tensor,
                 std::optional<std::uint32_t> stamp) {
    Meta& m = meta_[set_];
    const std::size_t id = set_ * ways_ + way;
    Victim v;
    if (full) v = {true, m.dirty[way] != 0, tag_[id], owner_[id], stamp ? stamp_[id] : 0};
    tag_[id] = line, owner_[id] = tensor, filled_ = std::int64_t(id);
    if (stamp) stamp_[id] = *stamp;
    m.key[way] = key_of(line), m.dirty[way] = dirty;
    return v;
  }
  // A way's key, in its set's block: the line itself where it is below kFarKey, so a hit
  // is found in the block alone, with no load of the tag that depended on it (the tags
  // are read only for far lines, whose key is kFarKey); kEmptyKey where the way, or the
  // lane past the ways, holds nothing.
  static constexpr std::uint32_t kFarKey = 0xFFFFFFFEu, kEmptyKey = 0xFFFFFFFFu;
  static std::uint32_t key_of(std::uint64_t line) {
    return line < kFarKey ? std::uint32_t(line) : line == kNoLine ? kEmptyKey : kFarKey;
  }

  std::uint64_t sets_ = 1, ways_ = 1, mask_ = 0;
  bool pow2_ = true;
  unsigned lane_bits_ = 0;  // the ways' lanes, as 8-bit compares
  std::size_t set_ = 0;                    // the set of the last lookup
  std::int64_t filled_ = -1;               // the way of the last fill
  std::vector<Meta> meta_;
  std::vector<std::uint64_t> tag_;
  std::vector<std::uint32_t> owner_, stamp_;
};

struct alignas(64) AgeMeta {
  std::uint32_t key[16];  // KeyedSets::key_of
  std::int8_t age[16];
  std::uint8_t dirty[16];
  bool same(const AgeMeta& o) const {
    return std::memcmp(key, o.key, sizeof key) == 0 && std::memcmp(age, o.age, sizeof age) == 0 &&
           std::memcmp(dirty, o.dirty, sizeof dirty) == 0;
  }
};

// A set-associative LRU or FIFO cache of at most 16 ways (KeyedSets; the ways padded
// to 16 lanes). An age is a way's rank in recency (LRU: last use; FIFO: fill), 0 the
// newest; an empty way's age is kEmpty, so the lowest empty way is the lowest lane of
// that age, and the victim of a full set the lane of age ways - 1. A hit or fill at a
// way of age a ages every way younger than a by one and makes it 0: one compare, one
// subtract and one mask over the 16 lanes, in registers. Which way holds a line is not
// observable under LRU or FIFO, so this is the stamp engine's cache, access for access.
template <CachePolicy P>
class SmallSets : public KeyedSets<AgeMeta> {
 public:
  static constexpr std::int8_t kEmpty = 127;
  static bool fits(std::uint64_t ways) {
#if defined(__SSE2__)
    return ways <= 16;
#else
    (void)ways;
    return false;
#endif
  }
  void init(std::uint64_t sets, std::uint64_t ways) {
    init_sets(sets, ways);
    for (AgeMeta& m : meta_) {
      std::fill(std::begin(m.age), std::end(m.age), kEmpty);
      std::fill(std::begin(m.dirty), std::end(m.dirty), std::uint8_t(0));
    }
  }
#if defined(__SSE2__)
  // After lookup(), in the same set.
  void hit(std::int64_t id) {
    if constexpr (P == CachePolicy::lru) make_newest(std::size_t(id) - set_ * ways_);
  }
  [[gnu::always_inline]] Victim fill(std::uint64_t line, bool dirty, std::uint32_t tensor, std::optional<std::uint32_t> stamp = std::nullopt) {
    const __m128i age = _mm_load_si128(reinterpret_cast<const __m128i*>(meta_[set_].age));
    const unsigned empty = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(age, _mm_set1_epi8(kEmpty)))) & lane_bits_;
    const std::size_t way = empty != 0 ? unsigned(__builtin_ctz(empty))
                                       : unsigned(__builtin_ctz(unsigned(_mm_movemask_epi8(
                                             _mm_cmpeq_epi8(age, _mm_set1_epi8(char(ways_ - 1)))))));
    const Victim v = replace(way, empty == 0, line, dirty, tensor, stamp);
    make_newest(way);
    return v;
  }
#else
  void hit(std::int64_t) {}
  Victim fill(std::uint64_t, bool, std::uint32_t, std::optional<std::uint32_t> = std::nullopt) { return {}; }
#endif
  // The age of way `id` (0 the newest).
  std::uint64_t age(std::int64_t id) const { return std::uint64_t(meta_[std::size_t(id) / ways_].age[std::size_t(id) % ways_]); }
  // Per set, its lines newest first: a way's place is its age (which way holds a line
  // is not observable).
  void snapshot(CacheSnapshot& out) const {
    out.lines.assign(sets_ * ways_, kNoLine), out.dirty.assign(sets_ * ways_, 0), out.owner.assign(sets_ * ways_, 0);
    for (std::size_t set = 0; set < sets_; ++set)
      for (std::size_t w = 0; w < ways_; ++w) {
        const std::int8_t age = meta_[set].age[w];
        if (age == kEmpty) continue;
        const std::size_t k = set * ways_ + std::size_t(age);
        out.lines[k] = tag_[set * ways_ + w], out.dirty[k] = meta_[set].dirty[w], out.owner[k] = owner_[set * ways_ + w];
      }
  }
  // Whether a line set `set` holds is one `pred` takes.
  template <class Pred>
  bool holds_any(std::size_t set, Pred pred) const {
    for (std::size_t w = 0; w < ways_; ++w)
      if (meta_[set].age[w] != kEmpty && pred(tag_[set * ways_ + w])) return true;
    return false;
  }
  // Set `set` emptied, its dirty lines written back (counted per tensor).
  void empty_set(std::size_t set, std::vector<std::uint64_t>& writebacks) {
    AgeMeta& m = meta_[set];
    for (std::size_t w = 0; w < ways_; ++w) {
      const std::size_t i = set * ways_ + w;
      if (m.age[w] != kEmpty && m.dirty[w]) ++writebacks[owner_[i]];
      tag_[i] = kNoLine, m.age[w] = kEmpty, m.dirty[w] = 0, m.key[w] = kEmptyKey;
    }
  }
  // Way `way` of set `set` holds `line` at age `way` (the caller fills an emptied set's
  // ways 0, 1, ... newest first).
  void place(std::size_t set, std::size_t way, std::uint64_t line, bool dirty, std::uint32_t tensor) {
    AgeMeta& m = meta_[set];
    const std::size_t id = set * ways_ + way;
    tag_[id] = line, owner_[id] = tensor;
    m.key[way] = key_of(line), m.dirty[way] = dirty, m.age[way] = std::int8_t(way);
  }
  // `line` (not held) comes in as a miss does; what it evicts is not said.
  void put(std::uint64_t line, bool dirty, std::uint32_t tensor) {
    set_ = set_of(line);
    fill(line, dirty, tensor);
  }
  // Holds the lines of `s` (a snapshot of it), each moved to by(l, its owner) in its
  // set, at its place; stamps are left to the shadow (shadow_assign).
  template <class Shift>
  void restore(const CacheSnapshot& s, Shift&& by) {
    for (std::size_t set = 0; set < sets_; ++set) {
      AgeMeta& m = meta_[set];
      for (std::size_t w = 0; w < ways_; ++w)
        tag_[set * ways_ + w] = kNoLine, m.age[w] = kEmpty, m.dirty[w] = 0, m.key[w] = kEmptyKey;
      for (std::size_t k = ways_; k-- > 0;) {  // oldest first: each fill is the newest
        const std::size_t i = set * ways_ + k;
        if (s.lines[i] != kNoLine) put(by(s.lines[i], s.owner[i]), s.dirty[i] != 0, s.owner[i]);
      }
    }
  }
  // Every line l moved to by(l, its owner), in its set: it stays in its way, at its age.
  template <class Shift>
  void shift(Shift&& by) {
    for (std::size_t i = 0; i < tag_.size(); ++i) {
      if (tag_[i] == kNoLine) continue;
      tag_[i] = by(tag_[i], owner_[i]);
      meta_[i / ways_].key[i % ways_] = key_of(tag_[i]);
    }
  }

 private:
#if defined(__SSE2__)
  // Ages every way younger than `way` by one, and `way` to 0.
  void make_newest(std::size_t way) {
    AgeMeta& m = meta_[set_];
    __m128i* p = reinterpret_cast<__m128i*>(m.age);
    const __m128i age = _mm_load_si128(p);
    const __m128i younger = _mm_cmplt_epi8(age, _mm_set1_epi8(m.age[way]));
    const __m128i lane = _mm_cmpeq_epi8(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm_set1_epi8(char(way)));
    _mm_store_si128(p, _mm_andnot_si128(lane, _mm_sub_epi8(age, younger)));
  }
#endif
};

struct alignas(64) TreeMeta {
  std::uint32_t key[16];  // KeyedSets::key_of
  std::uint8_t dirty[16];
  std::uint16_t tree = 0;    // bit n: node n points right
  std::uint16_t filled = 0;  // bit w: way w holds a line
  bool same(const TreeMeta& o) const {
    return std::memcmp(key, o.key, sizeof key) == 0 && std::memcmp(dirty, o.dirty, sizeof dirty) == 0 &&
           tree == o.tree && filled == o.filled;
  }
};

// A set-associative tree-PLRU cache of 1 to 16 ways (a power of two), KeyedSets with
// its tree as the bits of a word in each set's block (node n in heap order, its children
// 2n + 1 and 2n + 2; a set bit points right) and which ways are filled. A hit or fill
// points every node on its way's path away from it: one and-or with that way's masks,
// made once. A miss fills the lowest empty way, else the way the tree's nodes lead to
// (log2(ways) steps). The tree is the generic engine's, node for node, so this is the
// same cache, way for way.
class PlruSets : public KeyedSets<TreeMeta> {
 public:
  static bool fits(std::uint64_t ways) {
#if defined(__SSE2__)
    return ways <= 16 && std::has_single_bit(ways);
#else
    (void)ways;
    return false;
#endif
  }
  void init(std::uint64_t sets, std::uint64_t ways) {
    init_sets(sets, ways);
    way_shift_ = unsigned(std::countr_zero(ways));
    for (std::size_t w = 0; w < ways; ++w) {
      std::uint16_t path = 0, away = 0;
      std::size_t node = 0, lo = 0, hi = ways;
      while (hi - lo > 1) {
        const std::size_t mid = (lo + hi) / 2;
        path |= std::uint16_t(1u << node);
        if (w < mid) away |= std::uint16_t(1u << node), node = 2 * node + 1, hi = mid;
        else node = 2 * node + 2, lo = mid;
      }
      path_[w] = path, away_[w] = away;
    }
  }
  // After lookup(), in the same set.
  void hit(std::int64_t id) { touch(meta_[set_], std::size_t(id) & (ways_ - 1)); }
  [[gnu::always_inline]] Victim fill(std::uint64_t line, bool dirty, std::uint32_t tensor, std::optional<std::uint32_t> stamp = std::nullopt) {
    TreeMeta& m = meta_[set_];
    const unsigned empty = ~unsigned(m.filled) & lane_bits_;
    std::size_t way;
    if (empty != 0) {
      way = unsigned(__builtin_ctz(empty));
    } else {
      std::size_t node = 0;
      for (unsigned level = 0; level < way_shift_; ++level) node = 2 * node + 1 + ((m.tree >> node) & 1u);
      way = node - (ways_ - 1);
    }
    const Victim v = replace(way, empty == 0, line, dirty, tensor, stamp);
    m.filled = std::uint16_t(m.filled | (1u << way));
    touch(m, way);
    return v;
  }

 private:
  void touch(TreeMeta& m, std::size_t way) { m.tree = std::uint16_t((m.tree & ~path_[way]) | away_[way]); }

  unsigned way_shift_ = 1;
  std::uint16_t path_[16] = {}, away_[16] = {};  // per way: its path's nodes, and the values pointing away
};

// A fully associative LRU cache of N lines that only says hit or miss (the three Cs'
// shadow): a bit per resident line, the resident lines in a hash index to their
// last-use time, and a ring over time holding at each time the line used then if that
// is still its last use. The least recent line is the oldest live time (a tail that
// only moves forward). A miss is known from the bits: the line waits in the ring
// (`pending_`), not the hash, until a line found resident is not in the hash (one of
// them: all go in), so a stream's misses never touch the hash and a capacity stream
// costs a bit, a ring write and the eviction's bit. A hit costs the bit, the index
// probe and two ring writes, where a linked list touched the line, its neighbours and
// the head; the ring is compacted (live times renumbered) when it fills, O(N) per 3N
// accesses at least. The hash and ring follow N; the bits follow the lines ever
// resident, as the cold bitmap does (LineBits).
class LruShadow {
 public:
  void init(std::size_t lines) {
    n_ = lines;
    slots_.init(2 * lines);  // (a quarter full at most: shorter probes and pull-backs)
    ring_.assign(std::bit_ceil(std::max<std::size_t>(64, 4 * lines)), kDead);
    pending_.assign(ring_.size(), kNoLine);
    ring_mask_ = ring_.size() - 1;
    now_ = tail_ = flushed_ = used_ = 0;
  }
  // Whether `line` is resident; then (or, on a miss, if `allocate`) it becomes the newest.
  // `absent`: the caller knows it is neither resident nor pinned (never seen, or tested).
  [[gnu::always_inline]] bool access(std::uint64_t line, bool allocate, bool absent = false) {
    if (!absent && resident_.test(line)) return hit(line);
    if (!pinned_lines_.empty() && !absent && is_pinned(line)) return ++pinned_hits, true;
    if (!allocate) return false;
    make_room();
    ring_[now_ & ring_mask_] = kPending, pending_[now_ & ring_mask_] = line;
    resident_.set(line);
    ++now_;
    if (now_ - tail_ > ring_mask_) compact();
    return false;
  }
  // access() of a line that may never have been seen: `cold` says so, read from `seen`
  // (and marked there) only where the shadow does not hold the line, since every line it
  // holds was seen as it came in (Mixtral 8x22B's weights, conflict misses the shadow
  // holds: the seen bitmap's page and word cost 13 instructions an access).
  template <class Seen>
  [[gnu::always_inline]] bool access_seen(std::uint64_t line, bool allocate, Seen& seen, bool& cold) {
    cold = false;
    // Pinned first: where there are pins, most accesses are theirs (Mixtral 8x22B's
    // weight tiles: one bitmap's page and word, not two).
    if (!pinned_lines_.empty() && is_pinned(line)) return ++pinned_hits, true;
    if (resident_.test(line)) return hit(line);
    cold = !seen.test_and_set(line);
    return access(line, allocate, true);
  }
  // Whether any of the lines first .. last is resident, changing nothing (not pinned).
  bool holds_any(std::uint64_t first, std::uint64_t last) const { return resident_.any(first, last); }
  // Pins: lines the caller knows stay resident (each among the N most recent, as Replays
  // checks), taken out of the ring and the hash, which hold the other lines in N less
  // their number: the other lines' order is kept, and so is which of them a full LRU of N
  // would hold. An access of a pinned line is a hit that changes nothing. `lines`:
  // distinct and resident.
  void pin(const std::vector<std::uint64_t>& lines) {
    // Each taken out where it is (its time dead, its entry erased): O(pins), where
    // re-making the ring and the hash cost O(N) twice a pin (Mixtral 8x22B's weight
    // tiles are pinned anew every 128 timesteps).
    flush();  // (every resident line in the hash)
    for (const std::uint64_t l : lines) {
      const std::uint32_t i = resident_.test(l) ? slots_.find(l) : LineMap<std::uint64_t>::npos;
      if (i == LineMap<std::uint64_t>::npos)
        throw std::logic_error("cache: a line pinned in the three Cs' shadow is not resident");
      ring_[slots_.value(i) & ring_mask_] = kDead;
      slots_.erase_at(i, [&](std::uint64_t time, std::uint32_t j) { ring_[time & ring_mask_] = j; });
      resident_.clear(l), pinned_.set(l);
    }
    pinned_lines_ = lines, n_ -= lines.size(), used_ -= lines.size();
    // Their flat bitmap, where their lines span few enough (a weight tile's rows: Mixtral
    // 8x22B's 512 lines span 2^16).
    const auto [lo, hi] = std::minmax_element(lines.begin(), lines.end());
    if (!lines.empty() && *hi - *lo < kFlatPinSpan) {
      pin_lo_ = *lo, pin_span_ = *hi - *lo + 1;
      if (pin_flat_.size() < (pin_span_ + 63) / 64) pin_flat_.resize((pin_span_ + 63) / 64, 0);
      for (const std::uint64_t l : lines) pin_flat_[(l - pin_lo_) >> 6] |= std::uint64_t(1) << ((l - pin_lo_) & 63);
    }
  }
  bool pinned() const { return !pinned_lines_.empty(); }
  std::size_t pins() const { return pinned_lines_.size(); }
  std::uint64_t pinned_hits = 0;  // accesses of a pinned line (a diagnostic)
  // The pins released: `recent` are the lines whose last uses are the latest, least
  // recent first (every pinned line among them): those resident or pinned become the
  // newest in that order, the other resident lines keep theirs. O(recent).
  void unpin(const std::vector<std::uint64_t>& recent) {
    flush();
    n_ += pinned_lines_.size();
    std::size_t back = 0;
    for (const std::uint64_t l : recent) {
      std::uint32_t i;
      if (pinned_.test(l)) {
        pinned_.clear(l), resident_.set(l), ++used_, ++back;
        i = slots_.insert(l, now_);
      } else if (resident_.test(l)) {
        i = slots_.find(l);
        ring_[slots_.value(i) & ring_mask_] = kDead;
        slots_.value(i) = now_;
      } else {
        continue;
      }
      ring_[now_ & ring_mask_] = i, ++now_;
      if (now_ - tail_ > ring_mask_) compact();
    }
    if (back != pinned_lines_.size()) throw std::logic_error("cache: a pinned line of the three Cs' shadow went unused");
    if (pin_span_ != 0)
      for (const std::uint64_t l : pinned_lines_) pin_flat_[(l - pin_lo_) >> 6] = 0;  // O(pins), not O(span)
    pin_span_ = 0;
    pinned_lines_.clear();
  }
  // The resident lines (not the pinned ones), least recent first.
  void lines(std::vector<std::uint64_t>& out) const {
    out.clear();
    for (std::uint64_t t = tail_; t < now_; ++t) {
      const std::uint64_t cell = ring_[t & ring_mask_];
      if (cell == kPending) out.push_back(pending_[t & ring_mask_]);
      else if (cell != kDead) out.push_back(slots_.line(std::uint32_t(cell)));
    }
  }
  // Holds exactly `lines` (distinct), least recent first. Emptied cell by cell (the
  // live times only), not re-made: a streak's settle() assigns it, and the ring and
  // hash are several times the lines.
  void assign(const std::vector<std::uint64_t>& lines) {
    for (std::uint64_t t = tail_; t < now_; ++t) {
      std::uint64_t& cell = ring_[t & ring_mask_];
      if (cell == kPending) resident_.clear(pending_[t & ring_mask_]);
      else if (cell != kDead) resident_.clear(slots_.line(std::uint32_t(cell))), slots_.vacate(std::uint32_t(cell));
      cell = kDead;  // (every cell outside the live times is dead)
    }
    // Then the last N of `lines` pending at times 0, 1, ... (no room to make, no compaction).
    const std::size_t skip = lines.size() > n_ ? lines.size() - n_ : 0;
    for (std::size_t t = 0; t + skip < lines.size(); ++t)
      ring_[t] = kPending, pending_[t] = lines[t + skip], resident_.set(lines[t + skip]);
    now_ = used_ = lines.size() - skip, tail_ = flushed_ = 0;
  }

 private:
  static constexpr std::uint64_t kDead = ~std::uint64_t(0);  // a ring cell whose time is no line's last use
  static constexpr std::uint64_t kPending = kDead - 1;       // ... whose line is in pending_
  // `line` is resident: it becomes the newest.
  bool hit(std::uint64_t line) {
    std::uint32_t i = slots_.find(line);
    if (i == LineMap<std::uint64_t>::npos) flush(), i = slots_.find(line);  // it is pending
    ring_[slots_.value(i) & ring_mask_] = kDead;
    ring_[now_ & ring_mask_] = i;
    slots_.value(i) = now_++;
    if (now_ - tail_ > ring_mask_) compact();
    return true;
  }
  // The pending lines still resident into the hash.
  void flush() {
    for (std::uint64_t t = std::max(flushed_, tail_); t < now_; ++t)
      if (ring_[t & ring_mask_] == kPending) ring_[t & ring_mask_] = slots_.insert(pending_[t & ring_mask_], t);
    flushed_ = now_;
  }
  // Past N lines, the least recent goes (a pending one only leaves the ring).
  void make_room() {
    if (used_ < n_) {
      ++used_;
      return;
    }
    while (ring_[tail_ & ring_mask_] == kDead) ++tail_;
    const std::uint64_t victim = ring_[tail_ & ring_mask_];  // its slot: no search
    ring_[tail_ & ring_mask_] = kDead;
    if (victim == kPending) {
      resident_.clear(pending_[tail_ & ring_mask_]);
    } else {
      resident_.clear(slots_.line(std::uint32_t(victim)));
      slots_.erase_at(std::uint32_t(victim), [&](std::uint64_t time, std::uint32_t i) { ring_[time & ring_mask_] = i; });
    }
    ++tail_;
  }
  // The live times from the tail on, renumbered without gaps (their order kept; a
  // pending line moves with its time).
  void compact() {
    std::uint64_t k = tail_;
    for (std::uint64_t t = tail_; t < now_; ++t) {
      const std::uint64_t slot = ring_[t & ring_mask_];
      if (slot == kDead) continue;
      ring_[t & ring_mask_] = kDead;
      ring_[k & ring_mask_] = slot;
      if (slot == kPending) pending_[k & ring_mask_] = pending_[t & ring_mask_];
      else slots_.value(std::uint32_t(slot)) = k;
      ++k;
    }
    now_ = k, flushed_ = tail_;  // (flush() looks at every live time again)
  }

  std::size_t n_ = 0, used_ = 0;
  LineMap<std::uint64_t> slots_;        // line -> its last use (the resident lines not pending)
  LineBits resident_;                   // every resident line (not pinned)
  LineBits pinned_;                     // the pinned lines
  std::vector<std::uint64_t> pinned_lines_;
  // The pinned lines again, as bits of [pin_lo_, pin_lo_ + pin_span_) where that span is
  // under kFlatPinSpan lines (else pin_span_ is 0): a test is a subtraction and a bit,
  // where the pages of LineBits cost 17 instructions an access (Mixtral 8x22B's weight
  // lines, pinned, read at every timestep).
  static constexpr std::uint64_t kFlatPinSpan = std::uint64_t(1) << 22;  // (a bitmap of 512 KiB at most)
  std::uint64_t pin_lo_ = 0, pin_span_ = 0;
  std::vector<std::uint64_t> pin_flat_;
  [[gnu::always_inline]] bool is_pinned(std::uint64_t line) const {
    if (pin_span_ == 0) return pinned_.test(line);
    const std::uint64_t off = line - pin_lo_;
    return off < pin_span_ && (pin_flat_[off >> 6] >> (off & 63) & 1) != 0;
  }
  std::vector<std::uint64_t> ring_;     // per time (mod its size): the slot of the line last used then
  std::vector<std::uint64_t> pending_;  // per time whose cell is kPending: the line (not in the hash)
  std::size_t ring_mask_ = 0;
  std::uint64_t now_ = 0, tail_ = 0, flushed_ = 0;
};

// The three Cs' shadow (a fully associative LRU cache of N lines, hit or miss) for the
// engines that keep a stamp per way (KeyedSets). A line's last use is a time, kept
// in its way's stamp while the engine holds the line and in `aside_` while only the
// shadow does; a ring of bits, one per time, says which times are still some line's
// last use (live). The shadow holds the lines whose last use is one of the N latest
// live times: those at or after `tail_`. So a hit of the engine (most accesses) costs
// the stamp it has already found, one bit cleared and one set in a ring of 32N bits
// (in the CPU's second-level cache), where a shadow of its own costs a hash probe; `aside_`
// is probed only when the engine misses a line seen before. When a line comes into a
// full shadow, the tail moves past the next live time: the least recent line falls out
// (if it is aside, a second ring of bits says so, and a third holds its entry, so it
// leaves the hash at once: the hash holds no stale lines). Times are renumbered when
// the ring would wrap, O(N + ring / 64) per at least 31N accesses: with a ring of 8N,
// Llama 3 8B's feed-forward weights (hits, whose tail stays put) renumbered every 220
// timesteps, 7% of their instructions.
class StampShadow {
 public:
  void init(std::size_t lines) {
    n_ = lines, used_ = 0;
    const std::size_t ring = std::bit_ceil(std::max<std::size_t>(1024, 32 * lines));
    live_.assign(ring / 64, 0), aside_bits_.assign(ring / 64, 0), entry_.assign(ring, 0);
    ring_mask_ = ring - 1;
    tail_ = now_ = 1;  // 0: a stamp of no time (an empty way, or a line the shadow lost)
    aside_.init(2 * lines);  // (a quarter full at most: erase_at pulls back shorter runs)
  }
  // An access the engine hit, `stamp` its way's: whether the shadow held the line. It
  // is the newest now if it was held or `allocate`.
  [[gnu::always_inline]] bool hit(std::uint32_t& stamp, bool allocate) {
    if (stamp >= tail_) {
      flip(live_, stamp);
      stamp = next();
      return true;
    }
    if (allocate) admit(), stamp = next();  // else (a write that does not allocate) it stays out
    return false;
  }
  // An access the engine missed (`cold`: a line never seen): whether the shadow held
  // the line. If it holds it now (it did, or `allocate`), `stamp` is its last use, for
  // the way the engine fills (if `allocate`).
  [[gnu::always_inline]] bool miss(std::uint64_t line, bool cold, bool allocate, std::uint32_t& stamp) {
    if (!cold)
      if (const std::uint32_t i = aside_.find(line); i != LineMap<std::uint32_t>::npos) {
        const std::uint32_t was = aside_.value(i);
        flip(live_, was), flip(aside_bits_, was);
        stamp = next();
        if (allocate) aside_.erase_at(i, moved());
        else aside_.value(i) = stamp, set_aside(stamp, i);
        return true;
      }
    if (allocate) admit(), stamp = next();
    return false;
  }
  // The engine evicted `line`, whose stamp was `stamp`.
  [[gnu::always_inline]] void evicted(std::uint64_t line, std::uint32_t stamp) {
    if (stamp >= tail_) set_aside(stamp, aside_.insert(line, stamp));
  }
  // n accesses the engine hits, the k-th at the way id(k), each a line the shadow holds:
  // each becomes the newest in turn, as hit() n times would make it, with the times kept
  // in registers (hit() after hit() waits on the ring's word the last one wrote). False,
  // having changed nothing but the times' numbering, if one is not held or the ring has
  // no room for n more times.
  // `held`: they are known to be held (none is checked).
  template <class Engine, class Id>
  bool hit_all(Engine& engine, std::size_t n, Id id, bool held = false) {
    if (!held) {  // (after any renumbering: it moves the tail)
      if (!room(n)) compact(engine);
      if (!room(n)) return false;
      for (std::size_t k = 0; k < n; ++k)
        if (engine.stamp(id(k)) < tail_) return false;
    }
    return hit_while(engine, n, id, [](std::size_t) { return true; }).has_value();
  }
  // hit_all() over the accesses k = 0, 1, ... while go(k) holds, at most `most`, each of
  // a line known to be held (the caller's loop that finds how far the run goes is this
  // one: one pass, not one to find the run and one to stamp it). How many; none, having
  // changed nothing but the times' numbering, if the ring has no room for `most`.
  template <class Engine, class Id, class Go>
  [[gnu::always_inline]] std::optional<std::size_t> hit_while(Engine& engine, std::size_t most, Id id, Go go) {
    if (!room(most)) compact(engine);
    if (!room(most)) return std::nullopt;
    // The new times' bits after the old ones' are cleared; a line met twice clears the
    // time its first meeting took once that is live.
    const std::uint64_t now = now_;
    std::size_t word = SIZE_MAX, k = 0;
    std::uint64_t clear = 0;
    again_.clear();
    for (; k < most && go(k); ++k) {
      std::uint32_t& stamp = engine.stamp(id(k));
      if (stamp >= now) [[unlikely]] {  // a line met twice: its first meeting's time, not yet live
        again_.push_back(stamp);
      } else {
        const std::uint64_t t = stamp & ring_mask_;
        if ((t >> 6) != word) {
          if (word != SIZE_MAX) live_[word] &= ~clear;
          word = std::size_t(t >> 6), clear = 0;
        }
        clear |= std::uint64_t(1) << (t & 63);
      }
      stamp = std::uint32_t(now + k);
    }
    if (word != SIZE_MAX) live_[word] &= ~clear;
    set_live(now, now + k, true);
    for (const std::uint64_t t : again_) flip(live_, t);
    now_ = now + k;
    return k;
  }
  // Whether the ring has room for n more times (else compact() first).
  bool room(std::size_t n) const { return now_ + n - tail_ < ring_mask_ - 64 && now_ + n < kLimit; }
  // Whether the times must be renumbered (compact()) before the next access: the ring
  // would reach the tail's word, or the stamps their limit.
  bool full() const { return now_ - tail_ >= ring_mask_ - 64 || now_ >= kLimit; }
  // The live times renumbered 1, 2, ... in their order, in the engine's stamps and aside.
  // A count of bits per stamp: with the CPU's instruction where it has one (x86-64's
  // baseline lacks it, and the library's call was a third of the renumbering).
  template <class Engine>
  [[gnu::noinline]] void compact(Engine& engine) {  // rare: kept out of the loops that call it
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
    static const bool popcnt = __builtin_cpu_supports("popcnt");
    if (popcnt) return compact_popcnt(engine);
#endif
    renumber(engine);
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
  template <class Engine>
  [[gnu::target("popcnt")]] void compact_popcnt(Engine& engine) {
    renumber(engine);
  }
#endif
  template <class Engine>
  [[gnu::always_inline]] void renumber(Engine& engine) {
    const std::size_t words = live_.size(), first = std::size_t((tail_ & ring_mask_) >> 6);
    rank_.resize(words);
    std::uint32_t before = 0;
    for (std::size_t w = 0; w < words; ++w) {
      const std::size_t k = (first + w) % words;
      rank_[k] = before, before += std::uint32_t(std::popcount(live_[k]));
    }
    const auto renumber = [&](std::uint32_t t) -> std::uint32_t {
      if (t < tail_) return 0;
      const std::uint64_t c = t & ring_mask_;
      return 1 + rank_[c >> 6] + std::uint32_t(std::popcount(live_[c >> 6] & ((std::uint64_t(1) << (c & 63)) - 1)));
    };
    engine.each_stamp([&](std::uint64_t, std::uint32_t& s) { s = renumber(s); });
    aside_.each([&](std::uint32_t, std::uint64_t, std::uint32_t& t) { t = renumber(t); });
    std::fill(live_.begin(), live_.end(), 0), std::fill(aside_bits_.begin(), aside_bits_.end(), 0);
    tail_ = now_ = 1;
    for (std::size_t i = 0; i < used_; ++i) next();
    aside_.each([&](std::uint32_t i, std::uint64_t, std::uint32_t t) { set_aside(t, i); });
  }
  // The lines held, least recent first. Each at its time's rank among the live times
  // (a count of the live bits before it), not placed by time and compacted: warps take
  // a snapshot every block they try, and the times span up to the ring's 32 places a
  // line (DeepSeek-V3's AV_latent: 1.6M instructions a snapshot, a tenth of the Einsum).
  template <class Engine>
  void lines(const Engine& engine, std::vector<std::uint64_t>& out) const {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
    static const bool popcnt = __builtin_cpu_supports("popcnt");
    if (popcnt) return lines_popcnt(engine, out);
#endif
    by_rank(engine, out);
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
  template <class Engine>
  [[gnu::target("popcnt")]] void lines_popcnt(const Engine& engine, std::vector<std::uint64_t>& out) const {
    by_rank(engine, out);
  }
#endif
  template <class Engine>
  [[gnu::always_inline]] void by_rank(const Engine& engine, std::vector<std::uint64_t>& out) const {
    const std::size_t words = live_.size(), first = std::size_t((tail_ & ring_mask_) >> 6);
    const std::size_t span = std::min(words, std::size_t(((tail_ & 63) + (now_ - tail_) + 63) >> 6));
    line_rank_.resize(span);
    std::uint32_t live = 0;
    for (std::size_t w = 0; w < span; ++w)
      line_rank_[w] = live, live += std::uint32_t(std::popcount(live_[(first + w) & (words - 1)]));
    out.assign(live, kNoLine);
    const auto place = [&](std::uint64_t line, std::uint32_t t) {
      const std::uint64_t c = t & ring_mask_, bits = live_[c >> 6], below = (std::uint64_t(1) << (c & 63)) - 1;
      if ((bits >> (c & 63) & 1) == 0) throw std::logic_error("StampShadow::lines: a held line's time is not live");
      out[line_rank_[((c >> 6) - first) & (words - 1)] + std::uint32_t(std::popcount(bits & below))] = line;
    };
    engine.each_stamp([&](std::uint64_t line, std::uint32_t t) {
      if (t >= tail_) place(line, t);
    });
    // The lines aside by their times' bits (the hash has 4 entries a line, most empty).
    for (std::size_t w = 0; w < span; ++w) {
      const std::size_t k = (first + w) & (words - 1);
      for (std::uint64_t bits = aside_bits_[k]; bits != 0; bits &= bits - 1) {
        const unsigned b = unsigned(std::countr_zero(bits));
        out[line_rank_[w] + std::uint32_t(std::popcount(live_[k] & ((std::uint64_t(1) << b) - 1)))] =
            aside_.line(entry_[k * 64 + b]);
      }
    }
    std::erase(out, kNoLine);  // (a live time with no line: none is expected, none is listed)
  }
  // Holds exactly `lines` (distinct), least recent first.
  template <class Engine>
  void assign(Engine& engine, const std::vector<std::uint64_t>& lines) {
    // Emptied, not re-made (a streak's settle() assigns it): the lines aside leave the
    // hash one by one (its entries are theirs alone), the bits are cleared.
    for (std::size_t w = 0; w < aside_bits_.size(); ++w)
      for (std::uint64_t bits = aside_bits_[w]; bits != 0; bits &= bits - 1)
        aside_.vacate(entry_[w * 64 + std::size_t(std::countr_zero(bits))]);
    std::fill(live_.begin(), live_.end(), 0), std::fill(aside_bits_.begin(), aside_bits_.end(), 0);
    tail_ = now_ = 1, used_ = 0;
    engine.each_stamp([](std::uint64_t, std::uint32_t& s) { s = 0; });
    for (std::uint64_t l : lines) {
      const std::int64_t id = engine.lookup(l);
      const std::uint32_t t = next();
      if (id >= 0) engine.stamp(id) = t;
      else set_aside(t, aside_.insert(l, t));
    }
    used_ = lines.size();
  }

 private:
  static constexpr std::uint64_t kLimit = 0xFFFFFFF0u;
  [[gnu::always_inline]] void flip(std::vector<std::uint64_t>& bits, std::uint64_t t) {
    bits[(t & ring_mask_) >> 6] ^= std::uint64_t(1) << (t & 63);
  }
  // The live bits of times [from, to) set or cleared, a word at a time.
  void set_live(std::uint64_t from, std::uint64_t to, bool live) {
    for (std::uint64_t t = from; t < to;) {
      const std::uint64_t bit = t & 63, take = std::min<std::uint64_t>(64 - bit, to - t);
      const std::uint64_t mask = (take == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << take) - 1) << bit;
      std::uint64_t& w = live_[(t & ring_mask_) >> 6];
      w = live ? w | mask : w & ~mask;
      t += take;
    }
  }
  [[gnu::always_inline]] std::uint32_t next() {
    const std::uint64_t t = now_++;
    flip(live_, t);
    return std::uint32_t(t);
  }
  void set_aside(std::uint64_t t, std::uint32_t i) { flip(aside_bits_, t), entry_[t & ring_mask_] = i; }
  // For LineMap::erase_at: an entry moved to index i.
  struct Moved {
    StampShadow* s;
    void operator()(std::uint32_t t, std::uint32_t i) const { s->entry_[t & s->ring_mask_] = i; }
  };
  Moved moved() { return {this}; }
  // A line comes in; past N lines, the least recent (the first live time) falls out.
  void admit() {
    if (used_ < n_) {
      ++used_;
      return;
    }
    std::uint64_t t = tail_;
    for (;;) {
      if (const std::uint64_t w = live_[(t & ring_mask_) >> 6] >> (t & 63); w != 0) {
        t += std::uint64_t(std::countr_zero(w));
        break;
      }
      t = (t | 63) + 1;
    }
    flip(live_, t);
    if (aside_bits_[(t & ring_mask_) >> 6] >> (t & 63) & 1) {
      flip(aside_bits_, t);
      aside_.erase_at(entry_[t & ring_mask_], moved());
    }
    tail_ = t + 1;
  }

  std::size_t n_ = 0, used_ = 0;
  std::vector<std::uint64_t> live_;        // per time (mod the ring): whether it is a line's last use
  std::vector<std::uint64_t> aside_bits_;  // per time: whether that line is aside
  std::vector<std::uint32_t> entry_;       // per time whose line is aside: its entry there
  std::vector<std::uint32_t> rank_;        // compact()'s: per word, the live times before it
  mutable std::vector<std::uint32_t> line_rank_;  // lines()'s: per word from the tail's, the live times before it
  std::vector<std::uint64_t> again_;            // hit_while()'s: times of lines met twice
  std::uint64_t ring_mask_ = 0, tail_ = 1, now_ = 1;
  LineMap<std::uint32_t> aside_;  // line -> its last use
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
  std::vector<CacheTally> keys;
  std::vector<std::uint32_t> key_tensor;     // per key
  std::vector<std::uint64_t> writebacks;     // per tensor (of the evicted line)
  // Per key << 1 | write: hits repeated (replays_loop's one pass), added to `keys` at the
  // end of each batch: an increment a place, where finding stretches of one key
  // mispredicted a branch at each change (DeepSeek-V3's scores change key every few).
  std::vector<std::uint64_t> repeated;
  std::size_t n_traces = 0;
  // The counters an access of `trace` (or kNoTrace) and `tensor` goes to.
  std::size_t key(std::uint32_t trace, std::uint32_t tensor) const {
    return trace != kNoTrace ? trace : n_traces + tensor;
  }
  // One access of `key` counted (and the key's tensor noted): the counters the three Cs
  // add to.
  CacheTally& tally(std::size_t key, std::uint32_t tensor, bool hit, bool write_through) {
    key_tensor[key] = tensor;
    CacheTally& c = keys[key];
    c.accesses++, c.hits += hit, c.write_throughs += write_through;
    return c;
  }
  SeenLines seen;
  // The three Cs' fully associative LRU of the same lines: on the stamps of the
  // engines that keep them (SmallSets, PlruSets), else on its own.
  StampShadow stamps;
  LruShadow shadow;
  Ordered ordered;  // the cache itself when fully associative LRU or FIFO
  SmallSets<CachePolicy::lru> small_lru;  // set-associative LRU or FIFO of at most 16 ways
  SmallSets<CachePolicy::fifo> small_fifo;
  SetAssociative<CachePolicy::lru> lru;  // more ways
  SetAssociative<CachePolicy::fifo> fifo;
  SetAssociative<CachePolicy::plru> plru;
  PlruSets small_plru;  // PLRU of at most 16 ways
  enum class Kind { ordered, small_lru, small_fifo, lru, fifo, plru, small_plru } kind = Kind::lru;
  bool finished = false;

  template <bool Emit>
  void dispatch(std::span<const LineAccess> in, std::vector<CacheAccess>* out);
  // Returns the engine's hits. Stamps: the three Cs' shadow on the engine's stamps.
  template <bool Emit, bool Stamps, class Engine>
  std::uint64_t run(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>* out);
  // The write policy, read from `config` once a loop: the loops' stores could alias it,
  // so read at each access it was loaded again at each.
  struct Writes {
    bool through, allocate, classify;
  };
  Writes writes() const { return {!config.write_back, config.write_allocate, config.three_cs}; }
  template <bool Emit, bool Stamps, bool Unclassified, class Engine>
  // `hint`: a way that may hold the line (checked, then the set's keys if it does not).
  // `classes`: where the three Cs' cold and capacity go instead of the counters (the
  // caller counts the access).
  bool access(Engine& engine, const LineAccess& a, CacheAccess* r, std::int64_t& id, Writes w, Victim* evicted = nullptr,
              std::int64_t hint = -1, std::pair<bool, bool>* classes = nullptr);
  // Each loop a function of its own: inlined together, the loops of the other shadow and
  // of the repeats slowed this one by a fifth (Mixtral 8x22B's feed-forward blocks).
  // The loops without the three Cs are made twice, for x86-64's baseline and for CPUs
  // with AVX2 and BMI (`wide`, known when the model is made): one instruction broadcasts
  // a key or an age where the baseline takes four (synthetic LRU 192 -> 213-217 M/s). With
  // the three Cs on the shadow of its own too, since its counts are kept in a register
  // (Mixtral 8x22B's first FFG token tile 0.95-1.00 -> 0.92-0.94 s, GPT-3 175B's prefill
  // and DeepSeek-V3's softmax no slower); not on the stamps.
  template <bool Emit, bool Stamps, bool Unclassified, class Engine>
  [[gnu::always_inline]] std::uint64_t simulate_loop(Engine& engine, std::span<const LineAccess> in, CacheAccess* o);
  template <bool Stamps, bool Unclassified, class Engine>
  [[gnu::always_inline]] std::uint64_t replays_loop(Engine& engine, std::span<const LineAccess> in);
  template <bool Emit, bool Stamps, bool Unclassified, class Engine>
  [[gnu::noinline]] std::uint64_t simulate_baseline(Engine& engine, std::span<const LineAccess> in, CacheAccess* o) {
    return simulate_loop<Emit, Stamps, Unclassified>(engine, in, o);
  }
  template <bool Stamps, bool Unclassified, class Engine>
  [[gnu::noinline]] std::uint64_t replays_baseline(Engine& engine, std::span<const LineAccess> in) {
    return replays_loop<Stamps, Unclassified>(engine, in);
  }
#if defined(__x86_64__)
  template <bool Emit, bool Stamps, bool Unclassified, class Engine>
  [[gnu::noinline, gnu::target("avx2,bmi,bmi2,popcnt")]] std::uint64_t simulate_wide(Engine& engine, std::span<const LineAccess> in, CacheAccess* o) {
    return simulate_loop<Emit, Stamps, Unclassified>(engine, in, o);
  }
  template <bool Stamps, bool Unclassified, class Engine>
  [[gnu::noinline, gnu::target("avx2,bmi,bmi2,popcnt")]] std::uint64_t replays_wide(Engine& engine, std::span<const LineAccess> in) {
    return replays_loop<Stamps, Unclassified>(engine, in);
  }
#endif
  bool wide = false;  // the CPU runs the *_wide loops (and LOOPTRACE_BASELINE_ISA is not set)
  template <bool Emit, bool Stamps, bool Unclassified, class Engine>
  std::uint64_t simulate(Engine& engine, std::span<const LineAccess> in, CacheAccess* o) {
#if defined(__x86_64__)
    if constexpr (!Stamps)  // (the shadow of its own, or none)
      if (wide) return simulate_wide<Emit, Stamps, Unclassified>(engine, in, o);
#endif
    return simulate_baseline<Emit, Stamps, Unclassified>(engine, in, o);
  }
  template <bool Stamps, bool Unclassified, class Engine>
  std::uint64_t run_replays(Engine& engine, std::span<const LineAccess> in) {
#if defined(__x86_64__)
    if constexpr (Unclassified)
      if (wide) return replays_wide<Stamps, Unclassified>(engine, in);
#endif
    return replays_baseline<Stamps, Unclassified>(engine, in);
  }
  template <bool Emit, class Engine>
  void run_stamped(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>* out);
  // While the replays are off: every access simulated, the three Cs' shadow (on its own)
  // pinned where the replays would pin it.
  template <class Engine>
  std::uint64_t pins_loop(Engine& engine, std::span<const LineAccess> in);
  // pins_loop's part of a timestep, its pinned streaks counted at once (LRU): see below.
  // `at`: the part's first place in its timestep; `whole`: the part is the timestep.
  std::uint64_t pinned_streaks(SmallSets<CachePolicy::lru>& engine, std::span<const LineAccess> part,
                               const unsigned char* pin, std::size_t pinned_places, std::size_t at, bool whole);
  std::vector<std::uint32_t> streak_set_mark;  // pinned_streaks()'s: per set, the streak that touched it
  std::vector<std::uint32_t> streak_set_list, streak_set_count;
  std::uint32_t streak_mark = 0;
  // The pinned streaks a whole timestep had, at its places, while the same pins hold
  // (pin_shadow() makes new ones): a pinned place holds the same line at every
  // timestep until the pins are released, so the rows are there again and only their
  // trace, tensor and direction are checked (finding them was 17 instructions a place).
  struct PinnedStreak {
    std::size_t place;
    std::uint64_t count, period;
    std::uint32_t trace, tensor;
    bool write;
  };
  std::vector<PinnedStreak> pinned_streak_memo;
  std::uint64_t pin_generation = 0, memo_generation = ~std::uint64_t(0);
  std::uint64_t pinned_streak_lines = 0;  // counted by pinned_streaks() (a diagnostic)
  // A timestep that repeats the one before in a set: a weight that a register holds
  // while tokens stream past it is read again at every timestep (Llama 3 8B's
  // projections: 512 lines at each of 128 timesteps, beside 8 lines that change). Where
  // a set's accesses in a timestep are the previous timestep's, one for one and in the
  // same order, and the previous ones all hit, nothing else touched the set in between
  // (the records are the accesses just before, in order: whatever changes the sets
  // another way calls forget()), so they all hit again, in the ways recorded, and leave the set as it was (LRU: the
  // same lines newest in the same order; FIFO: hits change nothing; PLRU: each node on
  // their paths as the last access through it set it). run_replays() counts them with
  // no lookup; the other sets' accesses are simulated, in order. Memory follows a
  // timestep's lines and the sets.
  struct Replays {
    struct Record {
      std::uint64_t line;
      std::int64_t id;     // the way that held the line after it, or -1
      std::uint64_t from;  // trace | tensor << 32 (from_of)
      std::uint32_t key;   // key(trace, tensor) << 1 | write
      bool hit;
      bool write;
      // Whether `a` is this access again (a trace has one tensor: the same trace and
      // tensor, the same key), in three compares, not the key's branch and shifts.
      [[gnu::always_inline]] bool same(const LineAccess& a) const { return line == a.line && from == from_of(a) && write == a.write; }
    };
    [[gnu::always_inline]] static std::uint64_t from_of(const LineAccess& a) {
      return std::uint64_t(a.tensor) << 32 | a.trace;
    }
    // What a miss evicted (read back where a set that did not change repeats its misses).
    struct Evicted {
      std::uint64_t line = 0;
      std::uint32_t tensor = 0;
      bool valid = false, dirty = false;
    };
    bool on = false;              // the engine keeps each line in its way (SmallSets, PlruSets)
    std::uint64_t counted = 0;    // accesses counted as repeats
    std::uint64_t differing_set_repeats = 0;  // of them, in sets that differed elsewhere (a diagnostic)
    std::vector<Record> records;  // the previous timestep's, overwritten by the current one's as it goes
    std::vector<Evicted> evicted;  // beside records, at the misses'
    std::size_t at = 0;           // the current timestep's accesses so far
    std::size_t size = 0;         // the previous timestep's (0: none that may be repeated)
    std::size_t longest = 0;      // the most accesses of a timestep recorded
    bool forgotten = false;       // the current timestep's records may not be repeated
    // Pins without the replays (pins_loop): where a timestep repeats the previous one's
    // lines but not its sets (Mixtral 8x22B's weight tiles thrash eight sets, beside an
    // output row that moves between them), the records cost more than the repeats save,
    // but the pins save the shadow's hash for each weight line. Taken when the replays
    // turn off holding pins or after batches mostly pinned, left after batches mostly
    // not (decay_pins); it keeps lines alone, in line_buf (`lines_only`).
    bool pins_only = false, lines_only = false;
    // pins_loop's lines: the current timestep's in line_buf[cur_buf], the previous one's in
    // the other, swapped at each timestep (where the records hold both in one, the
    // current overwriting the previous as it goes): a place is checked and written in one
    // pass, before the accesses, and a release still finds the previous timestep's.
    std::vector<std::uint64_t> line_buf[2];
    unsigned cur_buf = 0;
    std::uint64_t prev_line(std::size_t place) const {
      return lines_only ? line_buf[cur_buf ^ 1][place] : records[place].line;
    }
    std::uint64_t cur_line(std::size_t place) const { return lines_only ? line_buf[cur_buf][place] : records[place].line; }
    void fit_lines(std::size_t places) {
      if (places > line_buf[0].size())
        for (auto& b : line_buf) b.resize(std::max<std::size_t>(1024, 2 * places));
    }
    std::uint64_t pin_accesses = 0, pin_hits = 0;  // decayed by 1/8 a batch: its accesses, its pinned ones
    void decay_pins(std::uint64_t accesses, std::uint64_t pinned) {
      pin_accesses += accesses - pin_accesses / 8, pin_hits += pinned - pin_hits / 8;
    }
    std::int64_t timestep = INT64_MIN;
    std::vector<std::uint32_t> differs;  // per set: `gen` if its accesses differ from the previous timestep's
    std::uint32_t gen = 0;
    static constexpr std::size_t kShortest = 64;  // a timestep, or one before it, shorter than this: simulated
    static constexpr unsigned kOff = 63;          // batches simulated without records after one that repeated little
    unsigned off = 0;                             // batches left to simulate so
    // Decayed by 1/8 a batch: its accesses; those in timesteps of kShortest or more;
    // those compared with the previous timestep; those counted as repeats.
    struct Recent {
      std::uint64_t accesses = 0, long_steps = 0, compared = 0, repeated = 0;
    } recent;
    // Sets that missed and came back as they were. A set's misses repeat too where its
    // accesses are the previous timestep's and that timestep left it as it found it, way
    // for way (a tile's rows folded into a few sets, read again at every timestep: each
    // fill evicts the line the next fill brings back, so every access misses, and the
    // set ends each timestep as it began it). This is checked, not assumed: a set's block
    // is kept aside where a timestep first simulates it, and compared with the set at the
    // end of that timestep (is_block). Then the previous timestep's outcomes hold again,
    // the same victims, and the set is left as it is; the three Cs' shadow is updated as
    // the misses and their victims would (its hashes, and the stamps of the ways filled).
    std::uint64_t steps = 0;                   // timesteps begun here
    std::uint64_t unsafe = ~std::uint64_t(0);  // a timestep whose snapshots may not be its start (begun elsewhere)
    std::vector<std::uint64_t> kept_at;        // per set: the timestep whose start `kept` holds
    std::vector<std::uint64_t> unchanged_at;   // per set: a timestep it repeated with misses (so it did not change)
    std::vector<unsigned char> kept;           // per set: its block at the start of timestep kept_at
    std::size_t block_bytes = 0;
    std::vector<std::uint32_t> missed;         // per set: `gen` if it missed in the previous timestep (listed)
    std::vector<std::uint32_t> missed_sets;
    // Pins of the three Cs' shadow (on its own, LruShadow): where a timestep repeats most
    // of the previous one's lines at their places, those lines are each used again before
    // N others come (the two timesteps have at most N lines: each place that is not
    // pinned counted as a line), so they stay in a fully associative LRU of N, and it
    // needs no record of their order until they may not (LruShadow::pin). A pinned place
    // must hold its line at every timestep and the bound must hold at every access,
    // checked before a part of a timestep is counted; where either fails, the pins are
    // released first, their lines put back where their last uses (the records) place them.
    std::vector<unsigned char> pin;       // per place in a timestep: pinned (none past the last)
    std::vector<std::uint32_t> pin_below;  // the pinned places before each place (size pin.size() + 1)
    std::uint64_t pinned_at = 0, pin_retry = 0, pin_wait = 1;  // timestep pinned; none before pin_retry
    std::uint64_t pins_below(std::size_t place) const { return pin_below[std::min(place, pin.size())]; }
    // Whether a fully associative LRU of `lines` holds `pinned` lines (distinct, at the
    // pinned places) through places up to `end` of the current timestep.
    bool pins_bounded(std::uint64_t pinned, std::size_t end, std::uint64_t lines) const {
      return pinned + (size - pins_below(size)) + (end - pins_below(end)) <= lines;
    }
    void init(std::uint64_t sets, std::size_t bytes, std::uint64_t lines) {
      longest = std::max<std::size_t>(std::size_t(1) << 16, 4 * lines);
      on = true, differs.assign(sets, 0), missed.assign(sets, 0);
      kept_at.assign(sets, ~std::uint64_t(0)), unchanged_at.assign(sets, ~std::uint64_t(0));
      block_bytes = bytes, kept.assign(sets * bytes, 0);
    }
    // The sets changed where run_replays() does not look: nothing recorded so far is repeated.
    void forget() { size = 0, forgotten = true, unsafe = steps; }
    void next_timestep(std::int64_t t) { size = forgotten ? 0 : at, at = 0, forgotten = false, timestep = t, ++steps; }
    static std::uint32_t key_of(std::size_t key, bool write) { return std::uint32_t(key) << 1 | std::uint32_t(write); }
    [[gnu::always_inline]] void record(std::size_t i, const LineAccess& a, std::size_t key, std::int64_t id, bool hit,
                                       const Victim& v) {
      if (i >= records.size()) [[unlikely]]
        grow(i);
      records[i] = {a.line, id, from_of(a), key_of(key, a.write), hit, a.write};
      if (!hit) evicted[i] = {v.line, v.tensor, v.valid, v.dirty};
    }
    [[gnu::noinline]] void grow(std::size_t i) {
      records.resize(std::max<std::size_t>(1024, 2 * i)), evicted.resize(records.size());
    }
    // A new mark for the sets that differ.
    std::uint32_t next_gen() {
      if (++gen == 0) std::fill(differs.begin(), differs.end(), 0), gen = 1;
      return gen;
    }
  } replays;
  // Which of the two shadows holds the three Cs' lines (for the engines with stamps):
  // the one on the stamps costs little where the engine hits and more where it misses
  // (a line a set evicts while the shadow still holds it goes into a hash), so it is
  // taken while the engine's recent hit rate is above 60%, left below 40%; the state
  // moves from one to the other (O(N log N)) when that changes.
  bool on_stamps = false;
  std::uint64_t recent_hits = 0, recent_accesses = 0;  // decayed by 1/8 a batch
  // A streak: rows of `row` consecutive lines, `stride` lines apart (a tile of a
  // row-major tensor; row 0 while its lines are all consecutive), of one trace, tensor
  // and direction, one after the other in the stream: GPT-3's feed-forward weights come
  // as 12,288 rows of 8 lines a timestep, DeepSeek-V3's requests as one line in four.
  // Its k-th line is first + (k / row) x stride + k % row, and its sets repeat every P
  // lines (the rows that move it by a whole number of sets). In an LRU cache of S sets
  // of W ways that allocates them, W x P of its lines that none of the sets holds miss
  // and leave each set it touches holding W of its lines, whatever the set held before;
  // from then on every line misses, evicting the streak's line of its set W visits
  // before, and the other sets are not touched. In the three Cs' shadow its lines miss
  // too if none of those up to the N-th is resident (after N it holds only the
  // streak's). So count() holds its lines back (`held`) once its rows are known, or
  // past its S-th line while it has none (hold_first(), hold_from()), and settle() checks those conditions and counts a whole number of W x
  // P or more of them at once (P at a time, so that each line keeps its set), in O(N)
  // and a bit per line: misses, the cold ones from the seen bitmap, the victims'
  // write-backs (the lines of its sets now, as they are; the streak's own, if it writes
  // back), its sets refilled with their last W lines, the shadow with its last N; the rest
  // it simulates. Only count() holds lines back; whatever reads or changes the state
  // settles first.
  struct Streak {
    std::uint64_t first = 0, row = 0, stride = 0;
    std::uint64_t next = 0, row_start = 0, in_row = 0;  // the line that goes on with it; its row, its place there
    std::uint64_t length = 0, held = 0;                 // lines so far, the last `held` not simulated
    std::uint64_t hold_from = 0;                        // lines simulated before any is held
    std::uint64_t period = 0;                           // its lines in P rows (rows known; else S)
    bool committed = false;                             // its held lines are not in the batch: settle() has them
    std::uint32_t trace = 0, tensor = 0;
    bool write = false;
    std::uint64_t line(std::uint64_t k) const { return row == 0 ? first + k : first + k / row * stride + k % row; }
    // The k whose line() is `l`, or none.
    std::optional<std::uint64_t> index_of(std::uint64_t l) const {
      if (l < first) return std::nullopt;
      const std::uint64_t off = l - first;
      if (row == 0) return off;
      if (off % stride >= row) return std::nullopt;
      return off / stride * row + off % stride;
    }
    // The rows after which its sets repeat: they move it by a whole number of sets.
    std::uint64_t period_rows(std::uint64_t sets) const {
      return sets / std::gcd((row == 0 ? 1 : stride) % sets, sets);
    }
    // fn(line, n) for the runs of consecutive lines among its lines k .. k + count - 1
    // (its rows, or what of them is there), in order: one division, not one a line.
    template <class Fn>
    void each_run(std::uint64_t k, std::uint64_t count, Fn fn) const {
      if (row == 0) return fn(first + k, count);
      std::uint64_t r = k / row, in = k % row;
      for (std::uint64_t left = count; left != 0; ++r, in = 0) {
        const std::uint64_t n = std::min(row - in, left);
        fn(first + r * stride + in, n);
        left -= n;
      }
    }
  } streak;
  bool streaks = false;  // the engine is SmallSets LRU: count() looks for streaks
  // Batches left in which count() does not look for streaks: a batch that held none back
  // and whose streaks were shorter than 8 lines on average (a random stream, where the
  // search costs a mispredicted branch an access), or that ended with the three Cs'
  // shadow on the stamps (mostly hits), or whose lines were mostly in streaks held back
  // and then simulated, too short to count (Mixtral 8x22B's weight tiles: 512 lines a
  // timestep, where the three Cs need N + P), skips the next 15.
  unsigned streakless = 0;
  std::vector<char> streak_sets;            // settle()'s: the sets a streak touches
  std::vector<std::uint64_t> streak_lines;  // ... and its last N lines
  void count_streaks(std::span<const LineAccess> in);
  std::uint64_t hold_from(const Streak& k) const;
  std::uint64_t hold_first() const;
  bool enough_held(const Streak& k) const;
  void settle();
  // The three Cs' shadow's lines, least recent first; and set to hold exactly `lines`
  // (after the engine's lines were shifted).
  void shadow_lines(std::vector<std::uint64_t>& out) const;
  void shadow_assign(const std::vector<std::uint64_t>& lines);
  // Warps (fast_forward, fast_forward_phase).
  void add_repeats(const CacheSnapshot& a, const CacheSnapshot& b, std::uint64_t n,
                   const std::pair<const CacheSnapshot*, const CacheSnapshot*>* tail, const WarpBlock& record,
                   std::int64_t marks);
  // from_as_is: the engine holds `from`'s lines where they are (WarpBlock::advance built it).
  void shift_state(const CacheSnapshot* from, const std::vector<std::uint64_t>& shadow,
                   const std::vector<std::uint32_t>& shadow_owner, const WarpBlock& block, std::int64_t blocks,
                   bool from_as_is = false);
  // The shadow's pins (Replays) taken at the start of the current timestep, or released
  // where the current timestep is at its place R.at (before anything else reads or moves
  // the shadow, or the records are forgotten).
  void pin_shadow(const LineAccess* p, std::size_t n);
  void release_pins();
  std::vector<std::pair<std::uint64_t, std::size_t>> release_uses;  // (release_pins' room, kept)
  std::vector<std::uint64_t> release_order;
  // The sets change where run_replays() does not look (after the pins are released).
  void forget_replays() {
    release_pins();
    replays.forget();
  }
};

// The end of p's timestep: a stride doubled while it stays in it, then halved (a scan
// cost 5 instructions an access, Llama's 520 a timestep). Accesses come in time order;
// one out of order only makes a longer block to compare with the previous one.
const LineAccess* timestep_end(const LineAccess* p, const LineAccess* end) {
  const std::int64_t t = p->timestep;
  std::size_t in = 1, step = 1;  // p[in - 1] is of t
  while (std::size_t(end - p) > in + step - 1 && p[in + step - 1].timestep == t) in += step, step *= 2;
  for (; step != 0; step /= 2)
    if (std::size_t(end - p) > in + step - 1 && p[in + step - 1].timestep == t) in += step;
  while (p + in != end && p[in].timestep == t) ++in;
  return p + in;
}

template <class Engine>
constexpr bool kStamped = requires(Engine& e) { e.stamp(std::int64_t(0)); };

template <bool Emit>
void CacheModel::Impl::dispatch(std::span<const LineAccess> in, std::vector<CacheAccess>* out) {
  switch (kind) {
    case Kind::ordered: run<Emit, false>(ordered, in, out); return;
    case Kind::small_lru: return run_stamped<Emit>(small_lru, in, out);
    case Kind::small_fifo: return run_stamped<Emit>(small_fifo, in, out);
    case Kind::lru: run<Emit, false>(lru, in, out); return;
    case Kind::fifo: run<Emit, false>(fifo, in, out); return;
    case Kind::plru: run<Emit, false>(plru, in, out); return;
    case Kind::small_plru: return run_stamped<Emit>(small_plru, in, out);
  }
}

template <bool Emit, class Engine>
void CacheModel::Impl::run_stamped(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>* out) {
  if (!config.three_cs) {
    run<Emit, false>(engine, in, out);
    return;
  }
  const bool want = 10 * recent_hits > (on_stamps ? 4 : 6) * recent_accesses;
  if (want != on_stamps) {
    release_pins();
    std::vector<std::uint64_t> lines;
    if (want) shadow.lines(lines), stamps.assign(engine, lines);
    else stamps.lines(engine, lines), shadow.assign(lines);
    on_stamps = want, forget_replays();
    replays.off = 0, replays.recent = {};  // (what the replays saved is measured afresh)
  }
  const std::uint64_t hits = on_stamps ? run<Emit, true>(engine, in, out) : run<Emit, false>(engine, in, out);
  recent_hits += hits - recent_hits / 8, recent_accesses += in.size() - recent_accesses / 8;
}

// One line access simulated (and its record written to *r if Emit): whether the engine
// hit, and in `id` the way that holds the line after it (-1 if none does).
// Unclassified: the model has no three Cs (known at compile time, the counters and
// branches of the shadow go).
template <bool Emit, bool Stamps, bool Unclassified, class Engine>
[[gnu::always_inline]] inline bool CacheModel::Impl::access(Engine& engine, const LineAccess& a,
                                                            [[maybe_unused]] CacheAccess* r, std::int64_t& id,
                                                            Writes w, Victim* evicted, std::int64_t hint,
                                                            std::pair<bool, bool>* classes) {
  constexpr bool stamped = Stamps && kStamped<Engine>;
  const bool wt = w.through, wa = w.allocate, classify = !Unclassified && w.classify;
  if constexpr (stamped)
    if (classify && stamps.full()) stamps.compact(engine);
  // Written in place, field by field: a record built aside and copied stalled on
  // store forwarding (three quarters of the time).
  if constexpr (Emit) {
    r->timestep = a.timestep, r->address = a.line << shift, r->victim = 0;
    r->trace = a.trace, r->tensor = a.tensor, r->victim_tensor = 0;
  }
  std::uint8_t flags = a.write ? CacheAccess::write : 0;
  const bool allocate = !a.write || wa;
  bool cold = false, capacity = false;  // capacity: a miss of the shadow, not cold
  if constexpr (!stamped)
    if (classify) capacity = !shadow.access_seen(a.line, allocate, seen, cold) && !cold;
  if constexpr (requires { engine.lookup_at(a.line, hint); })
    id = hint >= 0 ? engine.lookup_at(a.line, hint) : engine.lookup(a.line);
  else
    id = engine.lookup(a.line);
  const bool hit = id >= 0;
  if (hit) {
    engine.hit(id);
    flags |= CacheAccess::hit;
    if (a.write && !wt) engine.dirty(id) = 1;
    // A line the engine holds was seen: not cold.
    if constexpr (stamped)
      if (classify) capacity = !stamps.hit(engine.stamp(id), allocate);
  } else {
    [[maybe_unused]] std::uint32_t stamp = 0;
    if constexpr (stamped)
      if (classify) {
        cold = !seen.test_and_set(a.line);
        capacity = !stamps.miss(a.line, cold, allocate, stamp) && !cold;
      }
    if (allocate) {
      Victim v;
      if constexpr (stamped) {
        v = engine.fill(a.line, a.write && !wt, a.tensor, stamp);
        if (classify && v.valid) stamps.evicted(v.line, v.stamp);
      } else {
        v = engine.fill(a.line, a.write && !wt, a.tensor);
      }
      if constexpr (requires { engine.filled(); }) id = engine.filled();
      if (evicted) *evicted = v;
      flags |= CacheAccess::fetched;
      if (v.valid) {
        flags |= CacheAccess::evicted;
        if constexpr (Emit) r->victim = v.line << shift, r->victim_tensor = v.tensor;
        if (v.dirty) flags |= CacheAccess::dirty, ++writebacks[v.tensor];
      }
    }
  }
  if (a.write && (wt || !allocate)) flags |= CacheAccess::through;
  if constexpr (Emit) r->flags = flags;
  if constexpr (!Unclassified) {  // else the caller counts (simulate(): a run of one key at a time)
    if (classes) {
      *classes = {cold, capacity};
    } else {
      CacheTally& c = tally(key(a.trace, a.tensor), a.tensor, hit, a.write && wt);
      c.cold += cold, c.capacity += capacity;
    }
  }
  return hit;
}

// Emit: one CacheAccess per line access appended to *out; else the counts alone.
template <bool Emit, bool Stamps, class Engine>
std::uint64_t CacheModel::Impl::run(Engine& engine, std::span<const LineAccess> in, std::vector<CacheAccess>* out) {
  if constexpr (!Emit && kStamped<Engine>)
    if (replays.on) {
      if (replays.off == 0) {
        if (replays.lines_only) forget_replays(), replays.lines_only = false;  // (records of lines alone)
        if constexpr (Stamps) return run_replays<true, false>(engine, in);  // (the stamps imply the three Cs)
        else return config.three_cs ? run_replays<false, false>(engine, in) : run_replays<false, true>(engine, in);
      }
      --replays.off;
      if constexpr (!Stamps)
        if (replays.pins_only && config.three_cs) return pins_loop(engine, in);
    }
  forget_replays();  // the sets change where it does not look
  CacheAccess* o = nullptr;
  if constexpr (Emit) {
    const std::size_t first = out->size();
    out->resize(first + in.size());
    o = out->data() + first;
  }
  return config.three_cs ? simulate<Emit, Stamps, false>(engine, in, o) : simulate<Emit, Stamps, true>(engine, in, o);
}

// Every access of `in` simulated (and its record written to o[i] if Emit); the engine's hits.
template <bool Emit, bool Stamps, bool Unclassified, class Engine>
inline std::uint64_t CacheModel::Impl::simulate_loop(Engine& engine, std::span<const LineAccess> in, CacheAccess* o) {
  const LineAccess* const end = in.data() + in.size();
  const Writes w = writes();
  if constexpr (!Unclassified) {
    // As below, with the three Cs: five fields of 12 bits (accesses, hits,
    // write-throughs, cold, capacity) in a register through a stretch of one key, where
    // each access's five adds to the key's counters were 17 instructions (Mixtral
    // 8x22B's feed-forward weights).
    constexpr unsigned kBits = 12;
    constexpr std::uint64_t kField = (std::uint64_t(1) << kBits) - 1;
    const bool wt = w.through;
    const std::size_t traces = n_traces;
    std::uint64_t engine_hits = 0;
    for (const LineAccess* p = in.data(); p != end;) {
      const std::size_t key = this->key(p->trace, p->tensor);
      const LineAccess* const stop = p + std::min<std::size_t>(std::size_t(end - p), kField);
      std::uint64_t packed = 0;
      for (; p != stop && (p->trace != kNoTrace ? p->trace : traces + p->tensor) == key; ++p) {
        std::int64_t id;
        std::pair<bool, bool> classes;
        const bool hit = access<Emit, Stamps, Unclassified>(engine, *p, o, id, w, nullptr, -1, &classes);
        packed += 1 | std::uint64_t(hit) << kBits | std::uint64_t(p->write && wt) << (2 * kBits) |
                  std::uint64_t(classes.first) << (3 * kBits) | std::uint64_t(classes.second) << (4 * kBits);
        if constexpr (Emit) ++o;
      }
      key_tensor[key] = p[-1].tensor;
      CacheTally& c = keys[key];
      const std::uint64_t hits = (packed >> kBits) & kField;
      c.accesses += packed & kField, c.hits += hits, c.write_throughs += (packed >> (2 * kBits)) & kField;
      c.cold += (packed >> (3 * kBits)) & kField, c.capacity += packed >> (4 * kBits);
      engine_hits += hits;
    }
    return engine_hits;
  }
  // Without the three Cs, the accesses of a stretch of one key are counted in a register,
  // packed (accesses, hits and write-throughs, 21 bits each), and added to the key's
  // counters when the stretch ends: one add an access, where the counters' loads and
  // stores made a chain through memory from access to access.
  constexpr unsigned kBits = 21;
  constexpr std::uint64_t kField = (std::uint64_t(1) << kBits) - 1;
  const bool wt = w.through;
  const std::size_t traces = n_traces;  // key(), with the count held in a register
  std::uint64_t engine_hits = 0, packed = 0;
  std::size_t key = 0;
  const auto add = [&] {
    CacheTally& c = keys[key];
    const std::uint64_t hits = (packed >> kBits) & kField;
    c.accesses += packed & kField, c.hits += hits, c.write_throughs += packed >> (2 * kBits);
    engine_hits += hits, packed = 0;
  };
  for (const LineAccess* p = in.data(); p != end;) {
    key = this->key(p->trace, p->tensor);
    const LineAccess* const stop = p + std::min<std::size_t>(std::size_t(end - p), kField);
    // key(), written out: through a helper taking the count, GCC made this loop 4-10% slower.
    for (; p != stop && (p->trace != kNoTrace ? p->trace : traces + p->tensor) == key; ++p) {
      std::int64_t id;
      const bool hit = access<Emit, Stamps, Unclassified>(engine, *p, o, id, w);
      packed += 1 | std::uint64_t(hit) << kBits | std::uint64_t(p->write && wt) << (2 * kBits);
      if constexpr (Emit) ++o;
    }
    key_tensor[key] = p[-1].tensor;
    add();
  }
  return engine_hits;
}

// The counts alone, over an engine whose lines stay in their ways (SmallSets, PlruSets),
// with the three Cs' shadow on its stamps, on its own (LruShadow, its repeated lines
// pinned where they may be) or none: a set whose accesses in a timestep repeat the
// previous timestep's (Replays) is counted with no lookup.
template <bool Stamps, bool Unclassified, class Engine>
inline std::uint64_t CacheModel::Impl::replays_loop(Engine& engine, std::span<const LineAccess> in) {
  Replays& R = replays;
  std::uint64_t engine_hits = 0;
  const Writes w = writes();
  const bool wt = w.through, wa = w.allocate, classify = !Unclassified && w.classify;
  constexpr bool own_shadow = !Stamps && !Unclassified;  // LruShadow, which pins
  const LineAccess* const end = in.data() + in.size();
  const std::uint64_t counted_before = R.counted, pinned_before = shadow.pinned_hits;
  std::size_t long_steps = 0, compared = 0;  // accesses in timesteps long enough; compared with the one before
  for (const LineAccess* p = in.data(); p != end;) {
    if (p->timestep != R.timestep) {
      if constexpr (own_shadow)  // the timestep ended before a pinned place
        if (shadow.pinned() && R.at < R.pin.size()) release_pins();
      R.next_timestep(p->timestep);
    }
    // A timestep begun in an earlier call may have repeated a set before this call
    // simulates it: its snapshot would not be its start.
    const bool begun_here = R.at == 0;
    if (!begun_here) R.unsafe = R.steps;
    const LineAccess* const q = timestep_end(p, end);
    const std::size_t n = std::size_t(q - p);
    if (n >= Replays::kShortest) long_steps += n;
    // A timestep longer than the records may grow (a tile's fill, millions of requests
    // at one timestep of --source transfers): simulated unrecorded, and nothing of it
    // repeated, so memory follows the cache's lines, not a timestep's.
    if (R.at + n > R.longest) {
      if constexpr (own_shadow) release_pins();
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t id;
        const bool hit = access<false, Stamps, Unclassified>(engine, p[i], nullptr, id, w);
        if constexpr (Unclassified) tally(key(p[i].trace, p[i].tensor), p[i].tensor, hit, p[i].write && wt);
        engine_hits += hit;
      }
      R.forget();
      R.at += n, p = q;
      continue;
    }
    // A timestep's first accesses here (all of it, or the first part, the rest to come in
    // the next call) against the previous timestep's. A set whose accesses in the
    // previous timestep all lie within the part compared repeats here, and stays as it
    // was: what comes next to it is simulated from there.
    std::size_t same = 0, missing_sets = 0;  // missing_sets: sets that repeat their misses
    std::uint32_t gen = 0;
    // Pinned places that do not hold their lines, or more lines than the shadow holds
    // over this part and the previous timestep: the pins go first (after the compare
    // below, which looks at the places, before anything is counted).
    const bool compare = R.at == 0 && R.size >= Replays::kShortest && n >= Replays::kShortest;
    bool unpin = false;
    if constexpr (own_shadow)
      if (shadow.pinned()) {
        unpin = !R.pins_bounded(shadow.pins(), R.at + n, config.lines());
        for (std::size_t i = R.at, last = std::min(R.at + n, R.pin.size()); !compare && !unpin && i < last; ++i)
          unpin = R.pin[i] && R.records[i].line != p[i - R.at].line;
      }
    if (compare) {
      compared += n;
      // The sets that differ: where an access is not the previous timestep's at its place
      // (both sets), where there is none to compare with (past the part compared, or
      // past the previous timestep), or where the previous one missed.
      gen = R.next_gen();
      const std::size_t common = std::min(n, R.size);
      for (std::size_t i = 0; i < common; ++i) {
        const Replays::Record& r = R.records[i];
        const LineAccess& a = p[i];
        if (r.same(a)) {
          ++same;
          if (!r.hit) {
            const std::size_t set = engine.set_of_line(r.line);
            if (R.missed[set] != gen) R.missed[set] = gen, R.missed_sets.push_back(std::uint32_t(set));
          }
        } else {
          R.differs[engine.set_of_line(r.line)] = gen, R.differs[engine.set_of_line(a.line)] = gen;
          if constexpr (own_shadow) unpin = unpin || (i < R.pin.size() && R.pin[i] && r.line != a.line);
        }
      }
      for (std::size_t i = common; i < n; ++i) R.differs[engine.set_of_line(p[i].line)] = gen;
      for (std::size_t i = common; i < R.size; ++i) R.differs[engine.set_of_line(R.records[i].line)] = gen;
      // A set that missed repeats if nothing else differs and the previous timestep left
      // it as it found it: it repeated its misses then, or it is its snapshot now.
      const std::uint64_t before = R.steps - 1;
      for (const std::uint32_t set : R.missed_sets) {
        if (R.differs[set] == gen) continue;
        const bool unchanged = R.unsafe != before &&
                               (R.unchanged_at[set] == before ||
                                (R.kept_at[set] == before && engine.is_block(set, R.kept.data() + set * R.block_bytes)));
        if (unchanged) R.unchanged_at[set] = R.steps, ++missing_sets;
        else R.differs[set] = gen;
      }
      R.missed_sets.clear();
      if constexpr (own_shadow)
        if (unpin) release_pins(), unpin = false;
      if constexpr (own_shadow)
        if (classify && !shadow.pinned() && R.steps >= R.pin_retry && 2 * same >= n &&
            R.size + n - same <= config.lines())
          pin_shadow(p, n);
    }
    if constexpr (own_shadow)
      if (unpin) release_pins();
    // The shadow holds every line a repeat touches if every access brings its line in (a
    // write that does not allocate leaves out a line that is not in) and the two
    // timesteps have fewer accesses than it has lines: the line was accessed in the
    // previous timestep, and falls out only after N others came after it. Then no stamp
    // of a repeat needs checking.
    const bool all_held = config.write_allocate && R.size + n < config.lines();
    // Access i of the timestep here simulated, and recorded at its place.
    // A set's first access in a timestep begun here keeps its block aside first.
    // Inlined at its three calls: a call cost 28 instructions of set-up (Llama 3 8B's
    // feed-forward output rows share sets with the weights, so 15% of places come here).
    const auto keep_set = [&](std::size_t set) __attribute__((always_inline)) {
      if (begun_here && R.kept_at[set] != R.steps) {
        R.kept_at[set] = R.steps;
        engine.keep_block(set, R.kept.data() + set * R.block_bytes);
      }
    };
    const auto simulate_at = [&](std::size_t i) __attribute__((always_inline)) {
      if (begun_here) keep_set(engine.set_of_line(p[i].line));
      std::int64_t id;
      Victim v;
      // The way the previous timestep's access at this place left its line in, if that
      // is the line again: most of these are hits in a set that differs only elsewhere.
      const std::size_t place = R.at + i;
      const std::int64_t hint = place < R.size ? R.records[place].id : -1;
      const bool hit = access<false, Stamps, Unclassified>(engine, p[i], nullptr, id, w, &v, hint);
      const std::size_t k = key(p[i].trace, p[i].tensor);
      if constexpr (Unclassified) tally(k, p[i].tensor, hit, p[i].write && wt);  // access() left it to us
      engine_hits += hit;
      R.record(R.at + i, p[i], k, id, hit, v);
    };
    if (4 * same < n) {  // (mostly) a timestep of its own: simulated
      for (std::size_t i = 0; i < n; ++i) simulate_at(i);
      R.at += n, p = q;
      continue;
    }
    // Repeats i .. j - 1 that move no shadow, as the previous timestep's: a stretch of one
    // key at a time (key_tensor was set when the record was made: a key has one tensor),
    // each miss's victim written back if it was dirty.
    const auto count_quiet = [&](std::size_t i, std::size_t j) {
      std::size_t from = i;
      std::uint64_t hits = 0, throughs = 0;
      for (std::size_t k = i;; ++k) {
        if (k == j || R.records[k].key >> 1 != R.records[from].key >> 1) {
          CacheTally& c = keys[R.records[from].key >> 1];
          c.accesses += k - from, c.hits += hits, c.write_throughs += throughs;
          engine_hits += hits, from = k, hits = throughs = 0;
          if (k == j) break;
        }
        const Replays::Record& r = R.records[k];
        hits += r.hit, throughs += (r.key & 1) && wt;
        if (!r.hit && ((r.key & 1) == 0 || wa)) {
          const Replays::Evicted& v = R.evicted[k];
          if (v.valid && v.dirty) ++writebacks[v.tensor];
        }
      }
      R.counted += j - i;
    };
    // On the engine's stamps, where every repeat is a hit of a line the shadow holds (no
    // set repeats its misses; the two timesteps have fewer lines than it): a run of
    // repeats is found, stamped and counted in one pass (hit_while), not four.
    [[maybe_unused]] const bool one_pass = missing_sets == 0 && all_held;
    // An access of a set that differs (elsewhere: an output row among a weight tile's
    // sets, 30% of Llama 3 8B's feed-forward places) that is the previous timestep's and
    // hit, its line still in the way it hit in, hits there again: its set's ages move as
    // access() would move them (its block kept aside first, as simulate_at() keeps it),
    // and it is counted (and stamped, or its shadow moved) with the repeats, where it
    // ended their run and was simulated whole (as 3 repeats cost).
    const auto hits_again = [&](std::size_t x, std::size_t set) __attribute__((always_inline)) {
      if (x >= R.size) return false;
      const Replays::Record& r = R.records[x];
      if (!r.hit || !r.same(p[x]) || !engine.holds_at(p[x].line, r.id, set)) return false;
      keep_set(set);
      engine.hit(r.id);
      if (p[x].write && !wt) engine.dirty(r.id) = 1;
      ++R.differing_set_repeats;
      return true;
    };
    for (std::size_t i = 0; i < n;) {
      if constexpr (Stamps && kStamped<Engine>)
        if (one_pass) {
          std::uint64_t* const repeats = repeated.data();
          const auto go = [&](std::size_t k) {
            const std::size_t x = i + k;
            const std::size_t set = engine.set_of_line(p[x].line);
            if (R.differs[set] == gen && !hits_again(x, set)) return false;
            ++repeats[R.records[x].key];
            return true;
          };
          const auto id = [&](std::size_t k) { return R.records[i + k].id; };
          if (const std::optional<std::size_t> k = stamps.hit_while(engine, n - i, id, go)) {
            const std::size_t j = i + *k;
            engine_hits += *k, R.counted += *k;
            if (j == n) break;
            simulate_at(j);
            i = j + 1;
            continue;
          }
        }
      // The repeats up to the next access that is not one: hits in the ways recorded,
      // whose records stand (those of sets that differ hit again, hits_again()).
      std::size_t j = i;
      for (; j < n; ++j) {
        const std::size_t set = engine.set_of_line(p[j].line);
        if (R.differs[set] == gen && !hits_again(j, set)) break;
      }
      // Among them, a set's misses (a set that came back as it was): each as the
      // previous timestep's, its victim evicted again; the shadow as access() moves it.
      bool misses = false;
      if (missing_sets != 0)
        for (std::size_t k = i; k < j && !misses; ++k) misses = !R.records[k].hit;
      if (j != i) {
        // No shadow to move (none; its lines all pinned; or their stamps renumbered at
        // once, hits alone): counted a stretch of one key at a time.
        bool quiet = !classify;
        if constexpr (own_shadow) {
          if (!quiet && shadow.pinned() && R.pins_below(j) - R.pins_below(i) == j - i)
            quiet = true, shadow.pinned_hits += j - i;
        } else if constexpr (Stamps) {
          const auto id = [&](std::size_t k) { return R.records[i + k].id; };
          if (!quiet && !misses) quiet = stamps.hit_all(engine, j - i, id, all_held);
        }
        if (quiet) {
          count_quiet(i, j);
        } else {
          // Each as the previous timestep's, its victim evicted again; the shadow moved as
          // access() moves it.
          for (std::size_t k = i; k < j; ++k) {
            const LineAccess& a = p[k];
            const Replays::Record& r = R.records[k];
            const bool allocate = !a.write || wa;
            bool capacity = false;
            if constexpr (Stamps && kStamped<Engine>)
              if (stamps.full()) stamps.compact(engine);
            if constexpr (own_shadow) capacity = !shadow.access(a.line, allocate);  // (seen the timestep before)
            if (r.hit) {
              if constexpr (Stamps && kStamped<Engine>) capacity = !stamps.hit(engine.stamp(r.id), allocate);
            } else {
              [[maybe_unused]] std::uint32_t stamp = 0;
              if constexpr (Stamps && kStamped<Engine>)
                capacity = !stamps.miss(a.line, false, allocate, stamp);  // (seen the timestep before)
              if (allocate) {
                const Replays::Evicted& v = R.evicted[k];
                if constexpr (Stamps && kStamped<Engine>) {
                  if (v.valid) stamps.evicted(v.line, engine.stamp(r.id));
                  engine.stamp(r.id) = stamp;
                }
                if (v.valid && v.dirty) ++writebacks[v.tensor];
              }
            }
            CacheTally& c = keys[r.key >> 1];
            c.accesses++, c.hits += r.hit, c.capacity += capacity, c.write_throughs += a.write && wt;
            engine_hits += r.hit;
          }
          R.counted += j - i;
        }
      }
      if (j == n) break;
      // An access of a set that differs: simulated, and recorded.
      simulate_at(j);  // (R.at is 0 here)
      i = j + 1;
    }
    R.at = n, p = q;
  }
  for (std::size_t k = 0; k < repeated.size(); ++k)
    if (const std::uint64_t c = repeated[k]; c != 0) {
      CacheTally& t = keys[k >> 1];
      t.accesses += c, t.hits += c, t.write_throughs += (k & 1) && wt ? c : 0;
      repeated[k] = 0;
    }
  // Where timesteps are short, or repeat little of the one before (a random stream, a
  // stream of weights), the records cost more than the repeats save: the next batches
  // are simulated without them.
  Replays::Recent& r = R.recent;
  const auto decay = [](std::uint64_t& x, std::uint64_t now) { x += now - x / 8; };
  decay(r.accesses, in.size()), decay(r.long_steps, long_steps), decay(r.compared, compared);
  decay(r.repeated, R.counted - counted_before);
  if (2 * r.long_steps < r.accesses || (r.compared != 0 && 4 * r.repeated < r.compared))
    R.off = Replays::kOff, r = {};
  if constexpr (own_shadow) {
    R.decay_pins(in.size(), shadow.pinned_hits - pinned_before);
    R.pins_only = R.off != 0 && (shadow.pinned() || 2 * R.pin_hits >= R.pin_accesses);
  }
  return engine_hits;
}
template <class Engine>
std::uint64_t CacheModel::Impl::pins_loop(Engine& engine, std::span<const LineAccess> in) {
  Replays& R = replays;
  if (!R.lines_only) {  // from the records: the current timestep's places so far, the previous one's after them
    R.fit_lines(std::max(R.size, R.at));
    for (std::size_t i = 0; i < std::max(R.size, R.at); ++i)
      (i < R.at ? R.line_buf[R.cur_buf] : R.line_buf[R.cur_buf ^ 1])[i] = R.records[i].line;
    R.lines_only = true;
  }
  std::uint64_t engine_hits = 0;
  const std::uint64_t pinned_before = shadow.pinned_hits;
  const LineAccess* const end = in.data() + in.size();
  for (const LineAccess* p = in.data(); p != end;) {
    if (p->timestep != R.timestep) {
      if (shadow.pinned() && R.at < R.pin.size()) release_pins();  // it ended before a pinned place
      R.next_timestep(p->timestep);
      R.cur_buf ^= 1;  // (the current timestep's lines are now the previous one's)
    }
    const LineAccess* const q = timestep_end(p, end);
    const std::size_t n = std::size_t(q - p);
    const std::span<const LineAccess> part(p, n);
    if (R.at + n > R.longest) {  // (as replays_loop: memory follows the cache's lines)
      release_pins();
      engine_hits += simulate<false, false, false>(engine, part, nullptr);
      R.forget();
      R.at += n, p = q;
      continue;
    }
    // As replays_loop checks them: the pins go where a pinned place does not hold its
    // line or the bound fails; they are taken where the timestep repeats most of the
    // previous one's lines at their places. The part's lines are written as they are
    // checked (a release reads the current timestep's only up to R.at).
    R.fit_lines(R.at + n);
    std::uint64_t* const cur = R.line_buf[R.cur_buf].data() + R.at;
    const std::uint64_t* const prev = R.line_buf[R.cur_buf ^ 1].data() + R.at;
    std::size_t i = 0;
    if (shadow.pinned()) {
      const std::size_t pinned_places = R.pin.size() > R.at ? std::min(n, R.pin.size() - R.at) : 0;
      const unsigned char* const pin = pinned_places != 0 ? R.pin.data() + R.at : nullptr;
      // Four places a step, their differences OR-ed as bits (a compare and a flag an
      // access were 13 instructions of Mixtral 8x22B's 520 a timestep; OR-ed one place a
      // step, 14).
      std::uint64_t diff = 0;
      const auto check = [&](std::size_t k) __attribute__((always_inline)) {
        diff |= (prev[k] ^ p[k].line) & (std::uint64_t(0) - std::uint64_t(pin[k] != 0));
        cur[k] = p[k].line;
      };
      for (; i + 4 <= pinned_places; i += 4) check(i), check(i + 1), check(i + 2), check(i + 3);
      for (; i < pinned_places; ++i) check(i);
      if (diff != 0 || !R.pins_bounded(shadow.pins(), R.at + n, config.lines())) release_pins();
    } else if (R.at == 0 && R.size >= Replays::kShortest && n >= Replays::kShortest && R.steps >= R.pin_retry) {
      std::size_t same = 0;
      for (const std::size_t common = std::min(n, R.size); i < common; ++i) {
        same += prev[i] == p[i].line;
        cur[i] = p[i].line;
      }
      if (2 * same >= n && R.size + n - same <= config.lines()) pin_shadow(p, n);
    }
    for (; i < n; ++i) cur[i] = p[i].line;
    // (The pins may have gone or come above: their places are taken again.)
    const std::size_t pinned_places = shadow.pinned() && R.pin.size() > R.at ? std::min(n, R.pin.size() - R.at) : 0;
    bool counted = false;
    if constexpr (std::is_same_v<Engine, SmallSets<CachePolicy::lru>>) {
      if ((counted = pinned_places >= 2 * config.associativity()))
        engine_hits += pinned_streaks(engine, part, R.pin.data() + R.at, pinned_places, R.at, R.at == 0 && q != end);
    }
    if (!counted) engine_hits += simulate<false, false, false>(engine, part, nullptr);
    R.at += n, p = q;
  }
  // Mostly not pinned of late: the next batches are simulated plainly.
  R.decay_pins(in.size(), shadow.pinned_hits - pinned_before);
  if (4 * R.pin_hits < R.pin_accesses) R.pins_only = false;
  return engine_hits;
}

// A streak of pinned places (LRU, with the three Cs' shadow on its own and pinned):
// rows of `row` consecutive lines `stride` apart, of one trace, tensor and direction,
// each line at a place pinned in this timestep (Mixtral 8x22B's feed-forward weight
// tiles: 128 rows of 4 lines, 512 lines apart, read again at each of 128 timesteps,
// folded into 8 sets of the 1 MiB cache, 64 lines each). Its lines are distinct; W x P
// of them (P: the lines of the rows that move it by a whole number of sets, so each of
// its sets takes one or more of them a period) give each set it touches W of its lines
// or more. Where each set's j-th line of it, for j < W, is not held now, or held at an
// age a with a + j >= W, every one of its lines misses (each of a set's first W finds it
// gone, each later one comes after W misses of other lines), as the streaks of count()
// do; here the three Cs' shadow holds every one (pinned, the pins checked for the whole
// part): each a conflict miss that changes nothing in the shadow. So a whole number of
// periods is counted at once: the victims are what its sets hold now, then its own lines
// past each set's first W; each set ends with its last W lines, written in place. The
// rest of the part, and a streak that fails the check, is simulated, in order.
std::uint64_t CacheModel::Impl::pinned_streaks(SmallSets<CachePolicy::lru>& engine, std::span<const LineAccess> part,
                                               const unsigned char* pin, std::size_t pinned_places, std::size_t at,
                                               bool whole) {
  const LineAccess* const p = part.data();
  const std::uint64_t sets = config.sets(), ways = config.associativity();
  const Writes w = writes();
  std::uint64_t engine_hits = 0;
  std::size_t from = 0;  // the first place not yet simulated or counted
  if (streak_set_mark.size() != sets) streak_set_mark.assign(sets, 0), streak_set_count.assign(sets, 0), streak_mark = 0;
  // The streak of `count` lines at place i counted, where every line of it misses (what
  // comes before it simulated first).
  const auto count = [&](std::size_t i, std::uint64_t count, std::uint64_t period) {
    if (from < i) engine_hits += simulate<false, false, false>(engine, part.subspan(from, i - from), nullptr), from = i;
    // Its sets (a period touches each, as many times each period).
    if (++streak_mark == 0) std::fill(streak_set_mark.begin(), streak_set_mark.end(), 0), streak_mark = 1;
    streak_set_list.clear();
    for (std::size_t x = i; x < i + period; ++x) {
      const std::size_t set = engine.set_of_line(p[x].line);
      if (streak_set_mark[set] != streak_mark)
        streak_set_mark[set] = streak_mark, streak_set_count[set] = 0, streak_set_list.push_back(std::uint32_t(set));
      ++streak_set_count[set];
    }
    // Each set's j-th line of it, for j < W, not held there now at an age under W - j
    // (LRU: each miss before it evicts the oldest, so a held line of age a is gone by the
    // j-th if a + j >= W). Most are not held at all: j is counted only for those that are.
    for (std::size_t x = i; x < i + ways * period; ++x) {
      const std::int64_t id = engine.lookup(p[x].line);
      if (id < 0) [[likely]]
        continue;
      const std::size_t set = engine.set_of_line(p[x].line);
      std::uint64_t j = (x - i) / period * streak_set_count[set];
      for (std::size_t y = i + (x - i) / period * period; y < x; ++y) j += engine.set_of_line(p[y].line) == set;
      if (engine.age(id) + j < ways) return;
    }
    const LineAccess& a = p[i];
    const bool dirty = a.write && !w.through;
    for (const std::uint32_t set : streak_set_list) engine.empty_set(set, writebacks);
    if (dirty) writebacks[a.tensor] += count - ways * streak_set_list.size();
    // Each set's last W lines, newest first: the k-th at age k, in way k (which way is
    // not observable), written in place where a fill each cost about 30 instructions.
    for (const std::uint32_t set : streak_set_list) streak_set_count[set] = 0;
    for (std::size_t x = i + count; x-- > i + count - ways * period;) {
      const std::size_t set = engine.set_of_line(p[x].line);
      if (const std::uint32_t k = streak_set_count[set]; k < ways)
        engine.place(set, k, p[x].line, dirty, a.tensor), streak_set_count[set] = k + 1;
    }
    const std::size_t key = this->key(a.trace, a.tensor);
    key_tensor[key] = a.tensor;
    CacheTally& c = keys[key];
    c.accesses += count;
    if (a.write && w.through) c.write_throughs += count;
    shadow.pinned_hits += count, pinned_streak_lines += count;
    from = i + count;
  };
  if (memo_generation == pin_generation) {
    for (const PinnedStreak& m : pinned_streak_memo) {
      if (m.place < at || m.place + m.count > at + pinned_places) continue;  // (not all in this part)
      const std::size_t i = m.place - at;
      bool same = true;
      for (std::size_t x = i; x < i + m.count; ++x)
        same &= p[x].trace == m.trace && p[x].tensor == m.tensor && p[x].write == m.write;
      if (same) count(i, m.count, m.period);
    }
  } else {
    if (whole) pinned_streak_memo.clear(), memo_generation = pin_generation;
    const auto same_key = [](const LineAccess& a, const LineAccess& b) {
      return a.trace == b.trace && a.tensor == b.tensor && a.write == b.write;
    };
    for (std::size_t i = 0; i + 2 * ways <= pinned_places;) {
      const LineAccess& a = p[i];
      if (!pin[i] || (a.write && !w.allocate)) {
        ++i;
        continue;
      }
      // Its first row: consecutive lines; then rows at a stride (the last one may be cut).
      std::size_t j = i + 1;
      while (j < pinned_places && pin[j] && p[j].line == p[j - 1].line + 1 && same_key(p[j], a)) ++j;
      const std::uint64_t row = j - i;
      if (j == pinned_places || !pin[j] || !same_key(p[j], a) || p[j].line <= p[j - 1].line + 1) {
        i = j;  // (one row: a streak of consecutive lines needs W x S of them, more than pins can be)
        continue;
      }
      const std::uint64_t stride = p[j].line - a.line;
      std::size_t k = j;
      for (std::uint64_t start = p[j].line, in_row = 0;
           k < pinned_places && pin[k] && same_key(p[k], a) && p[k].line == start + in_row; ++k)
        if (++in_row == row) in_row = 0, start += stride;
      const std::uint64_t period = sets / std::gcd(stride % sets, sets) * row;
      const std::uint64_t d = std::uint64_t(k - i) / period * period;
      if (d >= ways * period && period * ways <= config.lines()) {
        if (whole) pinned_streak_memo.push_back({at + i, d, period, a.trace, a.tensor, a.write});
        count(i, d, period);
      }
      i = std::max<std::size_t>(k, from);
    }
  }
  if (from < part.size()) engine_hits += simulate<false, false, false>(engine, part.subspan(from), nullptr);
  return engine_hits;
}

CacheModel::CacheModel(const CacheConfig& config, std::size_t n_tensors, std::size_t n_traces, CacheEngine engine)
    : impl_(new Impl) {
  check_cache_config(config);
  Impl& m = *impl_;
  m.config = config;
  m.shift = unsigned(std::countr_zero(config.line_bytes));
  m.n_traces = n_traces;
  m.keys.resize(n_traces + n_tensors);
  m.key_tensor.assign(n_traces + n_tensors, 0);
  m.repeated.assign(2 * (n_traces + n_tensors), 0);
#if defined(__x86_64__)
  __builtin_cpu_init();
  m.wide = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt") && !std::getenv("LOOPTRACE_BASELINE_ISA");
#endif
  m.writebacks.assign(n_tensors, 0);
  const bool generic = engine == CacheEngine::generic;
  const bool full = config.sets() == 1 && !generic;
  using Kind = Impl::Kind;
  const bool small = SmallSets<CachePolicy::lru>::fits(config.associativity()) && !generic;
  if (full && config.policy != CachePolicy::plru && !small) {
    m.kind = Kind::ordered;
    m.ordered.init(config.lines(), config.policy == CachePolicy::lru);
  } else if (config.policy == CachePolicy::lru) {
    m.kind = small ? Kind::small_lru : Kind::lru;
    m.streaks = small;
    if (small) m.small_lru.init(config.sets(), config.associativity());
    else m.lru.init(config.sets(), config.associativity());
  } else if (config.policy == CachePolicy::fifo) {
    m.kind = small ? Kind::small_fifo : Kind::fifo;
    if (small) m.small_fifo.init(config.sets(), config.associativity());
    else m.fifo.init(config.sets(), config.associativity());
  } else if (PlruSets::fits(config.associativity()) && !generic) {
    m.kind = Kind::small_plru;
    m.small_plru.init(config.sets(), config.associativity());
  } else {
    m.kind = Kind::plru;
    m.plru.init(config.sets(), config.associativity());
  }
  const bool in_ways = m.kind == Kind::small_lru || m.kind == Kind::small_fifo || m.kind == Kind::small_plru;
  if (config.three_cs) {
    m.shadow.init(config.lines());
    if (in_ways) m.stamps.init(config.lines());
  }
  if (in_ways) m.replays.init(config.sets(), m.kind == Kind::small_plru ? PlruSets::kBlockBytes : SmallSets<CachePolicy::lru>::kBlockBytes,
                               config.lines());
}

void CacheModel::Impl::pin_shadow(const LineAccess* p, std::size_t n) {
  Replays& R = replays;
  const std::size_t common = std::min(n, R.size);
  // The places that hold the previous timestep's lines, of lines the shadow holds (a
  // write that does not allocate may have left one out).
  std::vector<std::uint64_t> lines;
  R.pin.assign(common, 0);
  ++pin_generation;  // (pinned_streaks() finds its streaks anew)
  for (std::size_t i = 0; i < common; ++i)
    if (R.prev_line(i) == p[i].line && shadow.holds_any(p[i].line, p[i].line)) R.pin[i] = 1, lines.push_back(p[i].line);
  while (!R.pin.empty() && R.pin.back() == 0) R.pin.pop_back();
  R.pin_below.assign(R.pin.size() + 1, 0);
  for (std::size_t i = 0; i < R.pin.size(); ++i) R.pin_below[i + 1] = R.pin_below[i] + R.pin[i];
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  if (lines.empty() || !R.pins_bounded(lines.size(), n, config.lines())) {
    R.pin.clear();
    return;
  }
  shadow.pin(lines);
  R.pinned_at = R.steps;
}

void CacheModel::Impl::release_pins() {
  if (!shadow.pinned()) return;
  Replays& R = replays;
  // The accesses since the previous timestep began, in order: its places from R.at on
  // (the records not yet overwritten), then the current timestep's up to R.at. Every
  // pinned line is among them (at its pinned place, in one or the other), and so are the
  // last uses of the other lines they pass.
  const std::size_t at = R.at, tail = std::max(R.size, at) - at, count = tail + at;
  const auto line = [&](std::size_t j) { return j < tail ? R.prev_line(at + j) : R.cur_line(j - tail); };
  // Each line's last use there, in order (a sort of the window, not a map of it).
  std::vector<std::pair<std::uint64_t, std::size_t>>& uses = release_uses;
  uses.clear();
  for (std::size_t j = 0; j < count; ++j) uses.emplace_back(line(j), j);
  std::sort(uses.begin(), uses.end());
  std::vector<std::uint64_t>& order = release_order;
  order.clear();
  for (std::size_t k = 0; k < uses.size(); ++k)
    if (k + 1 == uses.size() || uses[k + 1].first != uses[k].first) order.push_back(uses[k].second);
  std::sort(order.begin(), order.end());
  for (std::uint64_t& j : order) j = line(std::size_t(j));
  shadow.unpin(order);
  R.pin.clear();
  // Pins that did not last wait longer before the next (each costs a sort of two timesteps).
  R.pin_wait = R.steps - R.pinned_at < 4 ? std::min<std::uint64_t>(2 * R.pin_wait, 64) : 1;
  R.pin_retry = R.steps + R.pin_wait;
}

void CacheModel::Impl::shadow_lines(std::vector<std::uint64_t>& out) const {
  if (!on_stamps) return shadow.lines(out);
  switch (kind) {
    case Kind::small_lru: return stamps.lines(small_lru, out);
    case Kind::small_fifo: return stamps.lines(small_fifo, out);
    case Kind::small_plru: return stamps.lines(small_plru, out);
    default: return shadow.lines(out);
  }
}

void CacheModel::Impl::shadow_assign(const std::vector<std::uint64_t>& lines) {
  if (!on_stamps) return shadow.assign(lines);
  switch (kind) {
    case Kind::small_lru: return stamps.assign(small_lru, lines);
    case Kind::small_fifo: return stamps.assign(small_fifo, lines);
    case Kind::small_plru: return stamps.assign(small_plru, lines);
    default: return shadow.assign(lines);
  }
}

CacheModel::CacheModel(CacheModel&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
CacheModel& CacheModel::operator=(CacheModel&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}
CacheModel::~CacheModel() { delete impl_; }

const CacheConfig& CacheModel::config() const { return impl_->config; }
std::uint64_t CacheModel::repeats() const { return impl_->replays.counted; }
bool CacheModel::wide_loops() const { return impl_->wide; }
std::uint64_t CacheModel::pinned_hits() const { return impl_->shadow.pinned_hits; }
std::uint64_t CacheModel::pinned_streak_lines() const { return impl_->pinned_streak_lines; }
std::uint64_t CacheModel::differing_set_repeats() const { return impl_->replays.differing_set_repeats; }

void CacheModel::Impl::count_streaks(std::span<const LineAccess> in) {
  const LineAccess* p = in.data();
  const LineAccess* const end = p + in.size();
  const LineAccess* from = p;  // the first access neither simulated nor held back
  // While a streak's held lines are too few for settle() to count, they stay in the
  // batch from `hold_at` on: if the streak ends before they are enough, they are
  // simulated with the rest of the batch, never copied.
  const LineAccess* hold_at = nullptr;
  Streak k = streak;  // in registers: dispatch() does not read it, settle() does
  std::size_t starts = 0;  // streaks started
  std::size_t wasted = 0;  // lines of streaks held back that ended too short to count
  const std::uint64_t counted_before = replays.counted;
  bool held = false;
  const auto commit = [&] {  // the held lines will be counted: what came before them is simulated
    if (from != hold_at) dispatch<false>({from, hold_at}, nullptr);
    k.committed = true, held = true;
  };
  for (; p != end; ++p) {
    const LineAccess& a = *p;
    if (k.length != 0 && a.tensor == k.tensor && a.trace == k.trace && a.write == k.write) {
      bool goes_on = a.line == k.next;
      if (!goes_on && k.row == 0 && !k.committed && a.line > k.next) {  // its first row ends here
        k.held = 0;  // (those held are in the batch still)
        k.row = k.length, k.stride = a.line - k.first, k.row_start = a.line, k.in_row = 0;
        k.period = k.period_rows(config.sets()) * k.row;
        k.hold_from = hold_from(k);
        goes_on = true;
      }
      if (goes_on) {
        if (k.row == 0) {
          k.next = a.line + 1;
        } else if (++k.in_row == k.row) {
          k.row_start += k.stride, k.next = k.row_start, k.in_row = 0;
        } else {
          k.next = a.line + 1;
        }
        if (++k.length > k.hold_from) {
          if (k.held == 0 && !k.committed) hold_at = p;
          ++k.held;
          // Held back: the lines that follow on, a row at a time, in a tight loop.
          const LineAccess* q = p + 1;
          const auto same = [&](const LineAccess& b) {
            return b.tensor == k.tensor && b.trace == k.trace && b.write == k.write;
          };
          for (;;) {
            const std::uint64_t left = k.row == 0 ? ~std::uint64_t(0) : k.row - k.in_row;
            const std::uint64_t most = std::min<std::uint64_t>(left, std::uint64_t(end - q));
            std::uint64_t i = 0;
            while (i < most && q[i].line == k.next + i && same(q[i])) ++i;
            q += i, k.length += i, k.held += i;
            if (k.row != 0 && i == left) {
              k.row_start += k.stride, k.next = k.row_start, k.in_row = 0;
              continue;
            }
            k.next += i;
            if (k.row != 0) k.in_row += i;
            break;
          }
          p = q - 1;
          if (!k.committed && enough_held(k)) commit();
          if (k.committed) from = q, held = true;
        }
        continue;
      }
    }
    ++starts;
    if (k.committed) streak = k, settle();  // the streak ended with lines held back: from == p
    else if (k.held != 0) wasted += k.length;
    k = Streak{};  // a line a write does not allocate starts none; held lines not committed stay in the batch
    if (!a.write || config.write_allocate)
      k.first = a.line, k.next = a.line + 1, k.length = 1, k.trace = a.trace, k.tensor = a.tensor, k.write = a.write,
      k.hold_from = hold_first(), k.period = config.sets();
  }
  // Held lines not yet enough when the batch ends (the batch is gone): held on if the
  // streak is W periods long already (it may well go on: a streak of requests spans
  // batches of 4096) and, with the three Cs, N lines (it cannot be counted before N + P:
  // DeepSeek-V3's RFFB writes rows of 8,188 lines at every timestep, which were held at
  // each batch's end and simulated apart from their timestep, where the replays could
  // not see them), else simulated with the batch and held again in the next.
  if (k.held != 0 && !k.committed) {
    if (k.length >= config.associativity() * k.period && (!config.three_cs || k.length >= config.lines()))
      commit(), from = end;
    else
      k.held = 0;
  }
  streak = k;
  if (from != end) dispatch<false>({from, end}, nullptr);
  // No streak counted: on the shadow's stamps (a phase of hits, where a streak is held
  // only past N lines), in a random stream, or where the replays counted most of the
  // batch (a tile read again at every timestep: DeepSeek-V3's Z_per_expert, whose rows
  // make one streak the shadow holds), the search is off for the next 15 batches.
  const bool replayed = 4 * (replays.counted - counted_before) > 3 * in.size();
  if (!held && (8 * starts > in.size() || (config.three_cs && on_stamps) || replayed || 2 * wasted > in.size()))
    streakless = 15;
}

// When a streak's held lines are enough for settle() to count: W periods, and in the
// three Cs' shadow a period past N lines.
bool CacheModel::Impl::enough_held(const Streak& k) const {
  return k.held >= config.associativity() * k.period && (!config.three_cs || k.length >= config.lines() + k.period);
}

std::uint64_t CacheModel::Impl::hold_from(const Streak& k) const {
  // Once its rows are known, every later line is held: settle() counts whole periods of
  // them where the sets and the three Cs' shadow hold none of them (its own hash; on the
  // stamps, the shadow must hold only the streak's lines: after N). A streak whose W x P
  // is more than N is not held at all: settle() could count none of it.
  const std::uint64_t n = config.lines();
  const std::uint64_t full = config.associativity() * k.period;
  if (full > n) return ~std::uint64_t(0);
  if (config.three_cs && on_stamps) return std::max(k.length, n);
  return k.length;
}

// Where a streak that has no rows yet starts holding lines back: past the sets (a row
// of more lines could not be counted as rows, W of them being more than N), or on the
// stamps after N.
std::uint64_t CacheModel::Impl::hold_first() const {
  return config.three_cs && on_stamps ? config.lines() : config.sets();
}

void CacheModel::Impl::settle() {
  if (streak.held == 0) return;
  forget_replays();  // it changes sets without a record
  const std::uint64_t n = config.lines(), sets = config.sets(), ways = config.associativity();
  const std::uint64_t held = streak.held;
  streak.held = 0;
  const std::uint64_t k0 = streak.length - held;  // the first held line (the lines before it were simulated or counted)
  // A period: the rows that move the streak by a whole number of sets, and its lines.
  const std::uint64_t row = streak.row == 0 ? 1 : streak.row, stride = streak.row == 0 ? 1 : streak.stride;
  const std::uint64_t period = streak.period;
  std::uint64_t d = 0;  // counted: the lines k0 .. k0 + d - 1
  // W periods or more: each set it touches takes W of its lines or more, so whatever the
  // set held before is gone by then.
  if (period <= n && held >= ways * period) d = held / period * period;
  if (d != 0 && config.three_cs && k0 < n) {
    // The shadow holds its first k0 lines and N - k0 older ones, the least recent: an
    // older one is gone before the N-th line of the streak comes. So the lines k0 .. N
    // - 1 miss it if none of them is resident now (and the shadow holds only its lines
    // after its N-th).
    bool miss = !on_stamps && k0 + d >= n;
    if (miss)
      streak.each_run(k0, n - k0, [&](std::uint64_t line, std::uint64_t count) {
        miss = miss && !shadow.holds_any(line, line + count - 1);
      });
    if (!miss) d = 0;
  }
  // The sets it touches (a period touches each of them).
  std::vector<char>& used = streak_sets;
  std::uint64_t n_used = 0;
  if (d != 0) {
    used.assign(sets, 0);
    streak.each_run(k0, period, [&](std::uint64_t line, std::uint64_t count) {
      for (std::uint64_t i = 0; i < count; ++i) {
        char& u = used[small_lru.set_of_line(line + i)];
        n_used += u == 0, u = 1;
      }
    });
    // Each counted line misses if none of its first W periods is in those sets now
    // (the sets hold none of their lines of now once each took W of the streak's).
    const auto counted = [&](std::uint64_t line) {
      const std::optional<std::uint64_t> k = streak.index_of(line);
      return k && *k >= k0 && *k < k0 + ways * period;
    };
    for (std::size_t set = 0; set < sets && d != 0; ++set)
      if (used[set] && small_lru.holds_any(set, counted)) d = 0;
  }
  if (d != 0) {
    const bool dirty = streak.write && config.write_back;
    // The victims: every line those sets hold now, then d - W x sets of the streak's
    // own (each set's lines past its first W). The sets end with their last W lines,
    // filled in order.
    for (std::size_t set = 0; set < sets; ++set)
      if (used[set]) small_lru.empty_set(set, writebacks);
    if (dirty) writebacks[streak.tensor] += d - ways * n_used;
    streak.each_run(k0 + d - ways * period, ways * period, [&](std::uint64_t line, std::uint64_t count) {
      for (std::uint64_t i = 0; i < count; ++i) small_lru.put(line + i, dirty, streak.tensor);
    });
    const std::size_t k = key(streak.trace, streak.tensor);
    key_tensor[k] = streak.tensor;
    CacheTally& c = keys[k];
    c.accesses += d;
    if (streak.write && !config.write_back) c.write_throughs += d;
    if (config.three_cs) {
      std::uint64_t fresh = 0;
      if (row == 1 && streak.row != 0)  // lines at a stride: the bits of a word at a time
        fresh = seen.test_and_set_strided(streak.line(k0), stride, d);
      else if (streak.row == 0)
        fresh = seen.test_and_set_range(streak.line(k0), streak.line(k0) + d - 1);
      else {  // what is left of k0's row, the whole rows, what is counted of the last one
        const std::uint64_t head = std::min(d, (row - k0 % row) % row), rows = (d - head) / row;
        const auto runs = [&](std::uint64_t line, std::uint64_t count) {
          fresh += seen.test_and_set_range(line, line + count - 1);
        };
        streak.each_run(k0, head, runs);
        fresh += seen.test_and_set_rows(streak.line(k0 + head), row, stride, rows);
        streak.each_run(k0 + head + rows * row, d - head - rows * row, runs);
      }
      c.cold += fresh, c.capacity += d - fresh;
      std::vector<std::uint64_t>& last = streak_lines;  // the shadow: the streak's last N lines
      last.clear();
      streak.each_run(k0 + d - n, n, [&](std::uint64_t line, std::uint64_t count) {
        for (std::uint64_t i = 0; i < count; ++i) last.push_back(line + i);
      });
      shadow_assign(last);
    }
  }
  // The rest of the held lines, simulated.
  std::vector<LineAccess> rest;
  streak.each_run(k0 + d, streak.length - k0 - d, [&](std::uint64_t line, std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) {
      rest.push_back({0, line + i, streak.trace, streak.tensor, streak.write});
      if (rest.size() == 4096) dispatch<false>(rest, nullptr), rest.clear();
    }
  });
  dispatch<false>(rest, nullptr);
}

void CacheModel::run(std::span<const LineAccess> in, std::vector<CacheAccess>& out) {
  impl_->settle(), impl_->streak = {};
  impl_->dispatch<true>(in, &out);
}

void CacheModel::count(std::span<const LineAccess> in) {
  Impl& m = *impl_;
  if (m.streaks && m.streakless == 0) return m.count_streaks(in);
  if (m.streakless != 0) --m.streakless, m.settle(), m.streak = {};  // (it held nothing back: settle() guards that)
  m.dispatch<false>(in, nullptr);
}

void CacheModel::finish() {
  Impl& m = *impl_;
  if (m.finished) return;
  m.settle(), m.streak = {};
  m.finished = true;
  const auto count = [&](std::uint32_t tensor) { ++m.writebacks[tensor]; };
  using Kind = Impl::Kind;
  switch (m.kind) {
    case Kind::ordered: return m.ordered.each_dirty(count);
    case Kind::small_lru: return m.small_lru.each_dirty(count);
    case Kind::small_fifo: return m.small_fifo.each_dirty(count);
    case Kind::lru: return m.lru.each_dirty(count);
    case Kind::fifo: return m.fifo.each_dirty(count);
    case Kind::plru: return m.plru.each_dirty(count);
    case Kind::small_plru: return m.small_plru.each_dirty(count);
  }
}

CacheReport CacheModel::report() const {
  impl_->settle();  // the counts of the lines held back (the state is the same either way)
  const Impl& m = *impl_;
  CacheReport r;
  r.config = m.config;
  r.tensors.resize(m.writebacks.size());
  r.traces.resize(m.n_traces);
  for (std::size_t k = 0; k < m.keys.size(); ++k) {
    const CacheTally& t = m.keys[k];
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


void LineOwners::add(std::uint32_t tensor, std::uint64_t first, std::uint64_t last) {
  const Range r{first, last, tensor};
  ranges_.insert(std::upper_bound(ranges_.begin(), ranges_.end(), r,
                                  [](const Range& a, const Range& b) { return a.first < b.first; }),
                 r);
}

std::uint32_t LineOwners::operator()(std::uint64_t line) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), line,
                             [](std::uint64_t l, const Range& r) { return l < r.first; });
  if (it == ranges_.begin() || line > std::prev(it)->last) return UINT32_MAX;
  return std::prev(it)->tensor;
}
void LineOwners::of(std::span<const std::uint64_t> lines, std::vector<std::uint32_t>& out) const {
  out.resize(lines.size());
  const Range* last = nullptr;  // the range of the line before: lines come a tensor at a time
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::uint64_t l = lines[i];
    if (last && l >= last->first && l <= last->last) {
      out[i] = last->tensor;
      continue;
    }
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), l, [](std::uint64_t x, const Range& r) { return x < r.first; });
    last = it == ranges_.begin() || l > std::prev(it)->last ? nullptr : &*std::prev(it);
    out[i] = last ? last->tensor : UINT32_MAX;
  }
}

bool CacheModel::can_warp() const {
  using Kind = Impl::Kind;
  const Kind k = impl_->kind;
  return k == Kind::ordered || k == Kind::small_lru || k == Kind::small_fifo;
}

std::size_t CacheModel::key_of(const LineAccess& a) const {
  return impl_->key(a.trace, a.tensor);
}

void CacheModel::snapshot(const LineOwners& owners, CacheSnapshot& out) const {
  impl_->settle(), impl_->release_pins();
  const Impl& m = *impl_;
  using Kind = Impl::Kind;
  switch (m.kind) {
    case Kind::ordered: m.ordered.snapshot(out); break;
    case Kind::small_lru: m.small_lru.snapshot(out); break;
    case Kind::small_fifo: m.small_fifo.snapshot(out); break;
    default: throw std::logic_error("CacheModel::snapshot: the engine cannot warp");
  }
  out.ways = m.kind == Kind::ordered ? m.config.lines() : m.config.associativity();
  out.lru = m.config.policy == CachePolicy::lru;
  out.shadow.clear(), out.shadow_owner.clear();
  if (m.config.three_cs) {
    m.shadow_lines(out.shadow);
    owners.of(out.shadow, out.shadow_owner);
  }
  out.tallies = m.keys;
  out.writebacks = m.writebacks;
}

std::size_t WarpBlock::max_runs(const CacheModel& model) {
  const CacheConfig& c = model.config();
  const std::uint64_t lines = c.lines() * (c.three_cs ? 2 : 1);  // the shadow holds as many
  return std::size_t(std::max<std::uint64_t>(4096, 32 * lines));
}

WarpBlock::WarpBlock()
    : touched_lines_(std::make_unique<SeenLines>()),
      still_lines_(std::make_unique<SeenLines>()),
      along_lines_(std::make_unique<SeenLines>()),
      stay_lines_(std::make_unique<SeenLines>()),
      stay_shadow_lines_(std::make_unique<SeenLines>()),
      marked_runs_(std::size_t(1) << kMarkedRunBits) {}
WarpBlock::~WarpBlock() = default;
WarpBlock::WarpBlock(WarpBlock&&) noexcept = default;
WarpBlock& WarpBlock::operator=(WarpBlock&&) noexcept = default;

void WarpBlock::reset(std::span<const std::int64_t> delta, std::size_t max_runs) {
  delta_.assign(delta.begin(), delta.end());
  log_.clear(), joined_ = 0, max_runs_ = max_runs, overflow_ = false;
  touched_lines_->clear(), still_lines_->clear();  // (a block's lines are its own)
  ++gen_;  // (the runs marked before are not)
  first_added_ = INT64_MAX;
  still_marked_ = mark_still_ = true, wants_still_ = false;
  low_.assign(delta.size(), kNoLine), high_.assign(delta.size(), 0);
}

void WarpBlock::log_group(const Logged& g) {
  const std::uint64_t top = g.last + (g.count - 1) * g.stride;
  low_[g.tensor] = std::min(low_[g.tensor], g.first), high_[g.tensor] = std::max(high_[g.tensor], top);
  if (!log_.empty()) {
    Logged& r = log_.back();
    if (r.key == g.key && r.tensor == g.tensor) {
      if (r.count == 1 && g.count == 1 && r.last + 1 == g.first) {  // the next lines
        r.last = g.last;
        return;
      }
      // The next runs at the group's stride (a run after a run: the stride between them).
      const std::uint64_t stride = r.count == 1 ? g.first - r.first : r.stride;
      if (r.last - r.first == g.last - g.first && g.first > r.last + (r.count - 1) * r.stride &&
          g.first == r.first + r.count * stride && (g.count == 1 || g.stride == stride)) {
        r.stride = stride, r.count += g.count;
        return;
      }
    }
  }
  log_.push_back(g);
}

void WarpBlock::record(std::uint64_t first, std::uint64_t last, std::uint32_t key, std::uint32_t tensor) {
  // One line, touched before in the block, as most are (DeepSeek-V3's scores: a line of
  // a key row at a time, each read once per query): one bit tested.
  if (first == last) {
    if (!touched_lines_->test_and_set(first)) log_fresh(first, first, key, tensor);
    return;
  }
  touched_lines_->set_fresh(first, last, [&](std::uint64_t a, std::uint64_t b) { log_fresh(a, b, key, tensor); });
}

void WarpBlock::record_group(const Logged& g) {
  if (g.count == 1) return record(g.first, g.last, g.key, g.tensor);
  const std::uint64_t row = g.last - g.first + 1;
  if (touched_lines_->none_in_rows(g.first, row, g.stride, g.count)) {
    if (row == 1) touched_lines_->test_and_set_strided(g.first, g.stride, g.count);
    else touched_lines_->test_and_set_rows(g.first, row, g.stride, g.count);
    log_group(g);
    return;
  }
  for (std::uint64_t k = 0; k < g.count; ++k) record(g.first + k * g.stride, g.last + k * g.stride, g.key, g.tensor);
}

void WarpBlock::join(std::vector<Logged>& runs) {
  std::sort(runs.begin(), runs.end(), [](const Logged& a, const Logged& b) { return a.first < b.first; });
  std::size_t n = 0;
  for (const Logged& r : runs) {
    if (n > 0 && runs[n - 1].count == 1 && r.count == 1 && runs[n - 1].last + 1 == r.first &&
        runs[n - 1].key == r.key && runs[n - 1].tensor == r.tensor)
      runs[n - 1].last = r.last;
    else
      runs[n++] = r;
  }
  runs.resize(n);
}

void WarpBlock::bound() {
  // Joined at most once per doubling of the log, so joining costs O(log) a run.
  if (log_.size() <= max_runs_ || log_.size() < 2 * joined_) return;
  join(log_);
  const std::size_t n = joined_ = log_.size();
  if (n > max_runs_) {
    overflow_ = true;
    log_.clear(), log_.shrink_to_fit();  // not needed any more: no warp
  }
}

void WarpBlock::add(std::span<const LineAccess> batch, const CacheModel& model,
                    std::span<const RepeatedGroup> repeated) {
  if (overflow_ || batch.empty()) return;
  if (first_added_ == INT64_MAX) first_added_ = batch.front().timestep;
  // Only the tensors that move: a line that does not is its own shift, touched or not.
  // The batch a run of consecutive lines at a time (as cache_lines makes them).
  // The lines of those that do not are marked too where asked (mark_still): matches()
  // asks which of them no block touches, in the three Cs' shadow and at idle places.
  const bool still = mark_still_;
  still_marked_ = still_marked_ && still;
  const LineAccess* const end = batch.data() + batch.size();
  // (read through a local pointer: the bitmaps' stores would make it load delta_'s again
  // at each access, which was a third of this loop on DeepSeek-V3's layer)
  const std::int64_t* const delta = delta_.data();
  // The accesses [p, stop), a run of consecutive lines at a time.
  const auto mark = [&](const LineAccess* p, const LineAccess* const stop) __attribute__((always_inline)) {
    while (p != stop) {
      const LineAccess& a = *p;
      if (delta[a.tensor] == 0 && !still) {  // the accesses of a tensor that stays, at once
        const std::uint32_t tensor = a.tensor;
        for (++p; p != stop && p->tensor == tensor;) ++p;
        continue;
      }
      std::uint64_t last = a.line;
      for (++p; p != stop && p->line == last + 1 && p->tensor == a.tensor && p->trace == a.trace; ++p) ++last;
      if (a.line != last) {  // (a line belongs to one tensor: marked where its tensor's lines go)
        MarkedRun& m = marked_runs_[std::size_t((a.line * 0x9E3779B97F4A7C15ull) >> (64 - kMarkedRunBits))];
        if (m.gen == gen_ && m.first == a.line && m.last >= last) continue;
        m = {a.line, last, gen_};
      }
      if (delta[a.tensor] == 0) still_lines_->test_and_set_range(a.line, last);
      else if (a.line != last) record(a.line, last, std::uint32_t(model.key_of(a)), a.tensor);
      // One line, touched before in the block as most are: its key is not asked.
      else if (!touched_lines_->test_and_set(a.line)) log_fresh(a.line, a.line, std::uint32_t(model.key_of(a)), a.tensor);
    }
  };
  // A group that repeats one added since reset() is skipped whole: each of its lines was
  // marked then (DeepSeek-V3's scores: a key tile of 128 runs at every timestep). The
  // stretches between such groups are marked as they come.
  const LineAccess* p = batch.data();
  for (const RepeatedGroup& g : repeated) {
    if (g.previous < first_added_) continue;
    mark(p, batch.data() + g.begin);
    p = batch.data() + g.end;
  }
  mark(p, end);
  bound();
}

void WarpBlock::add_shifted(const WarpBlock& inner, std::int64_t blocks) {
  if (overflow_) return;
  still_marked_ = still_marked_ && inner.still_marked_;
  // (A tensor that does not move in `inner` touches the lines its recorded block did,
  // which add() saw; its runs hold the others.)
  for (std::int64_t i = 1; i <= blocks && !overflow_; ++i) {
    for (const Logged& r : inner.log_) {
      const std::int64_t d = i * inner.delta_[r.tensor];
      Logged g = r;
      g.first = std::uint64_t(std::int64_t(r.first) + d), g.last = std::uint64_t(std::int64_t(r.last) + d);
      if (delta_[r.tensor] != 0) record_group(g);
      else if (still_marked_ && g.count == 1) still_lines_->test_and_set_range(g.first, g.last);
      else if (still_marked_) still_lines_->test_and_set_rows(g.first, g.last - g.first + 1, g.stride, g.count);
    }
    bound();
  }
}

WarpBlock::Runs WarpBlock::runs() const {
  std::vector<Logged> sorted;
  for (const Logged& r : log_)
    for (std::uint64_t k = 0; k < r.count; ++k) sorted.push_back({r.first + k * r.stride, r.last + k * r.stride, r.key, r.tensor});
  join(sorted);
  Runs out;
  for (const Logged& r : sorted) out.emplace_back(r.first, FirstRun{r.last, r.key, r.tensor});
  return out;
}

bool WarpBlock::touched(std::uint64_t line) const { return touched_lines_->test(line); }

std::optional<bool> WarpBlock::touches(std::uint64_t line, std::uint32_t owner) const {
  if (owner >= delta_.size()) return std::nullopt;
  if (delta_[owner] != 0) return touched_lines_->test(line);
  if (!still_marked_) return std::nullopt;
  return still_lines_->test(line);
}

namespace {

constexpr std::uint32_t kGone = UINT32_MAX, kTouched = UINT32_MAX - 1, kEmptyPlace = UINT32_MAX - 2;

// How one block moved the lines of one set of an LRU cache, from its places before the
// block (`earlier`) to after (`later`): the block's lines on top (`filled` places, the
// newest), then the lines it did not touch in their order before it. `to[q]`: where
// `earlier`'s place q went (kGone: aged out; kTouched: the block touched it), `from[p]`
// for p >= filled: where `later`'s place p was. A state whose lines the next block
// touches as the block did those of `earlier` (shifted) is moved alike.
struct SetMoves {
  std::size_t filled = 0;
  std::vector<std::uint32_t> to, from;
  // nullopt: not known (a tensor that does not move, not marked); false: not LRU's
  // order of these lines (a line the block did not touch above one it did, or not in
  // `earlier`).
  template <class Touches>
  static std::optional<SetMoves> of(const std::uint64_t* e, const std::uint32_t* e_owner, const std::uint64_t* l,
                                    const std::uint32_t* l_owner, std::size_t ways, Touches touches, bool& known) {
    known = true;
    SetMoves m;
    m.to.assign(ways, kGone), m.from.assign(ways, kGone);
    std::size_t p = 0;
    for (; p < ways && l[p] != kNoLine; ++p) {
      const std::optional<bool> t = touches(l[p], l_owner[p]);
      if (!t) return known = false, std::nullopt;
      if (!*t) break;
    }
    m.filled = p;
    // `earlier`'s places by line, where a set is long (a fully associative cache).
    std::unordered_map<std::uint64_t, std::uint32_t> at;
    if (ways > 64)
      for (std::size_t q = 0; q < ways; ++q)
        if (e[q] != kNoLine) at.emplace(e[q], std::uint32_t(q));
    const auto place_of = [&](std::uint64_t line) -> std::uint32_t {
      if (ways > 64) {
        const auto it = at.find(line);
        return it == at.end() ? kGone : it->second;
      }
      for (std::size_t q = 0; q < ways; ++q)
        if (e[q] == line) return std::uint32_t(q);
      return kGone;
    };
    std::uint32_t last = 0;
    for (; p < ways && l[p] != kNoLine; ++p) {
      const std::optional<bool> t = touches(l[p], l_owner[p]);
      if (!t) return known = false, std::nullopt;
      const std::uint32_t q = place_of(l[p]);
      if (*t || q == kGone || (p > m.filled && q <= last) || q > p) return std::nullopt;
      m.from[p] = q, m.to[q] = std::uint32_t(p), last = q;
    }
    for (; p < ways; ++p)
      if (l[p] != kNoLine) return std::nullopt;
    for (std::size_t q = 0; q < ways; ++q) {
      if (e[q] == kNoLine) {
        m.to[q] = kEmptyPlace;
        continue;
      }
      if (m.to[q] != kGone) continue;
      const std::optional<bool> t = touches(e[q], e_owner[q]);
      if (!t) return known = false, std::nullopt;
      if (*t) m.to[q] = kTouched;
    }
    return m;
  }
};

}  // namespace

void WarpBlock::advance(const CacheSnapshot& a, const CacheSnapshot& b, std::int64_t blocks, CacheSnapshot& out) const {
  const std::size_t ways = std::size_t(b.ways);
  out.ways = b.ways, out.lru = b.lru;
  out.lines.assign(b.lines.size(), kNoLine), out.dirty.assign(b.lines.size(), 0), out.owner.assign(b.lines.size(), 0);
  const auto touches = [&](std::uint64_t line, std::uint32_t owner) { return this->touches(line, owner); };
  auto idle_set = idle_sets_.begin();  // (both in order)
  for (std::size_t base = 0; base < b.lines.size(); base += ways) {
    if (idle_set == idle_sets_.end() || *idle_set != base) {
      // No idle places: the set's lines that move shifted (matches()).
      for (std::size_t i = base; i < base + ways; ++i) {
        out.lines[i] = b.lines[i] == kNoLine ? kNoLine : shifted(b.lines[i], b.owner[i], blocks, false);
        out.dirty[i] = b.dirty[i], out.owner[i] = b.owner[i];
      }
      continue;
    }
    ++idle_set;
    bool known = true;
    const std::optional<SetMoves> m = SetMoves::of(a.lines.data() + base, a.owner.data() + base, b.lines.data() + base,
                                                   b.owner.data() + base, ways, touches, known);
    if (!m) throw std::logic_error("cache warp: a set matches() took does not move as LRU does");
    for (std::size_t p = 0; p < ways && b.lines[base + p] != kNoLine; ++p) {
      // Block by block back from the last: the place each line was at one block before.
      std::size_t q = p;
      std::int64_t j = blocks;
      while (j > 0 && q >= m->filled && m->from[q] != q) q = m->from[q], --j;
      const std::size_t i = base + q;
      const std::uint32_t owner = b.owner[i];
      const std::int64_t d = q < m->filled && owner < delta_.size() ? delta_[owner] : 0;
      out.lines[base + p] = std::uint64_t(std::int64_t(b.lines[i]) + j * d);
      out.dirty[base + p] = b.dirty[i], out.owner[base + p] = owner;
    }
  }
}

std::uint64_t WarpBlock::shifted(std::uint64_t line, std::uint32_t owner, std::int64_t blocks, bool shadow) const {
  if (owner >= delta_.size() || delta_[owner] == 0 || stays(line, shadow)) return line;
  return std::uint64_t(std::int64_t(line) + blocks * delta_[owner]);
}

bool WarpBlock::matches(const CacheSnapshot& a, const CacheSnapshot& b, std::int64_t blocks, const WarpBlock* also) {
  stay_.clear(), stay_shadow_.clear(), idle_sets_.clear(), idle_places_ = 0, rebuilds_ = false;
  stay_lines_->clear(), stay_shadow_lines_->clear();
  shadow_top_ = b.shadow.size(), shadow_fall_ = 0;
  if (a.lines.size() != b.lines.size() || overflow_) return false;
  if (also && (also->overflow_ || also->delta_ != delta_)) return false;
  // The lines that move with the blocks, per tensor: those touched and those shifted along.
  std::vector<std::uint64_t> low = low_, high = high_;
  if (also)
    for (std::size_t t = 0; t < low.size(); ++t)
      low[t] = std::min(low[t], also->low_[t]), high[t] = std::max(high[t], also->high_[t]);
  const auto touched = [&](std::uint64_t line) {
    return touched_lines_->test(line) || (also && also->touched_lines_->test(line));
  };
  struct Stay {
    std::uint64_t line;
    std::uint32_t owner;
  };
  std::vector<Stay> stay_owners;
  std::vector<std::uint64_t> along;  // untouched lines that move with the touched ones
  std::size_t along_marked = 0;       // those of them in along_lines_ (put there when out_of_reach() first asks)
  along_lines_->clear();
  const auto classify = [&](std::uint64_t line, std::uint32_t owner, std::uint64_t then, bool shadow) {
    if (owner >= delta_.size()) return false;
    if (then == std::uint64_t(std::int64_t(line) + delta_[owner])) {
      low[owner] = std::min(low[owner], line), high[owner] = std::max(high[owner], line);
      if (delta_[owner] != 0 && !touched(line)) along.push_back(line);
      return true;
    }
    if (then != line || touched(line)) return false;
    (shadow ? stay_shadow_ : stay_).push_back(line);
    stay_owners.push_back({line, owner});
    return true;
  };
  // Whether a line of `owner` that the block did not touch is out of reach of the lines
  // that move, shifted 1 .. blocks + 1 times: out of their range so shifted, or (for a
  // few blocks) none of them so shifted.
  const auto out_of_reach = [&](std::uint64_t line, std::uint32_t owner) {
    const std::int64_t d = delta_[owner];
    if (d == 0 || low[owner] > high[owner]) return true;
    const std::int64_t lo = std::int64_t(low[owner]), hi = std::int64_t(high[owner]), l = std::int64_t(line);
    if (d > 0 ? (l < lo + d || l > hi + (blocks + 1) * d) : (l < lo + (blocks + 1) * d || l > hi + d)) return true;
    if (blocks > 256) return false;
    for (; along_marked < along.size(); ++along_marked) along_lines_->test_and_set(along[along_marked]);
    // Only the shifts that bring a line of [lo, hi] (every line of the tensor that moves:
    // touched, shifted along, or the record beside's) onto `line` (DeepSeek-V3's scatter
    // to its experts: a block's lines span a few of 257 shifts; testing each was a third
    // of the Einsum).
    const auto floor_div = [](std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); };
    const std::int64_t first = std::max<std::int64_t>(1, d > 0 ? -floor_div(hi - l, d) : -floor_div(lo - l, d));
    const std::int64_t last = std::min<std::int64_t>(blocks + 1, d > 0 ? floor_div(l - lo, d) : floor_div(l - hi, d));
    for (std::int64_t i = first; i <= last; ++i)
      if (touched(std::uint64_t(l - i * d)) || along_lines_->test(std::uint64_t(l - i * d))) return false;
    return true;
  };
  // A line of `earlier` no block of the warp touches (this one or the next ones), and a
  // line of `later` none of the next blocks touches: untouched (or moving on: it was
  // this block's) and out of reach.
  const auto idle = [&](std::uint64_t line, std::uint32_t owner, bool after) {
    if (owner >= delta_.size() || !still_marked_) return false;
    if (delta_[owner] == 0) return !still_lines_->test(line);
    return (after || !touched(line)) && out_of_reach(line, owner);
  };
  // Under FIFO, a place may also hold idle lines that differ (as in DeepSeek-V3's
  // scores: the lines of the heads before the span leave the sets only the keys use over
  // four blocks, while the next ones are alike): `earlier`'s line e there, which this
  // block did not touch and which is gone from `later` (it aged out), and `later`'s line l, which the next block
  // does not touch, both clean or both dirty lines of one tensor. The next block from
  // `later` then does what this one did from `earlier` shifted (e's image, idle too, is
  // as good as l at that place: neither is accessed, and either is written back as the
  // other would be): the same outcomes, and l ages out of the place as e did, so that
  // block ends in `later` shifted, line for line, and the blocks translate from there
  // (CacheModel::fast_forward shifts `later`). Not across two records (`also`). Where e
  // only moved to an older place, the lines of `later` that move with the blocks below
  // it need not: in DeepSeek-V3's scores the previous heads' lines are the lines of the
  // span's last blocks, which look like the next blocks' until they age out, and the
  // next blocks' lines take their places, not `later`'s shifted. (Under LRU the wider
  // rule below, with the state built.)
  const std::size_t ways = std::size_t(b.ways);
  const bool may_idle = !also && ways != 0 && b.lines.size() % ways == 0;
  // Whether place i holds such lines: yes, no, or not known (nullopt: a line of a tensor
  // that does not move, where those are not marked).
  const auto idle_place = [&](std::size_t i) -> std::optional<bool> {
    const std::uint64_t e = a.lines[i], l = b.lines[i];
    const std::uint32_t oe = a.owner[i], ol = b.owner[i];
    // (l of a tensor that does not move is never idle: touched by this block, it is by
    // the next; untouched, it was in `earlier` too, at a place that cannot match.)
    if (!may_idle || a.dirty[i] != b.dirty[i] || oe >= delta_.size() || ol >= delta_.size() ||
        (a.dirty[i] && oe != ol) || delta_[ol] == 0)
      return false;
    const auto set = b.lines.begin() + std::ptrdiff_t(i - i % ways);  // (lines keep their sets)
    if (std::find(set, set + std::ptrdiff_t(ways), e) != set + std::ptrdiff_t(ways)) return false;  // e not gone
    // Untouched by this block (of a tensor that does not move, known only where such
    // lines are marked).
    const std::optional<bool> e_used = touches(e, oe), l_used = touches(std::uint64_t(std::int64_t(l) - delta_[ol]), ol);
    if (e_used == true || l_used == true) return false;
    if (!e_used || !l_used) return std::nullopt;
    return true;
  };
  // Under LRU, wider: a place whose lines are each accessed by no block before it
  // leaves the set. Every other place holds lines the blocks rename (or none), so each
  // next block accesses the places this one did, moves the lines as this one did, and
  // leaves idle lines at the places it found idle ones (from the place one block before:
  // `earlier`'s idle or `later`'s, its renamed line's; accessed by no block there, nor
  // after). Which the next states are is then not `later` shifted (DeepSeek-V3's scores:
  // the lines of the heads before the span are the keys of its last blocks, accessed
  // by none before they age out): advance() builds it.
  const std::int64_t last_block = blocks + 1;  // this block is block 1
  // Whether block j touches a line.
  const auto accessed = [&](std::uint64_t line, std::uint32_t owner, std::int64_t j) {
    return touches(std::uint64_t(std::int64_t(line) - (j - 1) * delta_[owner]), owner);
  };
  // The places walked, at most a few per line of the cache: a fully associative cache
  // whose blocks fill a line or two would walk ways / fill places per idle place.
  std::size_t walk = 8 * a.lines.size() + 1024;
  std::size_t moves_base = SIZE_MAX;
  std::optional<SetMoves> moves;
  bool moves_known = true;
  const auto touches_now = [&](std::uint64_t line, std::uint32_t owner) { return touches(line, owner); };
  // Whether `line`, at `place` of its set in the state before block t + 1, is accessed
  // by no block before it leaves the set (or the last block is over).
  const auto idle_until_gone = [&](std::uint64_t line, std::uint32_t owner, std::uint32_t place,
                                   std::int64_t t) -> std::optional<bool> {
    for (;; ++t) {
      if (t + 1 > last_block) return true;
      if (walk-- == 0) return false;
      const std::optional<bool> now = accessed(line, owner, t + 1);
      if (now != false) return now ? std::optional<bool>(false) : std::nullopt;
      const std::uint32_t next = moves->to[place];
      if (next == kGone) return true;
      // (A line stays at its place only where the block filled none above it, and then
      // the line at that place is the same in both states: never an idle place.)
      if (next == kTouched || next == kEmptyPlace || next == place) return false;
      place = next;
    }
  };
  const auto lru_idle_place = [&](std::size_t i) -> std::optional<bool> {
    const std::uint64_t e = a.lines[i], l = b.lines[i];
    const std::uint32_t oe = a.owner[i], ol = b.owner[i];
    if (!may_idle || a.dirty[i] != b.dirty[i] || oe >= delta_.size() || ol >= delta_.size() ||
        (a.dirty[i] && oe != ol))
      return false;
    const std::size_t base = i - i % ways;
    if (base != moves_base) {
      moves_base = base;
      moves = SetMoves::of(a.lines.data() + base, a.owner.data() + base, b.lines.data() + base, b.owner.data() + base,
                           ways, touches_now, moves_known);
    }
    if (!moves) return moves_known ? std::optional<bool>(false) : std::nullopt;
    const std::uint32_t place = std::uint32_t(i - base);
    const std::optional<bool> e_idle = idle_until_gone(e, oe, place, 0);
    if (e_idle == false) return false;
    const std::optional<bool> l_idle = idle_until_gone(l, ol, place, 1);
    if (l_idle == false) return false;
    if (!e_idle || !l_idle) return std::nullopt;
    if (idle_sets_.empty() || idle_sets_.back() != base) idle_sets_.push_back(base);
    return true;
  };
  std::size_t idle_places = 0, unknown = 0;
  for (std::size_t i = 0; i < a.lines.size(); ++i) {
    if (a.lines[i] == kNoLine || b.lines[i] == kNoLine) {
      if (a.lines[i] != b.lines[i]) return false;
      continue;
    }
    if (a.dirty[i] == b.dirty[i] && a.owner[i] == b.owner[i] && classify(a.lines[i], a.owner[i], b.lines[i], false))
      continue;
    const std::optional<bool> idle = a.lru ? lru_idle_place(i) : idle_place(i);
    if (idle == false) return false;
    ++(idle ? idle_places : unknown);
  }
  // Only where that is all that stands in the way do the next blocks mark those lines
  // (GPT-3's feed-forward blocks touch 10^5 weight lines a timestep).
  if (unknown != 0) return wants_still_ = true, false;
  // The shadow, a fully associative LRU, remembers lines longer than a block: where the
  // blocks go on past what it held before them (DeepSeek-V3's scatter to its experts:
  // the lines of the experts before in its oldest places), it never repeats whole. But
  // no block touches a line below the deepest one a block touches (`top` places from
  // the newest), so the blocks' outcomes follow from the newest `top` places alone, and
  // below them each block pushes down the lines that went below them (`fall`), no
  // others. So where the whole shadow does not match (nor with a record beside: a
  // phase), its newest `top` places are compared, and below them `later` must hold the
  // lines that went below them in the block, then `earlier`'s own below them.
  const std::size_t na = a.shadow.size(), nb = b.shadow.size();
  const auto newest = [](const CacheSnapshot& s, std::size_t p) { return s.shadow.size() - 1 - p; };
  const std::vector<std::uint64_t> low0 = low, high0 = high, along0 = along;  // the engine's, to start again from
  const std::size_t stays0 = stay_shadow_.size(), owners0 = stay_owners.size();
  // The newest `top` places, position by position, and the lines left in place out of reach.
  const auto compare_top = [&](std::size_t top) {
    if (top > na || top > nb) return false;
    for (std::size_t p = 0; p < top; ++p) {
      const std::size_t i = newest(a, p), j = newest(b, p);
      if (a.shadow_owner[i] != b.shadow_owner[j] || !classify(a.shadow[i], a.shadow_owner[i], b.shadow[j], true))
        return false;
    }
    for (const Stay& f : stay_owners)
      if (!out_of_reach(f.line, f.owner)) return false;
    return true;
  };
  std::size_t top = nb, fall = 0;
  if (!(na == nb && compare_top(nb))) {
    if (also) return false;
    if (!still_marked_) {  // (the lines no block touches are not known)
      wants_still_ = true;
      return false;
    }
    low = low0, high = high0, along = along0, stay_shadow_.resize(stays0), stay_owners.resize(owners0);
    along_lines_->clear(), along_marked = 0;
    // The places, from the newest, down to the deepest line a block may touch (found
    // from the oldest: the lines below it are checked again below).
    top = 0;
    for (std::size_t i = 0; i < na; ++i)
      if (!idle(a.shadow[i], a.shadow_owner[i], false)) {
        top = na - i;
        break;
      }
    for (std::size_t i = 0; i < nb; ++i)
      if (!idle(b.shadow[i], b.shadow_owner[i], true)) {
        top = std::max(top, nb - i);
        break;
      }
    if (top >= nb || !compare_top(top)) return false;
    // Below `top`: the lines that went below it in the block, the last to go first
    // (lines of `earlier`'s newest places, and lines the block brought in that went
    // down within it), then `earlier`'s lines below `top` in order, as many as the
    // shadow holds. No block touches any of them (checked with the lines that move
    // along), and each block after pushes down the same lines shifted once more.
    fall = nb - top;  // where `earlier`'s lines below `top` are all gone
    if (top < na) {
      const std::uint64_t first = a.shadow[newest(a, top)];
      std::size_t p = top;
      while (p < nb && b.shadow[newest(b, p)] != first) ++p;
      if (p < nb) fall = p - top;
      else if (nb != a.lines.size()) return false;  // (gone only from a full shadow)
    }
    for (std::size_t p = top; p < nb; ++p) {
      const std::size_t j = newest(b, p);
      if (!idle(b.shadow[j], b.shadow_owner[j], true)) return false;
      if (p < top + fall ? delta_[b.shadow_owner[j]] == 0  // (shifted by the blocks after)
                         : p - fall >= na || a.shadow[newest(a, p - fall)] != b.shadow[j])
        return false;
    }
    for (std::size_t p = top; p < na; ++p)
      if (const std::size_t i = newest(a, p); !idle(a.shadow[i], a.shadow_owner[i], false)) return false;
  }
  shadow_fall_ = fall;
  shadow_top_ = top;
  idle_places_ = idle_places;
  rebuilds_ = a.lru && idle_places != 0;
  for (const std::uint64_t line : stay_) stay_lines_->test_and_set(line);
  for (const std::uint64_t line : stay_shadow_) stay_shadow_lines_->test_and_set(line);
  return true;
}

bool WarpBlock::stays(std::uint64_t line, bool shadow) const {
  return (shadow ? stay_shadow_lines_ : stay_lines_)->test(line);
}

// The counts of `blocks` blocks like a -> b, and (if tail) of tail.first -> tail.second
// once, are added: each key's shadow misses are those of the blocks it repeats, of
// which the lines `record` first touched, shifted 1 .. marks times, that were never
// seen before are cold.
void CacheModel::Impl::add_repeats(const CacheSnapshot& a, const CacheSnapshot& b, std::uint64_t n,
                                   const std::pair<const CacheSnapshot*, const CacheSnapshot*>* tail,
                                   const WarpBlock& record, std::int64_t marks) {
  const std::span<const std::int64_t> delta = record.delta();
  std::vector<std::uint64_t> cold(keys.size(), 0);
  // Block by block, each group of first touches the record logged (runs of one length
  // at a stride are one: WarpBlock::log_group), shifted: its lines not seen before are
  // cold. A group's lines are marked a bitmap word at a time: DeepSeek-V3's softmax
  // blocks record lines 4 apart, 16 to a word; Mixtral 8x22B's softmax blocks record
  // rows of 4 lines 64 apart, which cost half its instructions as runs, a page and word
  // walk each.
  if (config.three_cs && marks > 0)
    for (std::int64_t i = 1; i <= marks; ++i)
      record.each_group([&](std::uint64_t first, const FirstRun& g, std::uint64_t stride, std::uint64_t count) {
        const std::int64_t d = i * delta[g.tensor];
        const std::uint64_t at = std::uint64_t(std::int64_t(first) + d);
        if (count > 1 && first == g.last) cold[g.key] += seen.test_and_set_strided(at, stride, count);
        else if (count > 1) cold[g.key] += seen.test_and_set_rows(at, g.last - first + 1, stride, count);
        else if (first == g.last) cold[g.key] += !seen.test_and_set(at);
        else cold[g.key] += seen.test_and_set_range(at, std::uint64_t(std::int64_t(g.last) + d));
      });
  // n x (y - x), plus the tail's.
  const auto more = [&](auto field) {
    std::uint64_t v = n * (field(b) - field(a));
    if (tail) v += field(*tail->second) - field(*tail->first);
    return v;
  };
  for (std::size_t k = 0; k < keys.size(); ++k) {
    CacheTally& t = keys[k];
    t.accesses += more([&](const CacheSnapshot& s) { return s.tallies[k].accesses; });
    t.hits += more([&](const CacheSnapshot& s) { return s.tallies[k].hits; });
    t.write_throughs += more([&](const CacheSnapshot& s) { return s.tallies[k].write_throughs; });
    // Each block misses the shadow as often as the one it repeats; the cold ones of
    // those are the lines no block touched before.
    const std::uint64_t shadow_misses =
        more([&](const CacheSnapshot& s) { return s.tallies[k].cold + s.tallies[k].capacity; });
    if (cold[k] > shadow_misses) throw std::logic_error("cache warp: more cold misses than shadow misses");
    t.cold += cold[k], t.capacity += shadow_misses - cold[k];
  }
  for (std::size_t t = 0; t < writebacks.size(); ++t)
    writebacks[t] += more([&](const CacheSnapshot& s) { return s.writebacks[t]; });
}

// The engine holds `from`'s lines (or, without `from`, its own) and the shadow `shadow`'s,
// each line that moves with the blocks (not one `block` left in place) shifted `blocks` times.
void CacheModel::Impl::shift_state(const CacheSnapshot* from, const std::vector<std::uint64_t>& shadow,
                                   const std::vector<std::uint32_t>& shadow_owner, const WarpBlock& block,
                                   std::int64_t blocks, bool from_as_is) {
  const std::span<const std::int64_t> delta = block.delta();
  const auto by = [&](std::uint64_t line, std::uint32_t owner) {
    return from_as_is ? line : block.shifted(line, owner, blocks, false);
  };
  const auto move = [&](auto& engine) {
    if (from) engine.restore(*from, by);
    else engine.shift(by);
  };
  switch (kind) {
    case Kind::ordered: move(ordered); break;
    case Kind::small_lru: move(small_lru); break;
    case Kind::small_fifo: move(small_fifo); break;
    default: throw std::logic_error("CacheModel::fast_forward: the engine cannot warp");
  }
  if (config.three_cs) {
    // The newest shadow_top() places shifted (all of them where the whole shadow
    // matched: a phase's `start` may hold fewer lines than the state it matched);
    // below them, the lines that fell out of them in each block skipped (the last
    // block's first), each those of `shadow` shifted once more, then `shadow`'s own
    // below them; as many as the shadow holds.
    const std::size_t n = shadow.size(), top = std::min(block.shadow_top(), n), fall = block.shadow_fall();
    const std::size_t room = config.lines();
    std::vector<std::uint64_t> lines;  // newest first
    lines.reserve(std::min<std::uint64_t>(room, n + std::uint64_t(blocks) * fall));
    for (std::size_t p = 0; p < top; ++p)
      lines.push_back(block.shifted(shadow[n - 1 - p], shadow_owner[n - 1 - p], blocks, true));
    for (std::int64_t k = blocks; k >= 1 && fall != 0 && lines.size() < room; --k)
      for (std::size_t p = top; p < top + fall && lines.size() < room; ++p)
        lines.push_back(std::uint64_t(std::int64_t(shadow[n - 1 - p]) + k * delta[shadow_owner[n - 1 - p]]));
    for (std::size_t p = top; p < n && lines.size() < room; ++p) lines.push_back(shadow[n - 1 - p]);
    std::reverse(lines.begin(), lines.end());
    shadow_assign(lines);
  }
}

void CacheModel::fast_forward(const CacheSnapshot& a, const CacheSnapshot& b, const WarpBlock& block,
                              std::int64_t blocks) {
  Impl& m = *impl_;
  m.settle(), m.streak = {};  // the lines it held move
  m.forget_replays();
  m.add_repeats(a, b, std::uint64_t(blocks), nullptr, block, blocks);
  // The lines that move with the blocks move on; those matches() left in place stay.
  // Where idle lines differed, the engine's state is built instead.
  if (block.rebuilds()) {
    CacheSnapshot next;
    block.advance(a, b, blocks, next);
    m.shift_state(&next, b.shadow, b.shadow_owner, block, blocks, true);
    return;
  }
  m.shift_state(nullptr, b.shadow, b.shadow_owner, block, blocks);
}

void CacheModel::fast_forward_phase(const CacheSnapshot& start, const CacheSnapshot& earlier,
                                    const CacheSnapshot& later, const WarpBlock& window,
                                    const WarpBlock& previous, std::int64_t blocks) {
  Impl& m = *impl_;
  m.settle(), m.streak = {};
  m.forget_replays();
  // The rest of block b is block b - 1's from `earlier` on; blocks - 1 blocks more are
  // the window's. Block b's lines are block b - 1's shifted once (those of its part
  // simulated are seen already), the next blocks' twice and on.
  const std::pair<const CacheSnapshot*, const CacheSnapshot*> rest{&earlier, &start};
  m.add_repeats(earlier, later, std::uint64_t(blocks - 1), &rest, previous, blocks);
  // From block b's start, renamed `blocks` times: the window's renaming (what it left in
  // place stays).
  m.shift_state(&start, start.shadow, start.shadow_owner, window, blocks);
}

}  // namespace looptrace
