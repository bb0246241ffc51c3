// JSON Lines: {"t": 5, "einsum": "Conv", "tensor": "I", "write": false, "element": 7, "coords": [7]}
#include <algorithm>

#include <nlohmann/json.hpp>

#include "looptrace/sinks/formats.hpp"

namespace looptrace {

std::string json_quote(std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {  // built piecewise: GCC 12 warns falsely (-Wrestrict) on "\"" + string
    std::string out;
    out.reserve(s.size() + 2);
    out += '"';
    out += s;
    out += '"';
    return out;
  }
  // Anything else is written as the summary's JSON writes it: control characters
  // escaped, each invalid UTF-8 sequence replaced by U+FFFD.
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

class JsonlSink final : public AccessSink {
 public:
  JsonlSink(const Schedule& s, OutputBuffer& out) : schedule_(s), out_(out) {
    // Everything between the timestep and the element is fixed per trace.
    for (const auto& t : s.traces)
      middle_.push_back(", \"einsum\": " + json_quote(t.einsum) + ", \"tensor\": " +
                        json_quote(t.tensor) + ", \"write\": " + (t.is_output ? "true" : "false") +
                        ", \"element\": ");
  }

  void write(std::span<const AccessRecord> batch) override {
    for (const AccessRecord& r : batch) {
      const std::string& middle = middle_[r.trace];
      const TensorInfo& tensor = schedule_.tensors[schedule_.traces[r.trace].tensor_index];
      char* p = out_.reserve(middle.size() + 64 + 22 * tensor.shape.size());
      p = put(p, "{\"t\": ");
      p = std::to_chars(p, p + 20, r.timestep).ptr;
      std::memcpy(p, middle.data(), middle.size());
      p += middle.size();
      p = std::to_chars(p, p + 20, r.element).ptr;
      p = put(p, ", \"coords\": [");
      Coordinates c = unravel(r.element, tensor);
      for (std::size_t k = 0; k < c.size; ++k) {
        if (k) p = put(p, ", ");
        p = std::to_chars(p, p + 20, c[k]).ptr;
      }
      p = put(p, "]}\n");
      out_.commit(p);
    }
  }

 private:
  template <std::size_t N>
  static char* put(char* p, const char (&s)[N]) {
    std::memcpy(p, s, N - 1);
    return p + N - 1;
  }
  const Schedule& schedule_;
  OutputBuffer& out_;
  std::vector<std::string> middle_;
};

}  // namespace

std::unique_ptr<AccessSink> make_jsonl_sink(const Schedule& s, OutputBuffer& out) {
  return std::make_unique<JsonlSink>(s, out);
}

}  // namespace looptrace
