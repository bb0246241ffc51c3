#include "progress.hpp"

#include <atomic>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace looptrace::cli {

std::string short_count(double value) {
  static constexpr const char* kSuffix[] = {"", "k", "M", "G", "T", "P", "E"};
  int power = 0;
  while (std::fabs(value) >= 999.5 && power < 6) value /= 1000, ++power;
  char buf[32];
  if (power == 0) std::snprintf(buf, sizeof buf, "%.0f", value);
  else std::snprintf(buf, sizeof buf, std::fabs(value) < 9.995 ? "%.2f%s" : std::fabs(value) < 99.95 ? "%.1f%s" : "%.0f%s",
                     value, kSuffix[power]);
  return buf;
}

std::string short_duration(double seconds) {
  char buf[48];
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (seconds < 59.5) std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else if (seconds < 365.25 * 86400) std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  else std::snprintf(buf, sizeof buf, "%.3g years", seconds / (365.25 * 86400));
  return buf;
}

std::string progress_line(std::int64_t done, std::int64_t total, double elapsed, const std::string& unit) {
  std::string line;
  const double rate = elapsed > 0 ? double(done) / elapsed : 0;
  if (total <= 0) return unit + "...  " + short_duration(elapsed) + " elapsed";  // alive, and for how long
  const double fraction = std::clamp(double(done) / double(total), 0.0, 1.0);
  constexpr int kWidth = 24;
  const int filled = int(fraction * kWidth);
  line = "[" + std::string(std::size_t(filled), '#') + std::string(std::size_t(kWidth - filled), '.') + "] ";
  char percent[32];
  // Below 0.1 % the first digits that move, so a long run never sits at "0.0%".
  if (fraction == 0 || fraction >= 0.001) std::snprintf(percent, sizeof percent, "%5.1f%%", 100 * fraction);
  else std::snprintf(percent, sizeof percent, "%.2g%%", 100 * fraction);
  line += percent;
  line += "  " + short_count(double(done)) + "/" + short_count(double(total)) + " " + unit;
  if (rate > 0) {
    line += "  " + short_count(rate) + "/s";
    line += "  ETA " + short_duration(double(total - done) / rate);
  } else {
    line += "  " + short_duration(elapsed) + " elapsed";
  }
  return line;
}

namespace {
std::atomic<bool> g_forced{false};
}  // namespace

void force_progress(bool on) { g_forced = on; }

ProgressBar::ProgressBar(std::int64_t total, std::string unit, bool streams_to_stdout)
    : total_(total), unit_(std::move(unit)),
      enabled_(g_forced || (isatty(STDERR_FILENO) == 1 && !(streams_to_stdout && isatty(STDOUT_FILENO) == 1))),
      lines_(isatty(STDERR_FILENO) != 1), start_(Clock::now()), last_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::int64_t done) {
  if (!enabled_) return;
  const auto now = Clock::now();
  // A log gets a line a second; a terminal a redraw five times a second.
  const auto interval = lines_ ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(200);
  if (now - start_ < std::chrono::seconds(1) || now - last_ < interval) return;
  std::lock_guard lock(mutex_);
  draw(done, now);
}

void ProgressBar::tick_in_background() {
  if (!enabled_ || ticker_.joinable()) return;
  ticker_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    if (stop_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) return;
    do draw(0, Clock::now());
    while (!stop_.wait_for(lock, std::chrono::milliseconds(lines_ ? 1000 : 200), [this] { return stopping_; }));
  });
}

void ProgressBar::finish() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard lock(mutex_);
  if (drawn_width_ > 0) std::fprintf(stderr, "\r%*s\r", int(drawn_width_), "");
  drawn_width_ = 0;
}

// Called with mutex_ held.
void ProgressBar::draw(std::int64_t done, Clock::time_point now) {
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string line = progress_line(done, total_, elapsed, unit_);
  if (lines_) {  // --progress into a pipe or a file: whole lines, nothing to clear
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    return;
  }
  // Pad over what the previous line left.
  std::fprintf(stderr, "\r%s%*s", line.c_str(), int(drawn_width_ > line.size() ? drawn_width_ - line.size() : 0), "");
  std::fflush(stderr);
  drawn_width_ = std::max(drawn_width_, line.size());
}

}  // namespace looptrace::cli
