// JSON Lines: {"t": 5, "einsum": "Conv", "tensor": "I", "write": false, "element": 7, "coords": [7]}
#include <algorithm>
#include <array>
#include <charconv>

#include <nlohmann/json.hpp>

#include "formats.hpp"

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

// The coordinates text of a trace's last element: consecutive records of one trace
// mostly repeat it or step its last coordinate, so most lines copy it (or all of it
// but the last number) instead of dividing and formatting every rank again.
struct CoordsText {
  std::int64_t element = -1;
  Coordinates coords;
  std::array<char, 24 * kMaxRanks> text{};  // "1, 2, 3"
  std::size_t size = 0, prefix = 0;          // prefix: up to the last number

  void render_last() {
    size = std::size_t(write_int(text.data() + prefix, coords.back()) - text.data());
  }
  void update(std::int64_t e, const std::vector<std::int64_t>& shape) {
    if (e == element) return;
    if (e == element + 1 && !coords.empty() && coords.back() + 1 < shape.back()) {
      ++coords.back();
      element = e;
      render_last();
      return;
    }
    element = e;
    coords = unravel(e, std::span<const std::int64_t>(shape));
    char* p = text.data();
    prefix = 0;
    for (std::size_t k = 0; k < coords.size(); ++k) {
      if (k + 1 == coords.size()) {
        prefix = std::size_t(p - text.data());
        break;
      }
      p = write_int(p, coords[k]);
      *p++ = ',', *p++ = ' ';
    }
    if (coords.empty()) size = 0;
    else render_last();
  }
};

class JsonlSink final : public AccessSink {
 public:
  JsonlSink(const Schedule& s, OutputBuffer& out) : schedule_(s), out_(out), coords_(s.traces.size()) {
    // Everything between the timestep and the element is fixed per trace.
    for (const auto& t : s.traces) {
      const std::string text = ", \"einsum\": " + json_quote(t.einsum) + ", \"tensor\": " +
                               json_quote(t.tensor) + ", \"write\": " + (t.is_output ? "true" : "false") +
                               ", \"element\": ";
      Fixed m;
      m.size = text.size();
      if (m.size <= sizeof m.text) std::memcpy(m.text, text.data(), m.size);
      else m.long_text = text;
      middle_.push_back(std::move(m));
    }
  }

  void write(std::span<const AccessRecord> batch) override {
    for (const AccessRecord& r : batch) {
      const Fixed& middle = middle_[r.trace];
      const TensorInfo& tensor = schedule_.tensors[std::size_t(schedule_.traces[r.trace].tensor_index)];
      CoordsText& c = coords_[r.trace];
      c.update(r.element, tensor.shape);
      if (r.timestep != timestep_) {
        timestep_ = r.timestep;
        timestep_size_ = std::size_t(write_int(timestep_text_, r.timestep) - timestep_text_);
      }
      // Room for whole fixed-size copies: each copies its buffer and moves by its length
      // (a long middle, from a long or escaped name, is copied by its own length).
      char* p = out_.reserve(std::max(middle.size, sizeof middle.text) + 2 * sizeof timestep_text_ + 48 +
                             c.text.size());
      p = put(p, "{\"t\": ");
      std::memcpy(p, timestep_text_, sizeof timestep_text_);
      p += timestep_size_;
      if (middle.size <= sizeof middle.text) {
        std::memcpy(p, middle.text, sizeof middle.text);
        p += middle.size;
      } else {
        std::memcpy(p, middle.long_text.data(), middle.size);
        p += middle.size;
      }
      p = write_int(p, r.element);
      p = put(p, ", \"coords\": [");
      if (c.size <= 32) std::memcpy(p, c.text.data(), 32);
      else std::memcpy(p, c.text.data(), c.size);
      p += c.size;
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
  // The text between the timestep and the element, fixed per trace: short ones in a
  // buffer copied whole (a constant-size copy is a few moves, not a call).
  struct Fixed {
    char text[96] = {};
    std::size_t size = 0;
    std::string long_text;
  };
  std::vector<Fixed> middle_;
  std::vector<CoordsText> coords_;  // per trace
  std::int64_t timestep_ = -1;
  char timestep_text_[24] = {};
  std::size_t timestep_size_ = 0;
};

}  // namespace

std::unique_ptr<AccessSink> make_jsonl_sink(const Schedule& s, OutputBuffer& out) {
  return std::make_unique<JsonlSink>(s, out);
}

}  // namespace looptrace
