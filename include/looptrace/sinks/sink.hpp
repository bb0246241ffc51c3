// Where accesses go: every format takes batches of records through one interface, so
// the engine streams to it without knowing the format.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "looptrace/access.hpp"
#include "looptrace/sinks/output.hpp"

namespace looptrace {

class AccessSink {
 public:
  virtual ~AccessSink() = default;
  virtual void begin() {}  // headers
  virtual void write(std::span<const AccessRecord> batch) = 0;
  virtual void end() {}
};

// "jsonl", "csv" or "binary"; throws SpecError naming the formats for anything else.
std::unique_ptr<AccessSink> make_sink(const std::string& format, const Schedule& schedule,
                                      OutputBuffer& out);

}  // namespace looptrace
