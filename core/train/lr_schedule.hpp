// Learning-rate schedules: pure functions of the update number.
//
// `step` counts the optimizer updates already done (0 for the first update; a resumed run
// passes its restored step), so learning_rate(s, step) is the rate of update step + 1. With
// W = warmup_steps and S = max_steps (W <= S):
//   warmup (every kind, when W > 0):  step < W:  lr * step / W        (0 at step 0: linear
//                                                from 0, as Hugging Face's schedulers)
//   constant:  lr after warmup
//   linear:    min_lr + (lr - min_lr) * (1 - q)                q = (step - W) / (S - W)
//   cosine:    min_lr + (lr - min_lr) * (1 + cos(pi * q)) / 2
//   step >= S: min_lr (linear, cosine); lr (constant)
// So at step W the rate is lr, at the midpoint W + (S - W) / 2 cosine and linear give
// (lr + min_lr) / 2, and at step S both reach min_lr.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace patchbay::train {

enum class LrScheduleKind { kConstant, kLinear, kCosine };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double lr = 1e-3;          // peak rate, reached at the end of warmup; > 0
  double min_lr = 0.0;       // floor of linear / cosine decay; 0 <= min_lr <= lr
  int64_t warmup_steps = 0;  // >= 0
  int64_t max_steps = 0;     // >= warmup_steps (decay kinds); the run's total updates
};

// "constant", "linear", "cosine" -> kind; Error(kInvalidArgument) naming the valid names.
LrScheduleKind lr_schedule_kind(std::string_view name);
const char* lr_schedule_kind_name(LrScheduleKind kind);

// Throws Error(kInvalidArgument) saying which field is wrong and what is allowed.
void validate(const LrSchedule& schedule);

// The learning rate of update number step + 1 (step >= 0). Does not validate.
double learning_rate(const LrSchedule& schedule, int64_t step);

}  // namespace patchbay::train
