// Internal to the sinks: the access formats of `looptrace trace --format` (JSON Lines,
// CSV, binary records) and the text helpers they share. Not installed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "looptrace/sinks/sink.hpp"

namespace looptrace {

// Writes the decimal digits of v at p and returns the end: the hot loop of every text
// format, inlined (std::to_chars is a call per number in libstdc++).
inline char* write_int(char* p, std::int64_t value) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  std::uint64_t v = std::uint64_t(value);
  if (value < 0) *p++ = '-', v = 0 - v;
  int n = 1;
  for (std::uint64_t x = v; x >= 10; x /= 10) ++n;
  char* end = p + n;
  char* q = end;
  while (v >= 100) {
    const std::size_t i = std::size_t(v % 100) * 2;
    v /= 100;
    *--q = kPairs[i + 1], *--q = kPairs[i];
  }
  if (v >= 10) {
    *--q = kPairs[v * 2 + 1], *--q = kPairs[v * 2];
  } else {
    *--q = char('0' + v);
  }
  return end;
}

// A JSON string literal that any JSON parser reads, whatever the bytes: control
// characters escaped (\n, \u001b), each invalid UTF-8 sequence replaced by U+FFFD.
std::string json_quote(std::string_view s);
std::string csv_field(std::string_view s);   // quoted when it must be

std::unique_ptr<AccessSink> make_jsonl_sink(const Schedule& schedule, OutputBuffer& out);
std::unique_ptr<AccessSink> make_csv_sink(const Schedule& schedule, OutputBuffer& out);
std::unique_ptr<AccessSink> make_binary_sink(const Schedule& schedule, OutputBuffer& out);

}  // namespace looptrace
