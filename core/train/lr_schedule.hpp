// Learning-rate schedules: pure functions of the update number.
//
// `step` counts the optimizer updates already done (0 for the first update; a resumed run
// passes its restored step), so learning_rate(s, step) is the rate of update step + 1. With
// W = warmup_steps and S = max_steps (W <= S):
//   warmup (every kind, when W > 0):  step < W:  lr * step / W        (0 at step 0: linear
//                                                from 0, as Hugging Face's schedulers)
//   constant:      lr after warmup
//   linear:        min_lr + (lr - min_lr) * (1 - q)                q = (step - W) / (S - W)
//   cosine:        min_lr + (lr - min_lr) * (1 + cos(pi * q)) / 2
//   inverse_sqrt:  max(min_lr, lr * sqrt(W' / max(step, W')))      W' = max(W, 1) (fairseq's
//                  inverse_sqrt: the peak at the end of warmup, then ~ 1/sqrt(step), no end)
//   wsd (warmup-stable-decay, Hägele et al. 2024 / MiniCPM): lr until D = decay_steps before S,
//                  then min_lr + (lr - min_lr) * tail(r), r = (step - (S - D)) / D, with
//                  tail linear 1 - r, cosine (1 + cos(pi r)) / 2, or 1-sqrt 1 - sqrt(r)
//   step >= S: min_lr (linear, cosine, wsd); lr (constant)
// So at step W the rate is lr, at the midpoint W + (S - W) / 2 cosine and linear give
// (lr + min_lr) / 2, and at step S the decaying kinds reach min_lr.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace patchbay::train {

enum class LrScheduleKind { kConstant, kLinear, kCosine, kInverseSqrt, kWarmupStableDecay };
enum class DecayShape { kLinear, kCosine, kOneMinusSqrt };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double lr = 1e-3;          // peak rate, reached at the end of warmup; > 0
  double min_lr = 0.0;       // floor of the decays; 0 <= min_lr <= lr
  int64_t warmup_steps = 0;  // >= 0
  int64_t max_steps = 0;     // >= warmup_steps (decay kinds); the run's total updates
  int64_t decay_steps = 0;   // wsd: length of the decay tail, 1 <= D <= S - W
  DecayShape decay_shape = DecayShape::kOneMinusSqrt;  // wsd: shape of the tail
};

// "constant", "linear", "cosine", "inverse_sqrt", "wsd" -> kind; Error(kInvalidArgument)
// naming the valid names. Likewise "linear", "cosine", "1-sqrt" -> decay shape.
LrScheduleKind lr_schedule_kind(std::string_view name);
const char* lr_schedule_kind_name(LrScheduleKind kind);
DecayShape decay_shape(std::string_view name);
const char* decay_shape_name(DecayShape shape);

// Throws Error(kInvalidArgument) saying which field is wrong and what is allowed.
void validate(const LrSchedule& schedule);

// The learning rate of update number step + 1 (step >= 0). Does not validate.
double learning_rate(const LrSchedule& schedule, int64_t step);

}  // namespace patchbay::train
