// The access formats of `looptrace trace --format`: JSON Lines, CSV, binary records.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "looptrace/sinks/sink.hpp"

namespace looptrace {

// A JSON string literal that any JSON parser reads, whatever the bytes: control
// characters escaped (\n, \u001b), each invalid UTF-8 sequence replaced by U+FFFD.
std::string json_quote(std::string_view s);
std::string csv_field(std::string_view s);   // quoted when it must be

std::unique_ptr<AccessSink> make_jsonl_sink(const Schedule& schedule, OutputBuffer& out);
std::unique_ptr<AccessSink> make_csv_sink(const Schedule& schedule, OutputBuffer& out);
std::unique_ptr<AccessSink> make_binary_sink(const Schedule& schedule, OutputBuffer& out);

}  // namespace looptrace
