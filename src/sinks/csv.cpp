// Tidy CSV, one row per access (the reference's to_dataframe() columns, then the
// coordinates separated by spaces):
//   timestep,einsum,tensor,is_output,element,coords
#include "formats.hpp"

namespace looptrace {

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

class CsvSink final : public AccessSink {
 public:
  CsvSink(const Schedule& s, OutputBuffer& out) : schedule_(s), out_(out) {
    for (const auto& t : s.traces) {
      std::string m = ",";
      m += csv_field(t.einsum);
      m += ',';
      m += csv_field(t.tensor);
      m += t.is_output ? ",true," : ",false,";
      middle_.push_back(std::move(m));
    }
  }
  void begin() override { out_.write("timestep,einsum,tensor,is_output,element,coords\n"); }
  void write(std::span<const AccessRecord> batch) override {
    for (const AccessRecord& r : batch) {
      const std::string& middle = middle_[r.trace];
      const TensorInfo& tensor = schedule_.tensors[schedule_.traces[r.trace].tensor_index];
      char* p = out_.reserve(middle.size() + 48 + 21 * tensor.shape.size());
      p = write_int(p, r.timestep);
      std::memcpy(p, middle.data(), middle.size());
      p += middle.size();
      p = write_int(p, r.element);
      *p++ = ',';
      const Coordinates c = unravel(r.element, tensor);
      const std::size_t n = c.size();  // held in a register: the writes through p may alias c
      for (std::size_t k = 0; k < n; ++k) {
        if (k) *p++ = ' ';
        p = write_int(p, c[k]);
      }
      *p++ = '\n';
      out_.commit(p);
    }
  }

 private:
  const Schedule& schedule_;
  OutputBuffer& out_;
  std::vector<std::string> middle_;
};

}  // namespace

std::unique_ptr<AccessSink> make_csv_sink(const Schedule& s, OutputBuffer& out) {
  return std::make_unique<CsvSink>(s, out);
}

}  // namespace looptrace
