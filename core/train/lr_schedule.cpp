// Learning-rate schedules (formulas in lr_schedule.hpp).
#include "train/lr_schedule.hpp"

#include <cmath>
#include <numbers>

#include "common/error.hpp"

namespace patchbay::train {

LrScheduleKind lr_schedule_kind(std::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "linear") return LrScheduleKind::kLinear;
  if (name == "cosine") return LrScheduleKind::kCosine;
  throw Error(ErrorKind::kInvalidArgument, "unknown learning-rate schedule '" + std::string(name) +
                                               "' (valid: constant, linear, cosine)");
}

const char* lr_schedule_kind_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kLinear:
      return "linear";
    case LrScheduleKind::kCosine:
      return "cosine";
  }
  return "unknown";
}

void validate(const LrSchedule& s) {
  auto fail = [](const std::string& message) {
    throw Error(ErrorKind::kInvalidArgument, "lr schedule: " + message);
  };
  if (!(s.lr > 0) || !std::isfinite(s.lr))
    fail("lr = " + std::to_string(s.lr) + " must be finite and > 0");
  if (!(s.min_lr >= 0) || s.min_lr > s.lr) {
    fail("min_lr = " + std::to_string(s.min_lr) + " must lie in [0, lr = " + std::to_string(s.lr) +
         "]");
  }
  if (s.warmup_steps < 0)
    fail("warmup_steps = " + std::to_string(s.warmup_steps) + " must be >= 0");
  if (s.kind != LrScheduleKind::kConstant && s.max_steps < s.warmup_steps) {
    fail("max_steps = " + std::to_string(s.max_steps) + " must be >= warmup_steps = " +
         std::to_string(s.warmup_steps) + " for a " + lr_schedule_kind_name(s.kind) + " schedule");
  }
}

double learning_rate(const LrSchedule& s, int64_t step) {
  if (step < s.warmup_steps) {
    return s.lr * static_cast<double>(step) / static_cast<double>(s.warmup_steps);
  }
  if (s.kind == LrScheduleKind::kConstant) return s.lr;
  if (step >= s.max_steps) return s.min_lr;
  const double progress = static_cast<double>(step - s.warmup_steps) /
                          static_cast<double>(s.max_steps - s.warmup_steps);
  const double factor = s.kind == LrScheduleKind::kLinear
                            ? 1.0 - progress
                            : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return s.min_lr + (s.lr - s.min_lr) * factor;
}

}  // namespace patchbay::train
