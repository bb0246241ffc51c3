#include <doctest/doctest.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "helpers.hpp"
#include "sinks/formats.hpp"  // internal: json_quote, write_int
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/sinks/summary_json.hpp"

using looptrace::AccessRecord;
using looptrace::OutputBuffer;

namespace {

// A temporary file that an OutputBuffer writes to and the test reads back.
struct TempFile {
  std::FILE* f = std::tmpfile();
  ~TempFile() {
    if (f) std::fclose(f);
  }
  int fd() const { return fileno(f); }
  std::string contents() const {
    std::string out;
    char buf[4096];
    ::lseek(fd(), 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd(), buf, sizeof buf)) > 0;) out.append(buf, std::size_t(n));
    return out;
  }
};

// What a sink writes for `records` (with begin() and end()).
std::string render(const std::string& format, const looptrace::Schedule& s,
                   const std::vector<AccessRecord>& records) {
  TempFile file;
  REQUIRE(file.f != nullptr);
  {
    OutputBuffer out(file.fd(), 64);  // small: forces flushes mid-stream
    auto sink = looptrace::make_sink(format, s, out);
    sink->begin();
    sink->write(records);
    sink->end();
    out.flush();
  }
  return file.contents();
}

template <class T>
T read_le(const std::string& bytes, std::size_t at) {
  T v;
  REQUIRE(at + sizeof v <= bytes.size());
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

const looptrace::Schedule& conv1d() {
  static const auto s = th::compile_text(th::kConv1d);
  return s;
}

const looptrace::Schedule& conv2d() {
  static const auto s = th::compile_corpus({"conv2d.workload.yaml", "conv2d.mapping.yaml"});
  return s;
}

}  // namespace

TEST_CASE("sinks: a JSON Lines line, exactly") {
  // trace 0 is (Conv, I); trace 2 is (Conv, O), the output
  CHECK(render("jsonl", conv1d(), {{4, 2, 0}}) ==
        "{\"t\": 4, \"einsum\": \"Conv\", \"tensor\": \"I\", \"write\": false, \"element\": 2, "
        "\"coords\": [2]}\n");
  CHECK(render("jsonl", conv1d(), {{23, 7, 2}, {9000000000, 0, 1}}) ==
        "{\"t\": 23, \"einsum\": \"Conv\", \"tensor\": \"O\", \"write\": true, \"element\": 7, "
        "\"coords\": [7]}\n"
        "{\"t\": 9000000000, \"einsum\": \"Conv\", \"tensor\": \"W\", \"write\": false, "
        "\"element\": 0, \"coords\": [0]}\n");
  // I of conv2d is [2, 6, 6]: element 51 = 1*36 + 2*6 + 3
  const int i = conv2d().find_tensor("I");
  REQUIRE(i >= 0);
  const int trace = th::trace_index(conv2d(), "Conv2d", "I");
  CHECK(render("jsonl", conv2d(), {{0, 51, std::uint32_t(trace)}}) ==
        "{\"t\": 0, \"einsum\": \"Conv2d\", \"tensor\": \"I\", \"write\": false, \"element\": 51, "
        "\"coords\": [1, 2, 3]}\n");
  CHECK(render("jsonl", conv1d(), {}).empty());  // no header
}

TEST_CASE("sinks: CSV header and rows") {
  CHECK(render("csv", conv1d(), {{4, 2, 0}, {5, 1, 2}}) ==
        "timestep,einsum,tensor,is_output,element,coords\n"
        "4,Conv,I,false,2,2\n"
        "5,Conv,O,true,1,1\n");
  const int trace = th::trace_index(conv2d(), "Conv2d", "I");
  CHECK(render("csv", conv2d(), {{3, 51, std::uint32_t(trace)}}) ==
        "timestep,einsum,tensor,is_output,element,coords\n"
        "3,Conv2d,I,false,51,1 2 3\n");
}

TEST_CASE("sinks: CSV and JSON quoting") {
  CHECK(looptrace::csv_field("plain") == "plain");
  CHECK(looptrace::csv_field("a,b") == "\"a,b\"");
  CHECK(looptrace::csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(looptrace::csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(looptrace::json_quote("x") == "\"x\"");
  CHECK(looptrace::json_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(looptrace::json_quote("\n\t\x1b") == "\"\\n\\t\\u001b\"");
  CHECK(looptrace::json_quote("a\xff") == "\"a\xef\xbf\xbd\"");  // invalid UTF-8: U+FFFD
}

TEST_CASE("sinks: binary header and records, read back byte by byte") {
  const std::string bytes = render("binary", conv1d(), {{4, 2, 0}, {23, 7, 2}});
  REQUIRE(bytes.size() >= 8);
  CHECK(bytes.substr(0, 8) == "LOOPTRC1");
  CHECK(read_le<std::uint32_t>(bytes, 8) == 3);  // traces
  std::size_t at = 12;
  const char* tensors[] = {"I", "W", "O"};
  const std::int64_t shapes[] = {10, 3, 8};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(read_le<std::uint8_t>(bytes, at) == (k == 2 ? 1 : 0));  // is_output
    at += 1;
    CHECK(read_le<std::uint16_t>(bytes, at) == 4);
    CHECK(bytes.substr(at + 2, 4) == "Conv");
    at += 6;
    CHECK(read_le<std::uint16_t>(bytes, at) == 1);
    CHECK(bytes.substr(at + 2, 1) == tensors[k]);
    at += 3;
    CHECK(read_le<std::uint8_t>(bytes, at) == 1);  // ranks
    at += 1;
    CHECK(read_le<std::int64_t>(bytes, at) == shapes[k]);
    at += 8;
  }
  CHECK(at == 12 + 3 * 19);
  REQUIRE(bytes.size() == at + 2 * 24);  // 24-byte records
  CHECK(read_le<std::int64_t>(bytes, at) == 4);
  CHECK(read_le<std::int64_t>(bytes, at + 8) == 2);
  CHECK(read_le<std::uint32_t>(bytes, at + 16) == 0);
  CHECK(read_le<std::uint32_t>(bytes, at + 20) == 0);
  CHECK(read_le<std::int64_t>(bytes, at + 24) == 23);
  CHECK(read_le<std::int64_t>(bytes, at + 32) == 7);
  CHECK(read_le<std::uint32_t>(bytes, at + 40) == 2);
}

TEST_CASE("sinks: a whole stream through each format") {
  const auto& s = conv1d();
  const auto rows = th::collect(s);
  std::vector<AccessRecord> records;
  for (const auto& [t, trace, element] : rows) records.push_back({t, element, trace});
  REQUIRE(records.size() == 72);
  const std::string jsonl = render("jsonl", s, records);
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 72);
  const std::string csv = render("csv", s, records);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 73);
  const std::string bin = render("binary", s, records);
  CHECK(bin.size() == 12 + 3 * 19 + 72 * 24);
}

TEST_CASE("sinks: an unknown format names the known ones") {
  TempFile file;
  OutputBuffer out(file.fd());
  const auto e = th::spec_error([&] { looptrace::make_sink("xml", conv1d(), out); });
  CHECK(th::contains(e.message(), "'xml'"));
  CHECK(th::contains(e.message(), "jsonl, csv or binary"));
}

TEST_CASE("OutputBuffer: grows for a write larger than its capacity, keeps the order") {
  TempFile file;
  std::string want;
  {
    OutputBuffer out(file.fd(), 4);
    out.write("0123456789");  // larger than the capacity
    want += "0123456789";
    out.put('!');
    want += '!';
    out.write_int(-9223372036854775807LL - 1);  // 20 characters
    want += "-9223372036854775808";
    for (int k = 0; k < 100; ++k) {
      out.write_int(k);
      out.put(',');
      want += std::to_string(k) + ',';
    }
    char* p = out.reserve(1000);
    std::memset(p, 'x', 1000);
    out.commit(p + 1000);
    want += std::string(1000, 'x');
    out.write("end");
    want += "end";
    out.flush();
    CHECK(file.contents() == want);
    out.write("+tail");  // flushed by the destructor
    want += "+tail";
  }
  CHECK(file.contents() == want);
}

TEST_CASE("OutputBuffer: a closed pipe is BrokenPipe") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  {
    OutputBuffer out(fds[1], 16);
    out.write("hello");
    CHECK_THROWS_AS(out.flush(), looptrace::BrokenPipe);
    out.write("again");
  }  // the destructor swallows the error
  ::close(fds[1]);
  std::signal(SIGPIPE, previous);
}

TEST_CASE("summary_json: the fields of the CLI contract, in order") {
  const auto& s = conv1d();
  looptrace::TraceOptions o;
  o.max_timesteps = 4;
  const auto j = looptrace::summary_json(looptrace::summarize(s, o), s);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"n_timesteps", "truncated", "tensors", "einsums",
                                         "memory_levels", "tensor_shapes", "tensor_ranks",
                                         "einsum_timespans", "tile_windows", "traces", "n_points",
                                         "enumerated", "merge"});
  CHECK(j["n_timesteps"] == 4);
  CHECK(j["truncated"] == true);
  CHECK(j["tensor_shapes"]["I"] == nlohmann::ordered_json::array({10}));
  CHECK(j["einsum_timespans"]["Conv"] == nlohmann::ordered_json::array({0, 4}));
  CHECK(j["tile_windows"]["GlobalBuffer"]["W"] == nlohmann::ordered_json::parse("[[0, 3], [3, 4]]"));
  CHECK(j["traces"][2]["tensor"] == "O");
  CHECK(j["traces"][2]["is_output"] == true);
  CHECK(j["traces"][2]["n_accesses"] == 4);
  CHECK(j["n_points"] == 4);
}

TEST_CASE("sinks: write_int formats like std::to_chars at the edges") {
  const std::int64_t values[] = {0, 7, 9, 10, 99, 100, 101, 999, 1000, 123456789, -1, -10, -100,
                                 INT64_MAX, INT64_MIN, INT64_MAX / 10, 1000000000000000000};
  for (std::int64_t v : values) {
    char mine[24], theirs[24];
    const std::string a(mine, looptrace::write_int(mine, v));
    const std::string b(theirs, std::to_chars(theirs, theirs + 24, v).ptr);
    CHECK(a == b);
  }
}

TEST_CASE("sinks: jsonl coordinates stay right when records step, repeat and jump") {
  // A is 8 x 4: steps within a row, a carry into the next row, a repeat, a jump back,
  // and interleaved traces (A, B) that each keep their own coordinates.
  const looptrace::Schedule s = th::compile_text(th::kRowsWorkload + R"(
mapping:
  nodes:
  - !Storage {component: DRAM, tensors: [A, B]}
  - !Compute {einsum: E, component: MAC}
)");
  const std::uint32_t a = 0, b = 1;  // A[m, n] (8 x 4), B[m] (8)
  const std::vector<AccessRecord> records = {
      {0, 2, a, 1}, {0, 3, a, 1}, {0, 4, a, 1}, {0, 5, b, 1}, {1, 4, a, 1},
      {1, 4, a, 1}, {1, 6, b, 1}, {2, 31, a, 1}, {2, 0, a, 1}, {2, 7, b, 1}};
  const std::string text = render("jsonl", s, records);
  std::vector<std::string> coords;
  for (std::size_t at = text.find("\"coords\": ["); at != std::string::npos;
       at = text.find("\"coords\": [", at + 1)) {
    const std::size_t from = at + 11;
    coords.push_back(text.substr(from, text.find(']', from) - from));
  }
  CHECK(coords == std::vector<std::string>{"0, 2", "0, 3", "1, 0", "5", "1, 0", "1, 0", "6", "7, 3",
                                           "0, 0", "7"});
}
