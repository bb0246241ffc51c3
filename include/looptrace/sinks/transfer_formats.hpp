// Transfer traces as text: JSON Lines, DRAMsim3's trace format (`0x<addr> READ|WRITE
// <cycle>`, as its TraceBasedCPU reads it) and Ramulator 2's LoadStoreTrace format
// (`LD 0x<addr>` / `ST 0x<addr>`).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/stages/issue_cycles.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace {

class TransferSink {
 public:
  virtual ~TransferSink() = default;
  virtual void write(std::span<const IssuedTransfer> requests) = 0;
};

// "jsonl", "dramsim3" or "ramulator2", fed by `... | issue_cycles(timing)`: dramsim3
// writes each request's issue cycle, jsonl adds it as "cycle" when `jsonl_cycles`
// (ramulator2's trace has none: its frontend paces the requests). Throws SpecError
// naming the formats for anything else.
std::unique_ptr<TransferSink> make_transfer_sink(const std::string& format, const Schedule& schedule,
                                                 const std::string& level, OutputBuffer& out,
                                                 bool jsonl_cycles = false);

}  // namespace looptrace
