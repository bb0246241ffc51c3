#include "looptrace/stages/layout.hpp"

#include <algorithm>

#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

std::string rank_list(const TensorInfo& info) {
  std::string s;
  for (const auto& r : info.ranks) s += (s.empty() ? "" : ", ") + r;
  return s;
}

std::uint32_t rank_of(const TensorInfo& info, const std::string& name, const SourceLocation& where, const char* what) {
  for (std::size_t r = 0; r < info.ranks.size(); ++r)
    if (info.ranks[r] == name) return std::uint32_t(r);
  throw SpecError(where, std::string(what) + " names rank " + printable(name) + ", which tensor " + printable(info.name) +
                             " does not have (its ranks: " + rank_list(info) + ")");
}

// A permutation of the tensor's ranks, from `names` (empty: rank order).
std::vector<std::uint32_t> permutation(const TensorInfo& info, const std::vector<std::string>& names,
                                       const SourceLocation& where, const char* what) {
  std::vector<std::uint32_t> out;
  if (names.empty()) {
    for (std::uint32_t r = 0; r < info.ranks.size(); ++r) out.push_back(r);
    return out;
  }
  for (const auto& n : names) out.push_back(rank_of(info, n, where, what));
  for (std::uint32_t r = 0; r < info.ranks.size(); ++r)
    if (std::find(out.begin(), out.end(), r) == out.end())
      throw SpecError(where, std::string(what) + " of tensor " + printable(info.name) + " leaves out rank " +
                                 printable(info.ranks[r]) + " (it takes every rank: " + rank_list(info) + ")");
  return out;
}

std::uint64_t times(std::uint64_t a, std::uint64_t b, const SourceLocation& where) {
  if (b != 0 && a > (std::uint64_t(1) << 62) / b) throw SpecError(where, "the layout spans more than 2^62 elements");
  return a * b;
}

}  // namespace

TensorLayout TensorLayout::row_major(const TensorInfo& info, std::uint64_t base, std::uint64_t bytes) {
  TensorLayout l;
  l.base = base, l.bytes = bytes;
  std::vector<std::uint32_t> order;
  for (std::uint32_t r = 0; r < info.ranks.size(); ++r) order.push_back(r);
  l.finish(info, order, order, info.shape);
  return l;
}

TensorLayout TensorLayout::from_spec(const TensorInfo& info, const TensorLayoutSpec& spec, std::uint64_t bytes) {
  TensorLayout l;
  l.bytes = bytes;
  const std::vector<std::uint32_t> order = permutation(info, spec.order, spec.order_where, "order");
  const std::vector<std::uint32_t> inner = spec.block_order.empty()
                                               ? order
                                               : permutation(info, spec.block_order, spec.block_order_where, "block_order");
  std::vector<std::int64_t> padded = info.shape;
  for (const auto& [name, p] : spec.pad) {
    const std::uint32_t r = rank_of(info, name, spec.where, "pad");
    padded[r] = (padded[r] + p - 1) / p * p;
  }
  for (const auto& [name, b] : spec.block) {
    const std::uint32_t r = rank_of(info, name, spec.where, "block");
    l.block_[r] = b;
    padded[r] = (padded[r] + b - 1) / b * b;  // no partial blocks
  }
  l.finish(info, order, inner, padded);
  return l;
}

void TensorLayout::finish(const TensorInfo& info, const std::vector<std::uint32_t>& order,
                          const std::vector<std::uint32_t>& inner, const std::vector<std::int64_t>& padded) {
  if (info.ranks.size() > kMaxLayoutRanks) throw SpecError("tensor " + printable(info.name) + " has more than 16 ranks");
  ranks_ = std::uint32_t(info.ranks.size());
  const SourceLocation nowhere;
  for (std::uint32_t r = 0; r < ranks_; ++r) {
    shape_[r] = std::max<std::int64_t>(info.shape[r], 1);
    if (block_[r] == 0) block_[r] = 1;
  }
  std::uint64_t stride = 1;  // inside a block: block_order, innermost last
  for (auto r = inner.rbegin(); r != inner.rend(); ++r) inner_[*r] = stride, stride = times(stride, std::uint64_t(block_[*r]), nowhere);
  for (auto r = order.rbegin(); r != order.rend(); ++r)
    outer_[*r] = stride, stride = times(stride, std::uint64_t(padded[*r] / block_[*r]), nowhere);
  span_ = ranks_ == 0 ? 1 : stride;
  digits_.clear();
  for (std::uint32_t r : order)
    if (padded[r] / block_[r] > 1) digits_.push_back({r, false, padded[r] / block_[r], outer_[r]});
  for (std::uint32_t r : inner)
    if (block_[r] > 1) digits_.push_back({r, true, block_[r], inner_[r]});
  // Element order is address order when the digits are the ranks in rank order, unpadded.
  identity_ = true;
  for (std::uint32_t r = 0; r < ranks_; ++r)
    if (block_[r] != 1 || padded[r] != info.shape[r] || outer_[r] != std::uint64_t(info.strides[r])) identity_ = false;
}

void check_layout_names(const Schedule& s, const LayoutSpec& layout) {
  for (const auto& t : layout.tensors)
    if (s.find_tensor(t.tensor) < 0) {
      std::string known;
      for (const auto& x : s.tensors) known += (known.empty() ? "" : ", ") + x.name;
      throw SpecError(t.where, "the layout names tensor " + printable(t.tensor) + ", which the workload does not have (" +
                                   known + ")");
    }
  for (const auto& [level, where] : layout.levels)
    if (std::find(s.memory_levels.begin(), s.memory_levels.end(), level) == s.memory_levels.end() &&
        !s.memory(level)) {  // an arch !Memory without a Storage node is no typo: nothing moves there
      std::string known;
      for (const auto& l : s.memory_levels) known += (known.empty() ? "" : ", ") + l;
      throw SpecError(where, "the layout names level " + printable(level) +
                                 ", which no Storage node and no arch !Memory has (levels: " + known + ")");
    }
}

AddressMap AddressMap::make(const Schedule& s, const std::vector<std::string>& order, std::uint64_t align) {
  return make(s, order, align, nullptr, "");
}

AddressMap AddressMap::make(const Schedule& s, const std::vector<std::string>& order, std::uint64_t align,
                            const LayoutSpec* layout, const std::string& level) {
  if (align == 0) throw SpecError("--align must be at least 1 byte");
  if (layout) check_layout_names(s, *layout);
  AddressMap m;
  m.base.assign(s.tensors.size(), 0);
  m.bytes.assign(s.tensors.size(), 1);
  for (const TensorInfo& info : s.tensors) m.layouts.push_back(TensorLayout::row_major(info, 0, 1));
  std::vector<SourceLocation> explicit_base(s.tensors.size());
  std::vector<std::uint8_t>& placed = m.placed;
  placed.assign(s.tensors.size(), 0);
  const std::uint64_t file_align = layout && layout->align ? *layout->align : align;
  std::uint64_t next = 0;
  for (const auto& name : order) {
    const int t = s.find_tensor(name);
    if (t < 0) continue;
    const TensorInfo& info = s.tensors[std::size_t(t)];
    const std::uint64_t bytes = std::max<std::uint64_t>(info.bits_per_value ? std::uint64_t((*info.bits_per_value + 7) / 8) : 1, 1);
    const auto spec = layout ? layout->find(info.name, info.ranks, level) : std::nullopt;
    TensorLayout l = spec ? TensorLayout::from_spec(info, *spec, bytes) : TensorLayout::row_major(info, 0, bytes);
    const std::uint64_t a = spec && spec->align ? *spec->align : file_align;
    if (spec && spec->base) {
      l.base = *spec->base;
      explicit_base[std::size_t(t)] = spec->base_where;
    } else {
      l.base = (next + a - 1) / a * a;
    }
    next = l.end();
    m.base[std::size_t(t)] = l.base;
    m.bytes[std::size_t(t)] = bytes;
    m.layouts[std::size_t(t)] = std::move(l);
    placed[std::size_t(t)] = 1;
  }
  // Two tensors on one address: only an explicit base can do that.
  for (std::size_t a = 0; a < s.tensors.size(); ++a)
    for (std::size_t b = 0; b < s.tensors.size(); ++b) {
      if (a == b || !placed[a] || !placed[b] || explicit_base[a].line == 0) continue;
      if (explicit_base[b].line > explicit_base[a].line) continue;  // name the later of two bases
      const TensorLayout &x = m.layouts[a], &y = m.layouts[b];
      if (x.base < y.end() && y.base < x.end())
        throw SpecError(explicit_base[a], "tensor " + printable(s.tensors[a].name) + " at its base overlaps tensor " +
                                              printable(s.tensors[b].name) + " (at " + std::to_string(y.base) + " to " +
                                              std::to_string(y.end()) + ")");
    }
  return m;
}

}  // namespace looptrace
