#include "looptrace/stages/cache_lines.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "looptrace/stages/transfers.hpp"

namespace looptrace {

AddressMap default_address_map(const Schedule& s, const StreamContext& context, std::uint64_t align,
                               const LayoutSpec* layout, const std::string& level) {
  return AddressMap::make(s, traced_tensors(s, context), align, layout, level);
}

TimestepLines::TimestepLines(const Schedule& s, AddressMap map, std::uint64_t line_bytes, bool runs)
    : map_(std::move(map)), shift_(unsigned(std::countr_zero(line_bytes))), runs_(runs) {
  for (const TraceInfo& t : s.traces) {
    tensor_.push_back(std::uint32_t(t.tensor_index));
    output_.push_back(t.is_output ? 1 : 0);
  }
  memo_.resize(s.traces.size()), last_.resize(s.traces.size());
}

void TimestepLines::take(std::span<const AccessRecord> records, LineBuffer& out) {
  groups(records, false, out);
}

void TimestepLines::end_timestep(LineBuffer& out) {
  // Leaves merged by time come in tree order, so this sort only guards the contract.
  const auto by_trace = [](const AccessRecord& a, const AccessRecord& b) { return a.trace < b.trace; };
  if (!std::is_sorted(writes_.begin(), writes_.end(), by_trace))
    std::stable_sort(writes_.begin(), writes_.end(), by_trace);
  groups(writes_, true, out);
  writes_.clear();
}

// Each trace's run of records: its lines now, or (a write, before the timestep is
// over) kept for end_timestep().
void TimestepLines::groups(std::span<const AccessRecord> records, bool writes, LineBuffer& out) {
  std::size_t begin = 0;
  while (begin < records.size()) {
    std::size_t end = begin + 1;
    const std::uint32_t trace = records[begin].trace;
    while (end < records.size() && records[end].trace == trace) ++end;
    const auto run = records.subspan(begin, end - begin);
    if (output_[trace] && !writes) writes_.insert(writes_.end(), run.begin(), run.end());
    else group(run, output_[trace] != 0, out);
    begin = end;
  }
}

// A group's lines are a function of its records (their elements and multiplicities) and
// nothing else but its timestep: where a trace's group repeats its previous one (a weight
// tile a register holds while tokens stream past it, read again at every timestep),
// its lines are that group's, copied at the new timestep. A trace whose groups differ
// twice in a row (a row that moves on) is not remembered for the next 64 groups, and a
// group of more than kMemoLines lines never is: the memory follows a few tiles.
void TimestepLines::group(std::span<const AccessRecord> records, bool write, LineBuffer& out) {
  const std::uint32_t trace = records.front().trace;
  Memo& m = memo_[trace];
  const std::int64_t t = records.front().timestep;
  if (m.skip != 0) {
    --m.skip;
    const std::size_t at = out.size();
    make_lines(records, write, out);
    return last_group(trace, at, out, t);
  }
  if (records.size() == m.records.size() &&
      std::equal(records.begin(), records.end(), m.records.begin(), [t](const AccessRecord& r, const Memo::Run& k) {
        return r.element == k.element && r.multiplicity == k.multiplicity && r.timestep == t;
      })) {
    const std::size_t at = out.size(), n = m.lines.size();
    out.resize(at + n, boost::container::default_init);
    // A line's 32 bytes copied as such (two moves of 16 on SSE2), then its timestep: as
    // a struct, field by field, it cost 11 instructions (Mixtral 8x22B's weight tiles,
    // 512 lines a timestep).
    LineAccess* o = out.data() + at;
    const LineAccess* from = m.lines.data();
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(static_cast<void*>(o + i), from + i, sizeof(LineAccess));
      o[i].timestep = t;
    }
    last_group(trace, at, out, t, &m.timestep);
    m.misses = 0, m.timestep = t;
    return;
  }
  const std::size_t at = out.size();
  make_lines(records, write, out);
  last_group(trace, at, out, t);
  if (++m.misses >= 2 || out.size() - at > kMemoLines) {
    m.skip = m.misses >= 2 ? 64 : 0, m.misses = 0;
    m.records.clear(), m.lines.clear();
    return;
  }
  m.records.resize(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) m.records[i] = {records[i].element, records[i].multiplicity};
  m.lines.assign(out.begin() + std::ptrdiff_t(at), out.end());
  m.timestep = t;
}

// The trace's group at timestep t is out[at, out.size()): where its previous group is
// in this batch too, and its lines are those, one for one (an output row written
// again at each timestep of a loop its tile does not move with: DeepSeek-V3's scores,
// a row of 128 lines at each of four heads), it is a repeat. The first line that
// differs ends the compare; a trace whose groups differ twice in a row is not compared
// for its next 64 (a row that moves on: DeepSeek-V3's softmax).
// `copied_from`: the group is the memo's lines, copied, of that timestep (a repeat
// known without a compare, which counts as one that matched).
void TimestepLines::last_group(std::uint32_t trace, std::size_t at, const LineBuffer& out, std::int64_t t,
                               const std::int64_t* copied_from) {
  Last& l = last_[trace];
  const std::size_t n = out.size() - at;
  if (copied_from) repeated_.push_back({at, at + n, *copied_from});
  if (l.skip != 0) {
    --l.skip;
  } else if (l.batch == batch_ && l.n == n && l.timestep < t) {
    bool same = copied_from != nullptr;
    if (!same) {
      const LineAccess* a = out.data() + at;
      const LineAccess* b = out.data() + l.at;
      std::size_t i = 0;
      while (i < n && a[i].line == b[i].line && a[i].write == b[i].write) ++i;
      if ((same = i == n)) repeated_.push_back({at, at + n, l.timestep});
    }
    if (same) l.misses = 0;
    else if (++l.misses >= 2) l.skip = 64, l.misses = 0;  // a row that moves on: not compared for a while
  }
  l.at = at, l.n = n, l.timestep = t, l.batch = batch_;
}

// The lines of one trace's accesses at one timestep, each once. With the default
// layout they ascend, so comparing with the last line suffices; the set is for
// layouts that do not keep element order.
void TimestepLines::make_lines(std::span<const AccessRecord> records, bool write, LineBuffer& out) {
  const std::uint32_t trace = records.front().trace, tensor = tensor_[trace];
  const std::uint64_t bytes = map_.bytes[tensor];
  bool ascending = true;
  std::uint64_t next = 0;  // while ascending: the line after the last one given
  const std::size_t given = out.size();  // while ascending, the group's lines are out's from here
  // The lines of bytes [a, b] not given yet in this group. Inlined: called once per run
  // of elements, most of them within the line given last (DeepSeek-V3's scores: a call
  // cost about 40 instructions, 14% of a window's, before it was inlined).
  const auto take = [&](std::int64_t timestep, std::uint64_t a, std::uint64_t b) __attribute__((always_inline)) {
    const std::uint64_t first = a >> shift_, last = b >> shift_;
    if (ascending && last + 1 == next) return;  // within the last line given (the common case)
    if (ascending && first + 1 >= next) {  // still ascending: the lines from `next` on, in a row
      const std::uint64_t from = std::max(first, next);
      const std::size_t at = out.size(), n = std::size_t(last + 1 - from);
      out.resize(at + n, boost::container::default_init);  // then written in a loop, no check per line
      LineAccess* o = out.data() + at;
      for (std::size_t i = 0; i < n; ++i) o[i] = {timestep, from + i, trace, tensor, write};
      next = last + 1;
      return;
    }
    for (std::uint64_t l = first; l <= last; ++l) {
      if (ascending) {
        if (l + 1 == next) continue;  // the last line again
        if (l >= next) {
          next = l + 1;
          out.push_back({timestep, l, trace, tensor, write});
          continue;
        }
        // Below the last line: the order breaks; from here on, a set of the lines given.
        ascending = false;
        if (++gen_ == 0) std::fill(set_gen_.begin(), set_gen_.end(), 0), gen_ = 1;
        set_size_ = 0;
        for (std::size_t i = given; i < out.size(); ++i) seen_in_group(out[i].line);
      }
      if (!seen_in_group(l)) out.push_back({timestep, l, trace, tensor, write});
    }
  };
  if (!runs_) {
    for (const AccessRecord& r : records) {
      const std::uint64_t a = element_address(map_, tensor, r.element);
      take(r.timestep, a, a + bytes - 1);
    }
  } else if (map_.layouts[tensor].identity()) {
    // A run of elements in address order is one range of bytes: its lines at once.
    const std::uint64_t base = map_.layouts[tensor].base;
    for (const AccessRecord& r : records) {
      const std::uint64_t a = base + std::uint64_t(r.element) * bytes;
      take(r.timestep, a, a + std::uint64_t(r.multiplicity) * bytes - 1);
    }
  } else {
    for (const AccessRecord& r : records)
      for (std::int64_t e = r.element; e < r.element + std::int64_t(r.multiplicity); ++e) {
        const std::uint64_t a = element_address(map_, tensor, e);
        take(r.timestep, a, a + bytes - 1);
      }
  }
}

// Whether `line` is in the group's set; adds it if not.
bool TimestepLines::seen_in_group(std::uint64_t line) {
  if (2 * (set_size_ + 1) > set_lines_.size()) {  // grow, keeping this generation's lines
    std::vector<std::uint64_t> old;
    for (std::size_t i = 0; i < set_lines_.size(); ++i)
      if (set_gen_[i] == gen_) old.push_back(set_lines_[i]);
    set_lines_.assign(std::max<std::size_t>(64, 4 * set_lines_.size()), 0);
    set_gen_.assign(set_lines_.size(), 0);
    set_size_ = 0;
    for (std::uint64_t l : old) seen_in_group(l);
  }
  const std::size_t mask = set_lines_.size() - 1;
  for (std::size_t i = (line * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    if (set_gen_[i] != gen_) {
      set_gen_[i] = gen_, set_lines_[i] = line, ++set_size_;
      return false;
    }
    if (set_lines_[i] == line) return true;
  }
}

}  // namespace looptrace
