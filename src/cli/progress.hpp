// A progress line on stderr for long runs: only on a terminal, only after a second, so
// pipes, logs and CI stay silent.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace looptrace::cli {

// "1.23M" for 1234567: three significant digits and an SI suffix (k, M, G, T, P, E).
std::string short_count(double value);
// "42s", "3m05s", "2h14m", "11d14h", "31.7 years".
std::string short_duration(double seconds);

// The line drawn after `elapsed` seconds with `done` of `total` units done. A fraction
// too small for tenths of a percent shows with more digits, and the count and rate say
// that the run moves:
//   [#######.................]  30.0%  3.00M/10.0M timesteps  1.50M/s  ETA 5s
// With total 0 (no count known) `unit` names the work: "summary...  12s elapsed".
std::string progress_line(std::int64_t done, std::int64_t total, double elapsed, const std::string& unit);

// --progress: draw the line even when stderr is no terminal (one line a second there).
void force_progress(bool on);

class ProgressBar {
 public:
  // Enabled when stderr is a terminal, unless the run streams to stdout and stdout is
  // a terminal too (the bar would break the lines it writes); always after force_progress.
  ProgressBar(std::int64_t total, std::string unit, bool streams_to_stdout = false);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` units are done; redraws at most 5 times a second, from 1 s on.
  void update(std::int64_t done);
  // Until finish(), a thread redraws the elapsed time (for work that reports no count).
  void tick_in_background();
  void finish();  // clears the line

 private:
  using Clock = std::chrono::steady_clock;
  void draw(std::int64_t done, Clock::time_point now);

  std::int64_t total_;
  std::string unit_;
  bool enabled_;
  bool lines_;  // stderr is no terminal: a line per draw, no carriage returns
  Clock::time_point start_, last_;
  std::size_t drawn_width_ = 0;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread ticker_;
};

}  // namespace looptrace::cli
