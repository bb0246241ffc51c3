#include "looptrace/closed_form/window_runs.hpp"

#include <algorithm>

#include "looptrace/compile/window_walk.hpp"

namespace looptrace {

namespace {

WindowRun single(const TimeRange& w) { return {w.from, w.to - w.from, 0, 1}; }

// The run without its first `n` windows.
WindowRun drop_front(const WindowRun& r, std::int64_t n) {
  const std::int64_t left = r.count - n;
  return {r.start + n * r.period, r.length, left > 1 ? r.period : 0, left};
}

// The index of window `w` in run `r`, or -1.
std::int64_t index_of(const WindowRun& r, const TimeRange& w) {
  if (w.to - w.from != r.length || w.from < r.start) return -1;
  if (r.count == 1) return w.from == r.start ? 0 : -1;
  const std::int64_t d = w.from - r.start;
  if (d % r.period != 0 || d / r.period >= r.count) return -1;
  return d / r.period;
}

}  // namespace

void RunBuilder::add(const TimeRange& w) {
  if (open_.count > 0) {
    const TimeRange last = open_.last();
    if (w == last) return;
    if (w.to - w.from == open_.length) {
      if (open_.count == 1) {
        open_.period = w.from - open_.start;
        open_.count = 2;
        return;
      }
      if (w.from - last.from == open_.period) {
        ++open_.count;
        return;
      }
    }
    done_.push_back(open_);
  }
  open_ = single(w);
}

void RunBuilder::add(const WindowRun& r) {
  if (r.count <= 0) return;
  if (r.count == 1) return add(r.first());
  if (open_.count > 0 && open_.last() == r.first()) return add(drop_front(r, 1));
  add(r.first());
  // The second window of r joins a run that r's first window started, with r's
  // period; it joins an older run only when the periods agree; else it starts one.
  if (open_.count == 1) {
    open_ = r;
  } else if (open_.period == r.period) {
    open_.count += r.count - 1;
  } else {
    done_.push_back(open_);
    open_ = drop_front(r, 1);
  }
}

std::vector<WindowRun> RunBuilder::finish() {
  if (open_.count > 0) done_.push_back(open_);
  open_ = {};
  return std::move(done_);
}

std::vector<TimeRange> expand(const std::vector<WindowRun>& runs) {
  std::vector<TimeRange> out;
  for (const auto& r : runs)
    for (std::int64_t i = 0; i < r.count; ++i) out.push_back(r.at(i));
  return out;
}

std::int64_t window_count(const std::vector<WindowRun>& runs) {
  std::int64_t n = 0;
  for (const auto& r : runs) n += r.count;
  return n;
}

std::vector<WindowRun> merge_runs(const std::vector<std::vector<WindowRun>>& lists) {
  struct Cursor {
    const std::vector<WindowRun>* runs;
    std::size_t run = 0;
    std::int64_t offset = 0;  // windows of runs[run] already taken
    bool done() const { return run >= runs->size(); }
    TimeRange head() const { return (*runs)[run].at(offset); }
  };
  std::vector<Cursor> cursors;
  for (const auto& l : lists)
    if (!l.empty()) cursors.push_back({&l});
  RunBuilder out;
  for (;;) {
    Cursor* min = nullptr;
    for (auto& c : cursors)
      if (!c.done() && (!min || c.head() < min->head())) min = &c;
    if (!min) break;
    const Cursor* next = nullptr;  // the smallest head of the others
    for (const auto& c : cursors)
      if (&c != min && !c.done() && (!next || c.head() < next->head())) next = &c;
    const WindowRun& r = (*min->runs)[min->run];
    const std::int64_t remaining = r.count - min->offset;
    std::int64_t n = remaining;
    if (next && remaining > 1) {  // the windows that come no later than the other head
      const TimeRange o = next->head();
      const std::int64_t s = r.start + min->offset * r.period;
      std::int64_t i = (o.from - s) / r.period;
      if (s + i * r.period == o.from && r.length > o.to - o.from) --i;
      n = std::clamp<std::int64_t>(i + 1, 1, remaining);
    }
    WindowRun part = drop_front(r, min->offset);
    part.count = n;
    if (n == 1) part.period = 0;
    out.add(part);
    min->offset += n;
    if (min->offset == r.count) ++min->run, min->offset = 0;
  }
  return out.finish();
}

void remove_window(std::vector<WindowRun>& runs, const TimeRange& w) {
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const WindowRun r = runs[k];
    const std::int64_t i = index_of(r, w);
    if (i < 0) continue;
    std::vector<WindowRun> parts;
    if (i > 0) parts.push_back({r.start, r.length, i > 1 ? r.period : 0, i});
    if (i + 1 < r.count) parts.push_back(drop_front(r, i + 1));
    runs.erase(runs.begin() + std::ptrdiff_t(k));
    runs.insert(runs.begin() + std::ptrdiff_t(k), parts.begin(), parts.end());
    return;
  }
}

bool holds_window(const std::vector<WindowRun>& runs, const TimeRange& w) {
  return std::any_of(runs.begin(), runs.end(), [&](const WindowRun& r) { return index_of(r, w) >= 0; });
}

void storage_window_runs(const StorageWindows& storage, const TimeRange& sel,
                         std::vector<WindowRun>& runs, std::vector<TimeRange>& cut) {
  const std::int64_t d = storage.duration;
  // Offsets do not depend on the digits: fold them into the base. Loops of one
  // iteration add nothing. A loop whose period is its inner loop's whole span continues
  // that loop's progression: fold the two into one.
  std::int64_t base = storage.time_base;
  std::vector<TimeLevel> levels;
  for (const auto& l : storage.time_levels) {
    base += l.offset;
    if (l.count > 1) levels.push_back({l.count, l.period, 0});
  }
  for (std::size_t k = levels.size(); k-- > 1;)
    if (levels[k - 1].period == levels[k].count * levels[k].period) {
      levels[k - 1] = {levels[k - 1].count * levels[k].count, levels[k].period, 0};
      levels.erase(levels.begin() + std::ptrdiff_t(k));
    }
  const TimeLevel inner = levels.empty() ? TimeLevel{1, 1, 0} : levels.back();
  WindowWalk walk(TimeOdometer(base, levels), d, sel);
  while (!walk.done()) {
    const std::int64_t j0 = levels.empty() ? 0 : walk.starts().digit(levels.size() - 1);
    const std::int64_t remaining = inner.count - j0, s0 = walk.start(), p = inner.period;
    const std::int64_t n = std::min(remaining, (sel.to - 1 - s0) / p + 1);  // starting before `to`
    std::int64_t lo = 0, hi = n;
    WindowRun tail{};
    if (s0 < sel.from) {  // clipped at `from` (and maybe at `to`)
      cut.push_back({s0, s0 + d});
      runs.push_back(single(walk.window()));
      lo = 1;
    }
    if (hi > lo && s0 + (hi - 1) * p + d > sel.to) {  // the last one is clipped at `to`
      const std::int64_t s = s0 + (hi - 1) * p;
      cut.push_back({s, s + d});
      tail = single(intersect(TimeRange{s, s + d}, sel));
      --hi;
    }
    if (hi > lo) runs.push_back({s0 + lo * p, d, hi - lo > 1 ? p : 0, hi - lo});
    if (tail.count > 0) runs.push_back(tail);
    if (n < remaining) break;  // the rest starts at or after `to`
    walk.advance_innermost(remaining);
  }
}

}  // namespace looptrace
