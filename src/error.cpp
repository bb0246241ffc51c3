#include "looptrace/error.hpp"

namespace looptrace {

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
