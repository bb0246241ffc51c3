// The progress line of the looptrace command (src/cli/progress.cpp), rendered from
// counts and times alone, so no terminal is needed.
#include <doctest/doctest.h>

#include <string>

#include "../src/cli/progress.hpp"

using looptrace::cli::progress_line;
using looptrace::cli::short_count;
using looptrace::cli::short_duration;

TEST_CASE("progress: counts with three significant digits and an SI suffix") {
  CHECK(short_count(0) == "0");
  CHECK(short_count(999) == "999");
  CHECK(short_count(1000) == "1.00k");
  CHECK(short_count(1234567) == "1.23M");
  CHECK(short_count(12345678) == "12.3M");
  CHECK(short_count(123456789) == "123M");
  CHECK(short_count(999999) == "1.00M");  // rounds up into the next suffix, never "1000k"
  CHECK(short_count(1.07e12) == "1.07T");
}

TEST_CASE("progress: durations from seconds to years") {
  CHECK(short_duration(0) == "0s");
  CHECK(short_duration(42.4) == "42s");
  CHECK(short_duration(185) == "3m05s");
  CHECK(short_duration(2 * 3600 + 14 * 60 + 10) == "2h14m");
  CHECK(short_duration(11 * 86400 + 14 * 3600) == "11d14h");
  CHECK(short_duration(1e9) == "31.7 years");
}

TEST_CASE("progress: bar, percent, count, rate and ETA") {
  // 3M of 10M timesteps in 2 s: 1.5M/s, 7M left: 4.67 s.
  CHECK(progress_line(3'000'000, 10'000'000, 2.0, "timesteps") ==
        "[#######.................]  30.0%  3.00M/10.0M timesteps  1.50M/s  ETA 5s");
  CHECK(progress_line(10, 10, 1.0, "timesteps") ==
        "[########################] 100.0%  10/10 timesteps  10/s  ETA 0s");
}

TEST_CASE("progress: a fraction under 0.1% still moves, with the count and the rate") {
  // 1.07e12 timesteps at 2.4M/s: 1.2e7 done after 5 s is 0.0011 %; the rest takes
  // (1.07e12 - 1.2e7) / 2.4e6 = 445,828 s = 5 days 3.8 hours.
  const std::string line = progress_line(12'000'000, 1'070'000'000'000, 5.0, "timesteps");
  CHECK(line == "[........................] 0.0011%  12.0M/1.07T timesteps  2.40M/s  ETA 5d03h");
  const std::string later = progress_line(24'000'000, 1'070'000'000'000, 10.0, "timesteps");
  CHECK(later.find("0.0022%") != std::string::npos);
}

TEST_CASE("progress: nothing done yet, or no count at all") {
  CHECK(progress_line(0, 100, 1.5, "timesteps") == "[........................]   0.0%  0/100 timesteps  2s elapsed");
  CHECK(progress_line(0, 0, 12.2, "summary: counting") == "summary: counting...  12s elapsed");
}
