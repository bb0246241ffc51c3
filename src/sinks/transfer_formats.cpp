#include "looptrace/sinks/transfer_formats.hpp"

#include "looptrace/support/error.hpp"
#include "formats.hpp"

namespace looptrace {

namespace {

char* write_hex(char* p, std::uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  *p++ = '0', *p++ = 'x';
  int shift = 60;
  while (shift > 0 && ((v >> shift) & 0xf) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4) *p++ = kDigits[(v >> shift) & 0xf];
  return p;
}

class JsonlTransfers final : public TransferSink {
 public:
  JsonlTransfers(const Schedule& s, const std::string& level, bool cycles, OutputBuffer& out)
      : schedule_(s), out_(out), cycles_(cycles) {
    for (const auto& node : s.storages) child_.push_back(", \"level\": " + json_quote(level) + ", \"child\": " + json_quote(node.level));
    for (const auto& t : s.tensors) tensor_.push_back(", \"tensor\": " + json_quote(t.name) + (cycles ? "" : "}\n"));
  }
  void write(std::span<const IssuedTransfer> requests) override {
    for (const IssuedTransfer& issued : requests) {
      const TransferRequest& r = issued.request;
      const std::string &child = child_[r.child], &tensor = tensor_[r.tensor];
      if (r.timestep != prefix_t_ || r.write != prefix_write_) {  // runs of lines share it
        char* q = prefix_;
        std::memcpy(q, "{\"t\": ", 6), q += 6;
        q = write_int(q, r.timestep);
        const std::string_view op = r.write ? ", \"op\": \"write\", \"address\": " : ", \"op\": \"read\", \"address\": ";
        std::memcpy(q, op.data(), op.size()), q += op.size();
        prefix_size_ = std::size_t(q - prefix_);
        prefix_t_ = r.timestep, prefix_write_ = r.write;
      }
      char* p = out_.reserve(96 + child.size() + tensor.size());
      std::memcpy(p, prefix_, prefix_size_), p += prefix_size_;
      p = write_int(p, std::int64_t(r.address));
      std::memcpy(p, child.data(), child.size()), p += child.size();
      std::memcpy(p, tensor.data(), tensor.size()), p += tensor.size();
      if (cycles_) {
        std::memcpy(p, ", \"cycle\": ", 11), p += 11;
        p = write_int(p, issued.cycle);
        *p++ = '}', *p++ = '\n';
      }
      out_.commit(p);
    }
  }

 private:
  const Schedule& schedule_;
  OutputBuffer& out_;
  std::vector<std::string> child_, tensor_;  // per storage node, per tensor
  char prefix_[64];  // '{"t": T, "op": "...", "address": ' of the last request
  std::size_t prefix_size_ = 0;
  std::int64_t prefix_t_ = -1;
  bool prefix_write_ = false;
  bool cycles_;
};

class Dramsim3Transfers final : public TransferSink {
 public:
  explicit Dramsim3Transfers(OutputBuffer& out) : out_(out) {}
  void write(std::span<const IssuedTransfer> requests) override {
    for (const auto& [r, cycle] : requests) {
      char* p = out_.reserve(64);
      p = write_hex(p, r.address);
      const std::string_view op = r.write ? " WRITE " : " READ ";
      std::memcpy(p, op.data(), op.size()), p += op.size();
      p = write_int(p, cycle);
      *p++ = '\n';
      out_.commit(p);
    }
  }

 private:
  OutputBuffer& out_;
};

class Ramulator2Transfers final : public TransferSink {
 public:
  explicit Ramulator2Transfers(OutputBuffer& out) : out_(out) {}
  void write(std::span<const IssuedTransfer> requests) override {
    for (const auto& [r, cycle] : requests) {
      char* p = out_.reserve(32);
      std::memcpy(p, r.write ? "ST " : "LD ", 3), p += 3;
      p = write_hex(p, r.address);
      *p++ = '\n';
      out_.commit(p);
    }
  }

 private:
  OutputBuffer& out_;
};

}  // namespace

std::unique_ptr<TransferSink> make_transfer_sink(const std::string& format, const Schedule& s,
                                                 const std::string& level, OutputBuffer& out, bool jsonl_cycles) {
  if (format == "jsonl") return std::make_unique<JsonlTransfers>(s, level, jsonl_cycles, out);
  if (format == "dramsim3") return std::make_unique<Dramsim3Transfers>(out);
  if (format == "ramulator2") return std::make_unique<Ramulator2Transfers>(out);
  throw SpecError("unknown transfer format '" + format + "'; expected jsonl, dramsim3 or ramulator2");
}

}  // namespace looptrace
