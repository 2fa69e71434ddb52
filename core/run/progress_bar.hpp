// A one-line progress bar for long work (training, data preparation, benchmarks), drawn on
// stderr. On a terminal it redraws in place at most ~10 times a second; otherwise (CI, logs)
// it prints a plain line every `plain_every_seconds` so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace patchbay::run {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, double plain_every_seconds = 10.0);
  ~ProgressBar();

  // Sets progress to `done` (of total) with a free-form suffix, e.g. "loss 1.93 | 12.3k tok/s".
  void update(int64_t done, const std::string& suffix = "");
  // Prints the final state and a newline; further updates are ignored.
  void finish(const std::string& suffix = "");

  // "1h02m", "3m07s", "12s" — used for ETA and elapsed time.
  static std::string format_duration(double seconds);

 private:
  void draw(bool force);

  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  std::string suffix_;
  double plain_every_seconds_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace patchbay::run
