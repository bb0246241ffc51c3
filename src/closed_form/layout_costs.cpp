// add_layout_costs: each parent level's transfer trace, counted per fill and drain.
#include <algorithm>

#include "closed_form/movement_boxes.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace {

namespace {

namespace mb = movement_boxes;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

TensorLayoutCost& cost_of(LevelLayoutCost& c, const std::string& tensor) {
  for (auto& t : c.tensors)
    if (t.tensor == tensor) return t;
  c.tensors.push_back({});
  c.tensors.back().tensor = tensor;
  return c.tensors.back();
}

// The requests of one timestep, per fill or drain (child, tensor, op) and per bank.
class TimestepBanks {
 public:
  TimestepBanks(const Schedule& s, LevelLayoutCost& cost) : s_(s), cost_(cost) {
    banks_ = std::max<std::int64_t>(cost.banks, 1);
    bank_bytes_ = cost.bank_bytes > 0 ? cost.bank_bytes : cost.line_bytes;
    per_bank_.assign(std::size_t(banks_), 0);
  }
  void add(const TransferRequest& r) {
    if (r.timestep != now_) flush(r.timestep);
    std::size_t g = 0;
    while (g < keys_.size() && !(keys_[g].child == r.child && keys_[g].tensor == r.tensor && keys_[g].write == r.write)) ++g;
    if (g == keys_.size()) {
      keys_.push_back(r);
      counts_.resize(counts_.size() + std::size_t(banks_), 0);
    }
    const std::size_t bank = std::size_t((r.address / std::uint64_t(bank_bytes_)) % std::uint64_t(banks_));
    ++counts_[g * std::size_t(banks_) + bank];
    ++per_bank_[bank];
  }
  void flush(std::int64_t next) {
    for (std::size_t g = 0; g < keys_.size(); ++g) {
      TensorLayoutCost& t = cost_of(cost_, s_.tensors[keys_[g].tensor].name);
      std::int64_t lines = 0, most = 0;
      for (std::int64_t b = 0; b < banks_; ++b) {
        const std::int64_t n = counts_[g * std::size_t(banks_) + std::size_t(b)];
        lines += n, most = std::max(most, n);
      }
      (keys_[g].write ? t.drain_lines : t.fill_lines) += lines;
      t.bank_cycles += most;
      t.min_bank_cycles += ceil_div(lines, banks_);
      t.max_tile_cycles = std::max(t.max_tile_cycles, most);
    }
    for (std::int64_t n : per_bank_)
      if (n > cost_.peak_bank_requests) cost_.peak_bank_requests = n, cost_.peak_bank_timestep = now_;
    keys_.clear();
    counts_.clear();
    std::fill(per_bank_.begin(), per_bank_.end(), 0);
    now_ = next;
  }

 private:
  const Schedule& s_;
  LevelLayoutCost& cost_;
  std::int64_t banks_ = 1, bank_bytes_ = 64, now_ = -1;
  std::vector<TransferRequest> keys_;  // the fills and drains of this timestep
  std::vector<std::int64_t> counts_;   // per key and bank
  std::vector<std::int64_t> per_bank_;
};

// The fewest lines each fill and drain of the level's children could take: their sizes
// in bytes over the line, from the tiles as boxes.
void add_fewest(LevelLayoutCost& cost, const Schedule& s, const TraceOptions& o, const std::string& level,
                const AddressMap& addresses) {
  const std::int64_t end = std::min(s.n_timesteps, o.max_timesteps.value_or(s.n_timesteps));
  std::vector<std::string> open;  // tensors whose tiles are not boxes somewhere
  for (std::uint32_t n : children_of(s, level, o.tensors))
    for (const std::string& name : s.storages[n].tensors) {
      const int x = s.find_tensor(name);
      const int p = s.parent(n, name);
      if (x < 0 || p < 0 || s.storages[std::size_t(p)].level != level) continue;
      if (!o.tensors.empty() && std::find(o.tensors.begin(), o.tensors.end(), name) == o.tensors.end()) continue;
      TensorLayoutCost& t = cost_of(cost, name);
      if (std::find(open.begin(), open.end(), name) != open.end()) continue;  // not boxes at another child
      const std::int64_t bytes = std::int64_t(addresses.bytes[std::size_t(x)]);
      std::int64_t fills = 0, drains = 0;
      try {
        for (mb::SlotWindows w(s, n, std::uint32_t(x), o.einsums, TimeRange{0, end}, 0); !w.done(); w.next()) {
          fills += ceil_div(mb::union_elements(w.fills()) * bytes, cost.line_bytes);
          drains += ceil_div(mb::union_elements(w.drains()) * bytes, cost.line_bytes);
        }
      } catch (const mb::NotClosed&) {  // the counts from the trace stay; the fewest are not known
        t.min_fill_lines.reset(), t.min_drain_lines.reset();
        open.push_back(name);
        continue;
      }
      t.min_fill_lines = t.min_fill_lines.value_or(0) + fills;
      t.min_drain_lines = t.min_drain_lines.value_or(0) + drains;
    }
}

}  // namespace

void add_layout_costs(MovementReport& report, const Schedule& s, const TraceOptions& o, const LayoutSpec* layout,
                      std::uint64_t line_bytes, std::uint64_t align) {
  if (o.from || o.to || o.shard)
    throw SpecError("what a layout costs is counted over whole runs: with --layout, movement takes --max-timesteps, "
                    "not --from/--to/--shard");
  for (LevelMovement& l : report.levels) {
    if (children_of(s, l.level, o.tensors).empty()) continue;
    LevelLayoutCost cost;
    cost.line_bytes = std::int64_t(line_bytes);
    if (const LevelBanks* b = layout ? layout->banks_of(l.level) : nullptr)
      cost.banks = b->banks, cost.bank_bytes = b->bank_bytes > 0 ? b->bank_bytes : std::int64_t(line_bytes);
    else if (const ArchMemory* m = s.memory(l.level); m && m->banks)  // AccelForge's n_banks
      cost.banks = *m->banks, cost.bank_bytes = std::int64_t(line_bytes);
    TransferOptions t;
    t.level = l.level, t.line_bytes = line_bytes, t.align = align, t.layout = layout;
    auto stream = transfer_pipeline(s, o, t);
    if (!stream.closed_form()) cost.enumerated = stream.enumerated_because();
    TimestepBanks banks(s, cost);
    for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch())
      for (const TransferRequest& r : batch) banks.add(r);
    banks.flush(-1);
    add_fewest(cost, s, o, l.level, stream.addresses());
    l.layout = std::move(cost);
  }
}

}  // namespace looptrace
