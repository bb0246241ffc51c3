// Errors a user can cause: a bad spec, a bad option. Each names where it happened.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace looptrace {

// Text from a user's file made safe for a terminal: control bytes (NUL, ESC, newline,
// DEL, ...) become \xNN (\n, \t as such), so a message is neither cut at a NUL nor
// able to drive the terminal. Other bytes, UTF-8 among them, pass unchanged.
std::string printable(std::string_view text);

// A message for an exception whose text travels as what() (a C string): a NUL from a
// user's file would cut it there, so each becomes the four characters \x00.
std::string without_nul(std::string message);

// Where in an input file something stands (1-based; 0 means unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  std::string str() const;  // "file:line:column", omitting what is unknown
};

// Bad input: the CLI reports it as `LOCATION: error: MESSAGE` and exits 2.
class SpecError : public std::runtime_error {
 public:
  SpecError(SourceLocation where, const std::string& message);
  explicit SpecError(const std::string& message) : SpecError(SourceLocation{}, message) {}

  const SourceLocation& where() const noexcept { return where_; }
  const std::string& message() const noexcept { return message_; }

 private:
  SourceLocation where_;
  std::string message_;
};

// An error in a single expression string; `column` is the 0-based offset of the
// offending character in that string, so the caller can place it in its file.
class ExpressionError : public std::runtime_error {
 public:
  ExpressionError(std::size_t column, const std::string& message)
      : std::runtime_error(without_nul(message)), column_(column) {}
  std::size_t column() const noexcept { return column_; }

 private:
  std::size_t column_;
};

}  // namespace looptrace
