// Learning-rate schedules (formulas in lr_schedule.hpp).
#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.hpp"

namespace patchbay::train {

LrScheduleKind lr_schedule_kind(std::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "linear") return LrScheduleKind::kLinear;
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "inverse_sqrt") return LrScheduleKind::kInverseSqrt;
  if (name == "wsd") return LrScheduleKind::kWarmupStableDecay;
  throw Error(ErrorKind::kInvalidArgument, "unknown learning-rate schedule '" + std::string(name) +
                                               "' (valid: constant, linear, cosine, inverse_sqrt, wsd)");
}

const char* lr_schedule_kind_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kLinear:
      return "linear";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kInverseSqrt:
      return "inverse_sqrt";
    case LrScheduleKind::kWarmupStableDecay:
      return "wsd";
  }
  return "unknown";
}

DecayShape decay_shape(std::string_view name) {
  if (name == "linear") return DecayShape::kLinear;
  if (name == "cosine") return DecayShape::kCosine;
  if (name == "1-sqrt") return DecayShape::kOneMinusSqrt;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown decay shape '" + std::string(name) + "' (valid: linear, cosine, 1-sqrt)");
}

const char* decay_shape_name(DecayShape shape) {
  switch (shape) {
    case DecayShape::kLinear:
      return "linear";
    case DecayShape::kCosine:
      return "cosine";
    case DecayShape::kOneMinusSqrt:
      return "1-sqrt";
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
  const bool ends = s.kind != LrScheduleKind::kConstant && s.kind != LrScheduleKind::kInverseSqrt;
  if (ends && s.max_steps < s.warmup_steps) {
    fail("max_steps = " + std::to_string(s.max_steps) + " must be >= warmup_steps = " +
         std::to_string(s.warmup_steps) + " for a " + lr_schedule_kind_name(s.kind) + " schedule");
  }
  if (s.kind == LrScheduleKind::kWarmupStableDecay &&
      (s.decay_steps < 1 || s.decay_steps > s.max_steps - s.warmup_steps)) {
    fail("decay_steps = " + std::to_string(s.decay_steps) + " must lie in [1, max_steps - warmup_steps = " +
         std::to_string(s.max_steps - s.warmup_steps) + "] for a wsd schedule (set train.decay_fraction " +
         "or train.decay_steps)");
  }
}

namespace {

// The fraction of (lr - min_lr) left at progress r in [0, 1] of a decay.
double decay_factor(DecayShape shape, double r) {
  switch (shape) {
    case DecayShape::kLinear:
      return 1.0 - r;
    case DecayShape::kCosine:
      return 0.5 * (1.0 + std::cos(std::numbers::pi * r));
    case DecayShape::kOneMinusSqrt:
      return 1.0 - std::sqrt(r);
  }
  return 0.0;
}

}  // namespace

double learning_rate(const LrSchedule& s, int64_t step) {
  if (step < s.warmup_steps) {
    return s.lr * static_cast<double>(step) / static_cast<double>(s.warmup_steps);
  }
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return s.lr;
    case LrScheduleKind::kInverseSqrt: {
      const double w = static_cast<double>(std::max<int64_t>(s.warmup_steps, 1));
      return std::max(s.min_lr, s.lr * std::sqrt(w / std::max(static_cast<double>(step), w)));
    }
    case LrScheduleKind::kWarmupStableDecay: {
      if (step >= s.max_steps) return s.min_lr;
      const int64_t decay_start = s.max_steps - s.decay_steps;
      if (step < decay_start) return s.lr;
      const double r = static_cast<double>(step - decay_start) / static_cast<double>(s.decay_steps);
      return s.min_lr + (s.lr - s.min_lr) * decay_factor(s.decay_shape, r);
    }
    case LrScheduleKind::kLinear:
    case LrScheduleKind::kCosine:
      break;
  }
  if (step >= s.max_steps) return s.min_lr;
  const double progress = static_cast<double>(step - s.warmup_steps) /
                          static_cast<double>(s.max_steps - s.warmup_steps);
  const DecayShape shape = s.kind == LrScheduleKind::kLinear ? DecayShape::kLinear : DecayShape::kCosine;
  return s.min_lr + (s.lr - s.min_lr) * decay_factor(shape, progress);
}

}  // namespace patchbay::train
