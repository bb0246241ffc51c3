#include "looptrace/stages/window_traffic.hpp"

#include <algorithm>

namespace looptrace {

namespace {
// Tensors of up to this many pages have a page table; larger ones a hash table.
constexpr std::int64_t kMaxPages = std::int64_t(1) << 20;  // a 4 MiB page table at most

std::size_t hash_slot(std::int64_t element, std::size_t mask) {
  return std::size_t((std::uint64_t(element) * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}
}  // namespace

TileSet::TileSet(std::int64_t tensor_size) {
  const std::int64_t n_pages = (std::max<std::int64_t>(tensor_size, 1) + kPage - 1) / kPage;
  paged_ = n_pages <= kMaxPages;
  if (paged_) pages_.assign(std::size_t(n_pages), -1);
  else rehash(1024);
}

std::int32_t TileSet::take_page(std::size_t p) {
  std::int32_t page;
  if (!free_pages_.empty()) {
    page = free_pages_.back();  // zeroed when it was given back
    free_pages_.pop_back();
  } else {
    page = std::int32_t(arena_.size() / std::size_t(kPage));
    arena_.resize(arena_.size() + std::size_t(kPage), 0);
  }
  pages_[p] = page;
  window_pages_.push_back(p);
  return page;
}

void TileSet::rehash(std::size_t capacity) {
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, 0);
  mask_ = capacity - 1;
}

std::uint8_t& TileSet::hashed(std::int64_t element) {
  if ((touched_.size() + 1) * 2 > keys_.size()) {  // keep the load under one half
    std::vector<std::uint8_t> states;
    for (std::int64_t e : touched_) states.push_back(hashed_find(e));
    rehash(keys_.size() * 2);
    for (std::size_t i = 0; i < touched_.size(); ++i) insert(touched_[i]) = states[i];
  }
  return insert(element);
}

std::uint8_t TileSet::hashed_find(std::int64_t element) const {
  const std::size_t i = find_slot(element);
  return keys_[i] == element ? values_[i] : 0;
}

std::uint8_t& TileSet::insert(std::int64_t element) {
  const std::size_t i = find_slot(element);
  keys_[i] = element;
  return values_[i];
}

std::size_t TileSet::find_slot(std::int64_t element) const {
  std::size_t i = hash_slot(element, mask_);
  while (keys_[i] != element && keys_[i] != kEmpty) i = (i + 1) & mask_;
  return i;
}

TileSet::Tally TileSet::close(std::vector<std::int64_t>* filled, std::vector<std::int64_t>* drained) {
  Tally t;
  t.tile = std::int64_t(touched_.size());
  if (filled) filled->clear();
  if (drained) drained->clear();
  slots_.clear();
  for (std::int64_t e : touched_) {
    std::uint8_t* s;
    if (paged_) {
      s = &state(e);
    } else {
      slots_.push_back(find_slot(e));
      s = &values_[slots_.back()];
    }
    if (*s & kReadFirst) {
      ++t.fills;
      if (filled) filled->push_back(e);
    }
    if (*s & kWritten) {
      ++t.drains;
      if (drained) drained->push_back(e);
    }
    *s = 0;
  }
  // Hashed: every key leaves the table, so probe chains may be cut: slots were found
  // first. Paged: the pages, zero again, go back to the pool.
  for (std::size_t at : slots_) keys_[at] = kEmpty;
  for (std::size_t p : window_pages_) free_pages_.push_back(pages_[p]), pages_[p] = -1;
  window_pages_.clear();
  touched_.clear();
  if (filled) std::sort(filled->begin(), filled->end());
  if (drained) std::sort(drained->begin(), drained->end());
  return t;
}

TrafficPlan TrafficPlan::make(const Schedule& s, const std::vector<std::uint32_t>& storages,
                              const std::vector<std::string>& tensors) {
  auto traced = [&](const std::string& t) {
    return tensors.empty() || std::find(tensors.begin(), tensors.end(), t) != tensors.end();
  };
  TrafficPlan plan;
  plan.slots_of_storage.assign(s.storages.size(), {});
  std::vector<bool> tracked(s.storages.size(), false);
  for (std::uint32_t st : storages) {
    tracked[st] = true;
    for (const auto& name : s.storages[st].tensors) {
      const int tensor = s.find_tensor(name);
      if (tensor < 0 || !traced(name)) continue;  // held, but no Einsum traces it
      plan.slots_of_storage[st].push_back(int(plan.slots.size()));
      plan.slots.push_back({st, std::uint32_t(tensor)});
    }
  }
  auto slot_of = [&](int storage, int tensor) {
    for (int k : plan.slots_of_storage[std::size_t(storage)])
      if (plan.slots[std::size_t(k)].tensor == std::uint32_t(tensor)) return k;
    return -1;
  };
  std::vector<bool> read(s.tensors.size(), false), written(s.tensors.size(), false);
  for (std::size_t t = 0; t < s.traces.size(); ++t) {
    const TraceInfo& trace = s.traces[t];
    plan.writes.push_back(trace.is_output);
    (trace.is_output ? written : read)[std::size_t(trace.tensor_index)] = true;
    std::vector<int> chain;
    if (traced(trace.tensor))
      for (int h = s.holder(t); h >= 0; h = s.parent(std::size_t(h), trace.tensor))
        if (tracked[std::size_t(h)]) chain.push_back(slot_of(h, trace.tensor_index));
    plan.chain.push_back(std::move(chain));
  }
  for (std::size_t x = 0; x < s.tensors.size(); ++x)
    plan.reads_and_writes_meet = plan.reads_and_writes_meet || (read[x] && written[x]);
  return plan;
}

}  // namespace looptrace
