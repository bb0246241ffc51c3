#include "looptrace/support/error.hpp"

namespace looptrace {

std::string without_nul(std::string message) {
  for (std::size_t at = message.find('\0'); at != std::string::npos; at = message.find('\0', at + 4))
    message.replace(at, 1, "\\x00");
  return message;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b != 0x7f) out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
  }
  return out;
}

std::string SourceLocation::str() const {
  // Join the known parts with ':'; a column means nothing without its line.
  std::string out = file;
  auto append = [&out](int value) {
    if (!out.empty()) out += ':';
    out += std::to_string(value);
  };
  if (line > 0) {
    append(line);
    if (column > 0) append(column);
  }
  return out;
}

namespace {
std::string compose(const SourceLocation& where, const std::string& message) {
  const std::string location = where.str();
  return location.empty() ? message : location + ": " + message;
}
}  // namespace

SpecError::SpecError(SourceLocation where, const std::string& message)
    : std::runtime_error(compose(where, message)), where_(std::move(where)), message_(message) {}

}  // namespace looptrace
