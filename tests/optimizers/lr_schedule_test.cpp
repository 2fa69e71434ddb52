// Learning-rate schedules: values at step 0, the end of warmup, the midpoint of the decay, the
// end and after it, for cosine, linear and constant; validation messages.
#include "train/lr_schedule.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "common/error.hpp"

namespace tr = patchbay::train;

TEST_CASE("cosine with warmup: 0 -> lr linearly, then cosine to min_lr, then min_lr") {
  const tr::LrSchedule s{tr::LrScheduleKind::kCosine, 6e-4, 6e-5, 100, 1100};
  CHECK(tr::learning_rate(s, 0) == 0.0);
  CHECK(tr::learning_rate(s, 25) == doctest::Approx(1.5e-4));
  CHECK(tr::learning_rate(s, 100) == doctest::Approx(6e-4));    // warmup end: the peak
  CHECK(tr::learning_rate(s, 600) == doctest::Approx(3.3e-4));  // midpoint: (lr + min) / 2
  // a quarter into the decay: min + (lr - min)(1 + cos(pi / 4)) / 2
  CHECK(tr::learning_rate(s, 350) ==
        doctest::Approx(6e-5 + 5.4e-4 * (1 + std::cos(std::numbers::pi / 4)) / 2));
  CHECK(tr::learning_rate(s, 1100) == doctest::Approx(6e-5));  // end
  CHECK(tr::learning_rate(s, 5000) == doctest::Approx(6e-5));  // after: constant min_lr
  double previous = tr::learning_rate(s, 100);
  for (int64_t step = 101; step <= 1100; ++step) {  // monotone decay
    const double lr = tr::learning_rate(s, step);
    REQUIRE(lr <= previous);
    previous = lr;
  }
}

TEST_CASE("linear decay and constant, with and without warmup") {
  const tr::LrSchedule linear{tr::LrScheduleKind::kLinear, 1.0, 0.0, 0, 10};
  CHECK(tr::learning_rate(linear, 0) == 1.0);  // no warmup: the first update uses lr
  CHECK(tr::learning_rate(linear, 5) == doctest::Approx(0.5));
  CHECK(tr::learning_rate(linear, 9) == doctest::Approx(0.1));
  CHECK(tr::learning_rate(linear, 10) == 0.0);
  const tr::LrSchedule constant{tr::LrScheduleKind::kConstant, 0.1, 0.0, 4, 0};
  CHECK(tr::learning_rate(constant, 0) == 0.0);
  CHECK(tr::learning_rate(constant, 2) == doctest::Approx(0.05));
  CHECK(tr::learning_rate(constant, 4) == doctest::Approx(0.1));
  CHECK(tr::learning_rate(constant, 1000000) == doctest::Approx(0.1));
}

TEST_CASE("schedule names and validation messages") {
  CHECK(tr::lr_schedule_kind("cosine") == tr::LrScheduleKind::kCosine);
  CHECK(std::string(tr::lr_schedule_kind_name(tr::LrScheduleKind::kLinear)) == "linear");
  CHECK_THROWS_WITH_AS(tr::lr_schedule_kind("cosin"), doctest::Contains("constant, linear, cosine"),
                       patchbay::Error);
  CHECK_NOTHROW(tr::validate(tr::LrSchedule{tr::LrScheduleKind::kCosine, 1e-3, 0.0, 10, 10}));
  CHECK_THROWS_WITH_AS(
      tr::validate(tr::LrSchedule{tr::LrScheduleKind::kCosine, 1e-3, 0.0, 100, 50}),
      doctest::Contains("max_steps = 50 must be >= warmup_steps = 100"), patchbay::Error);
  CHECK_THROWS_WITH_AS(tr::validate(tr::LrSchedule{tr::LrScheduleKind::kLinear, 1e-3, 2e-3, 0, 50}),
                       doctest::Contains("min_lr"), patchbay::Error);
  CHECK_THROWS_AS(tr::validate(tr::LrSchedule{tr::LrScheduleKind::kConstant, 0.0, 0.0, 0, 0}),
                  patchbay::Error);
}

TEST_CASE("inverse_sqrt: peak at the end of warmup, then lr * sqrt(W / step), floored at min_lr") {
  const tr::LrSchedule s{tr::LrScheduleKind::kInverseSqrt, 1e-3, 1e-4, 100, 1000};
  CHECK(tr::learning_rate(s, 50) == doctest::Approx(5e-4));    // warmup as every kind
  CHECK(tr::learning_rate(s, 100) == doctest::Approx(1e-3));   // the peak
  CHECK(tr::learning_rate(s, 400) == doctest::Approx(5e-4));   // sqrt(100 / 400) = 1/2
  CHECK(tr::learning_rate(s, 2500) == doctest::Approx(2e-4));  // past max_steps: no end
  CHECK(tr::learning_rate(s, 40000) == doctest::Approx(1e-4)); // 5e-5 floored at min_lr
  const tr::LrSchedule no_warmup{tr::LrScheduleKind::kInverseSqrt, 1e-3, 0.0, 0, 10};
  CHECK(tr::learning_rate(no_warmup, 0) == doctest::Approx(1e-3));
  CHECK(tr::learning_rate(no_warmup, 4) == doctest::Approx(5e-4));
  CHECK_NOTHROW(tr::validate(no_warmup));
}

TEST_CASE("wsd: warmup, a stable plateau, then the chosen tail down to min_lr") {
  // W = 10, S = 110, D = 20: stable on [10, 90), decay over [90, 110).
  tr::LrSchedule s{tr::LrScheduleKind::kWarmupStableDecay, 1.0, 0.1, 10, 110, 20, tr::DecayShape::kLinear};
  CHECK(tr::learning_rate(s, 5) == doctest::Approx(0.5));
  CHECK(tr::learning_rate(s, 10) == doctest::Approx(1.0));
  CHECK(tr::learning_rate(s, 89) == doctest::Approx(1.0));   // last stable step
  CHECK(tr::learning_rate(s, 90) == doctest::Approx(1.0));   // r = 0
  CHECK(tr::learning_rate(s, 95) == doctest::Approx(0.1 + 0.9 * 0.75));  // r = 1/4
  CHECK(tr::learning_rate(s, 100) == doctest::Approx(0.55));  // r = 1/2
  CHECK(tr::learning_rate(s, 110) == doctest::Approx(0.1));
  s.decay_shape = tr::DecayShape::kCosine;
  CHECK(tr::learning_rate(s, 100) == doctest::Approx(0.55));
  CHECK(tr::learning_rate(s, 95) == doctest::Approx(0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 4)) / 2));
  s.decay_shape = tr::DecayShape::kOneMinusSqrt;
  CHECK(tr::learning_rate(s, 95) == doctest::Approx(0.1 + 0.9 * 0.5));  // 1 - sqrt(1/4)
  CHECK(tr::learning_rate(s, 100) == doctest::Approx(0.1 + 0.9 * (1 - std::sqrt(0.5))));
  CHECK_NOTHROW(tr::validate(s));
  s.decay_steps = 101;  // longer than the 100 updates after warmup
  CHECK_THROWS_WITH(tr::validate(s), doctest::Contains("decay_steps"));
  CHECK(tr::decay_shape("1-sqrt") == tr::DecayShape::kOneMinusSqrt);
  CHECK_THROWS_WITH(tr::decay_shape("exp"), doctest::Contains("1-sqrt"));
  CHECK_THROWS_WITH(tr::lr_schedule_kind("step"), doctest::Contains("inverse_sqrt, wsd"));
}
