// Stage 2: a k-way merge of leaf sources into global time order. Fused and pipelined
// leaves interleave; at one timestep leaves come in tree order. A leaf keeps the turn
// for as long as it stays first, so unfused schedules cost no comparison per timestep.
#pragma once

#include <cstdint>
#include <vector>

#include "looptrace/stages/leaf_source.hpp"
#include "looptrace/stages/time_selection.hpp"

namespace looptrace {

class MergeByTime {
 public:
  MergeByTime(std::vector<LeafSource> leaves, TimeSelection selection)
      : leaves_(std::move(leaves)), selection_(std::move(selection)) {
    enter_range();
  }

  // Visits the next run of (leaf, timestep) in time order: visit(LeafSource&) once per
  // timestep of one leaf, as long as that leaf stays first and visit returns true.
  // Returns false when the trace is done.
  template <class Visit>
  bool pump(Visit&& visit) {
    for (;;) {
      if (range_ >= selection_.ranges.size()) return false;
      const std::int64_t to = selection_.ranges[range_].to;
      std::size_t best = leaves_.size();
      std::int64_t best_t = to, bound_t = to;
      std::size_t bound_i = leaves_.size();
      for (std::size_t i = 0; i < leaves_.size(); ++i) {
        const LeafSource& l = leaves_[i];
        if (l.done() || l.timestep() >= to) continue;
        if (l.timestep() < best_t) {
          bound_t = best_t, bound_i = best;
          best_t = l.timestep(), best = i;
        } else if (l.timestep() < bound_t) {
          bound_t = l.timestep(), bound_i = i;
        }
      }
      if (best == leaves_.size()) {
        ++range_;
        enter_range();
        continue;
      }
      // Leaf `best` goes first while it is before (bound_t, bound_i).
      LeafSource& l = leaves_[best];
      const std::int64_t limit = std::min(bound_t, to);
      bool go;
      do {
        go = visit(l);
        l.advance();
      } while (go && !l.done() && (l.timestep() < limit || (l.timestep() == bound_t &&
                                                      bound_t < to && best < bound_i)));
      return true;
    }
  }

  std::vector<LeafSource>& leaves() { return leaves_; }
  const TimeSelection& selection() const { return selection_; }

 private:
  void enter_range() {
    if (range_ >= selection_.ranges.size()) return;
    for (auto& l : leaves_) l.seek(selection_.ranges[range_].from);
  }

  std::vector<LeafSource> leaves_;
  TimeSelection selection_;
  std::size_t range_ = 0;
};

}  // namespace looptrace
