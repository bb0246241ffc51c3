#include "looptrace/stages/transfers.hpp"

#include <algorithm>
#include <bit>

#include "looptrace/error.hpp"

namespace looptrace {

void check_transfer_options(const TransferOptions& o) {
  if (!std::has_single_bit(o.line_bytes))
    throw SpecError("--line-bytes takes a power of two (a DRAM line or burst), not " + std::to_string(o.line_bytes));
  // Alignments are powers of two (pages, rows, lines): --align 3 would place tensors
  // at addresses no memory system aligns to.
  if (!std::has_single_bit(o.align))
    throw SpecError("--align takes a power of two (bytes each tensor's start is a multiple of), not " +
                    std::to_string(o.align));
}

AddressMap AddressMap::make(const Schedule& s, const std::vector<std::string>& order, std::uint64_t align) {
  if (align == 0) throw SpecError("--align must be at least 1 byte");
  AddressMap m;
  m.base.assign(s.tensors.size(), 0);
  m.bytes.assign(s.tensors.size(), 1);
  std::uint64_t next = 0;
  for (const auto& name : order) {
    const int t = s.find_tensor(name);
    if (t < 0) continue;
    const TensorInfo& info = s.tensors[std::size_t(t)];
    const std::uint64_t bytes = info.bits_per_value ? std::uint64_t((*info.bits_per_value + 7) / 8) : 1;
    next = (next + align - 1) / align * align;
    m.base[std::size_t(t)] = next;
    m.bytes[std::size_t(t)] = std::max<std::uint64_t>(bytes, 1);
    next += std::uint64_t(info.size) * m.bytes[std::size_t(t)];
  }
  return m;
}

std::vector<std::string> traced_tensors(const Schedule& s, const StreamContext& context) {
  std::vector<std::string> order;
  for (std::size_t i = 0; i < s.traces.size(); ++i)
    if (context.traced(i) && std::find(order.begin(), order.end(), s.traces[i].tensor) == order.end())
      order.push_back(s.traces[i].tensor);
  return order;
}

std::vector<std::uint32_t> children_of(const Schedule& s, const std::string& level,
                                       const std::vector<std::string>& tensors) {
  if (std::find(s.memory_levels.begin(), s.memory_levels.end(), level) == s.memory_levels.end()) {
    std::string known;
    for (const auto& l : s.memory_levels) known += (known.empty() ? "" : ", ") + l;
    throw SpecError("--level names '" + level + "', which no Storage node has (levels: " + known + ")");
  }
  std::vector<std::uint32_t> out;
  for (std::size_t n = 0; n < s.storages.size(); ++n)
    for (const auto& t : s.storages[n].tensors) {
      if (!tensors.empty() && std::find(tensors.begin(), tensors.end(), t) == tensors.end()) continue;
      const int p = s.parent(n, t);
      if (p >= 0 && s.storages[std::size_t(p)].level == level) {
        out.push_back(std::uint32_t(n));
        break;
      }
    }
  return out;
}

TimeRange transfer_trace_window(const Schedule& s, const std::vector<std::uint32_t>& children, TimeRange report) {
  TimeRange run = report;
  if (report.empty()) return run;
  for (std::uint32_t c : children) {
    const StorageWindows& node = s.storages[c];
    if (node.duration <= 0) continue;
    // The window holding `report.from` or ending there (its drains are at `from`), and
    // the one holding `report.to - 1`.
    TimeOdometer starts = node.starts();
    starts.seek(report.from - node.duration);
    if (!starts.done() && starts.time() <= report.from) run.from = std::min(run.from, starts.time());
    starts.seek(report.to - node.duration);
    if (!starts.done() && starts.time() < report.to) run.to = std::max(run.to, starts.time() + node.duration);
  }
  return run;
}

}  // namespace looptrace
