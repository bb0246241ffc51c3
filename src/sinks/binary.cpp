// Fixed-size little-endian records after a header that names what they refer to.
// Layout (documented in the README):
//   header: "LOOPTRC1" (8 bytes), u32 n_traces, then per trace: u8 is_output,
//           u16 einsum name length + bytes, u16 tensor name length + bytes,
//           u8 n_ranks, n_ranks x i64 shape
//   records: i64 timestep, i64 element, u32 trace, u32 zero   (24 bytes each)
#include <algorithm>
#include <bit>
#include <cstddef>

#include "formats.hpp"
#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

static_assert(std::endian::native == std::endian::little, "records are written as in memory");

template <class T>
void put_le(OutputBuffer& out, T v) {
  char* p = out.reserve(sizeof v);
  std::memcpy(p, &v, sizeof v);
  out.commit(p + sizeof v);
}

void put_name(OutputBuffer& out, const std::string& s) {  // at most 65535 bytes (checked)
  put_le<std::uint16_t>(out, std::uint16_t(s.size()));
  out.write(s);
}

class BinarySink final : public AccessSink {
 public:
  BinarySink(const Schedule& s, OutputBuffer& out) : schedule_(s), out_(out) {
    // The header's u16 lengths: a longer name is refused before any output, not cut.
    for (const auto& t : s.traces)
      for (const std::string* name : {&t.einsum, &t.tensor})
        if (name->size() > 65535)
          throw SpecError("--format binary holds names of at most 65535 bytes; '" + name->substr(0, 32) +
                          "...' has " + std::to_string(name->size()) + " (use --format jsonl or csv)");
  }
  void begin() override {
    out_.write("LOOPTRC1");
    put_le<std::uint32_t>(out_, std::uint32_t(schedule_.traces.size()));
    for (const auto& t : schedule_.traces) {
      const TensorInfo& tensor = schedule_.tensors[t.tensor_index];
      put_le<std::uint8_t>(out_, t.is_output);
      put_name(out_, t.einsum);
      put_name(out_, t.tensor);
      put_le<std::uint8_t>(out_, std::uint8_t(tensor.shape.size()));
      for (std::int64_t d : tensor.shape) put_le<std::int64_t>(out_, d);
    }
  }
  void write(std::span<const AccessRecord> batch) override {
    // AccessRecord has the record's layout: copy the batch, then zero the last field.
    static_assert(sizeof(AccessRecord) == 24 && offsetof(AccessRecord, trace) == 16);
    const std::size_t chunk = 4096;
    for (std::size_t i = 0; i < batch.size(); i += chunk) {
      const std::size_t n = std::min(chunk, batch.size() - i);
      char* p = out_.reserve(n * 24);
      std::memcpy(p, batch.data() + i, n * 24);
      for (std::size_t k = 0; k < n; ++k) std::memset(p + k * 24 + 20, 0, 4);
      out_.commit(p + n * 24);
    }
  }

 private:
  const Schedule& schedule_;
  OutputBuffer& out_;
};

}  // namespace

std::unique_ptr<AccessSink> make_binary_sink(const Schedule& s, OutputBuffer& out) {
  return std::make_unique<BinarySink>(s, out);
}

std::unique_ptr<AccessSink> make_sink(const std::string& format, const Schedule& s,
                                      OutputBuffer& out) {
  if (format == "jsonl") return make_jsonl_sink(s, out);
  if (format == "csv") return make_csv_sink(s, out);
  if (format == "binary") return make_binary_sink(s, out);
  throw SpecError("unknown --format '" + format + "'; expected jsonl, csv or binary");
}

}  // namespace looptrace
