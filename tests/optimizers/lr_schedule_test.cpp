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
