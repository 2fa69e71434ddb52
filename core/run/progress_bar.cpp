// Progress bar drawing: bar, percentage, counts, elapsed, ETA and a caller's suffix.
#include "run/progress_bar.hpp"

#include <unistd.h>

#include <cstdio>

namespace patchbay::run {

ProgressBar::ProgressBar(std::string label, int64_t total, double plain_every_seconds)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      plain_every_seconds_(plain_every_seconds),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::hours(1)) {}

ProgressBar::~ProgressBar() {
  if (!finished_ && tty_) std::fputc('\n', stderr);
}

std::string ProgressBar::format_duration(double seconds) {
  if (seconds < 0 || seconds != seconds) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  return buf;
}

void ProgressBar::update(int64_t done, const std::string& suffix) {
  if (finished_) return;
  done_ = done;
  suffix_ = suffix;
  draw(false);
}

void ProgressBar::finish(const std::string& suffix) {
  if (finished_) return;
  done_ = total_;
  if (!suffix.empty()) suffix_ = suffix;
  draw(true);
  if (tty_) std::fputc('\n', stderr);
  finished_ = true;
}

void ProgressBar::draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  if (!force && since_draw < (tty_ ? 0.1 : plain_every_seconds_)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
  const double eta = done_ > 0 ? elapsed * (1.0 - fraction) / fraction : -1.0;
  constexpr int kWidth = 28;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "%s%s [%s] %3.0f%% %lld/%lld | %s<%s%s%s%s", tty_ ? "\r\033[2K" : "",
               label_.c_str(), bar.c_str(), fraction * 100.0, static_cast<long long>(done_),
               static_cast<long long>(total_), format_duration(elapsed).c_str(),
               format_duration(eta).c_str(), suffix_.empty() ? "" : " | ", suffix_.c_str(),
               tty_ ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace patchbay::run
