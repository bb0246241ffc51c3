#include "looptrace/stages/tile_windows.hpp"

#include <algorithm>

#include "looptrace/support/error.hpp"

namespace looptrace {

WindowPlan WindowPlan::make(const Schedule& s, const std::string& level,
                            const std::vector<std::string>& tensors) {
  if (!level.empty() && std::find(s.memory_levels.begin(), s.memory_levels.end(), level) == s.memory_levels.end()) {
    std::string known;
    for (const auto& l : s.memory_levels) known += (known.empty() ? "" : ", ") + l;
    throw SpecError("no Storage node is at memory level '" + level + "' (levels: " + known + ")");
  }
  auto traced = [&](const std::string& t) {
    return tensors.empty() || std::find(tensors.begin(), tensors.end(), t) != tensors.end();
  };
  WindowPlan plan;
  plan.tensors = tensors;
  for (std::size_t i = 0; i < s.storages.size(); ++i) {
    const StorageWindows& st = s.storages[i];
    if (!level.empty() && st.level != level) continue;
    if (std::any_of(st.tensors.begin(), st.tensors.end(), traced)) plan.storages.push_back(std::uint32_t(i));
  }
  for (std::size_t t = 0; t < s.traces.size(); ++t)
    plan.holder.push_back(traced(s.traces[t].tensor) ? s.holder(t, level) : -1);
  return plan;
}

WindowPlan WindowPlan::of(const Schedule& s, std::vector<std::uint32_t> storages,
                          const std::vector<std::string>& tensors) {
  auto traced = [&](const std::string& t) {
    return tensors.empty() || std::find(tensors.begin(), tensors.end(), t) != tensors.end();
  };
  std::sort(storages.begin(), storages.end());
  storages.erase(std::unique(storages.begin(), storages.end()), storages.end());
  WindowPlan plan;
  plan.storages = storages;
  plan.tensors = tensors;
  for (std::size_t t = 0; t < s.traces.size(); ++t) {
    int h = traced(s.traces[t].tensor) ? s.holder(t) : -1;
    while (h >= 0 && !std::binary_search(storages.begin(), storages.end(), std::uint32_t(h)))
      h = s.parent(std::size_t(h), s.traces[t].tensor);
    plan.holder.push_back(h);
  }
  return plan;
}

WindowCursor::WindowCursor(const Schedule& schedule, std::uint32_t storage, TimeRange clip)
    : storage_(storage), walk_(schedule.storages[storage].starts(), schedule.storages[storage].duration, clip) {
  find_next();
}

void WindowCursor::find_next() { next_start_ = walk_.done() ? kEndOfTime : walk_.window().from; }

void WindowCursor::open() {
  current_ = walk_.window();
  open_ = true;
}

void WindowCursor::close() {
  open_ = false;
  walk_.advance();
  find_next();
}

}  // namespace looptrace
