// Cross-entropy kernels: known answers (uniform logits give log V; a hand-computed row with
// label smoothing), agreement with the double-precision reference, ignore_index handling,
// stability at large logits, and the backward pass against the reference and against
// central finite differences of the forward kernel; and the SIMD exp it is built on.
#include "patchbay/kernels/cross_entropy.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "patchbay/kernels/exp_f32.hpp"
#include "random_fill.hpp"

namespace pk = patchbay::kernels;
using pk::testing::random_floats;
using pk::testing::random_ids;

namespace {

// Mean loss over rows not ignored, as the engine computes it.
template <class Index>
double mean_loss(const std::vector<float>& logits, const std::vector<Index>& targets,
                 int64_t classes, const pk::CrossEntropyOptions& options) {
  const auto rows = int64_t(targets.size());
  std::vector<float> row_loss(targets.size()), lse(targets.size());
  const int64_t count = pk::cross_entropy_forward(logits.data(), targets.data(), rows, classes,
                                                  options, row_loss.data(), lse.data());
  double sum = 0.0;
  for (float l : row_loss) sum += l;
  return sum / double(count);
}

}  // namespace

TEST_CASE("cross-entropy of uniform logits is log(classes), with or without smoothing") {
  const int64_t rows = 3, classes = 50;
  const std::vector<float> logits(size_t(rows * classes), 0.7f);
  const std::vector<int32_t> targets = {0, 49, 17};
  for (float smoothing : {0.0f, 0.3f}) {
    const double loss = mean_loss(logits, targets, classes, {.label_smoothing = smoothing});
    CHECK(loss == doctest::Approx(std::log(50.0)).epsilon(1e-6));
  }
}

TEST_CASE("cross-entropy known answer with label smoothing") {
  // p = (1/6, 2/6, 3/6), target 2, ε = 0.1:
  // loss = 0.9·(−log 1/2) + 0.1·(1/3)·(−log 1/6 − log 2/6 − log 3/6).
  const std::vector<float> logits = {std::log(1.0f), std::log(2.0f), std::log(3.0f)};
  const std::vector<int64_t> targets = {2};
  const double expected =
      0.9 * std::log(2.0) + 0.1 / 3.0 * (std::log(6.0) + std::log(3.0) + std::log(2.0));
  CHECK(mean_loss(logits, targets, 3, {.label_smoothing = 0.1f}) ==
        doctest::Approx(expected).epsilon(1e-6));
  CHECK(mean_loss(logits, targets, 3, {}) == doctest::Approx(std::log(2.0)).epsilon(1e-6));
}

TEST_CASE_TEMPLATE("cross-entropy forward and backward match the reference", Index, int32_t,
                   int64_t) {
  const int64_t rows = 64, classes = 1000;
  const auto logits = random_floats(size_t(rows * classes), 11, -6.0f, 6.0f);
  auto targets = random_ids<Index>(size_t(rows), classes, 12);
  targets[5] = Index(-100);
  targets[40] = Index(-100);
  const auto row_grad = random_floats(size_t(rows), 13, 0.1f, 1.0f);

  for (float smoothing : {0.0f, 0.1f}) {
    const pk::CrossEntropyOptions options{.label_smoothing = smoothing};
    std::vector<float> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows));
    std::vector<float> loss_ref(static_cast<size_t>(rows)), lse_ref(static_cast<size_t>(rows));
    const int64_t count = pk::cross_entropy_forward(logits.data(), targets.data(), rows, classes,
                                                    options, loss.data(), lse.data());
    const int64_t count_ref = pk::cross_entropy_forward_reference(
        logits.data(), targets.data(), rows, classes, options, loss_ref.data(), lse_ref.data());
    CHECK(count == rows - 2);
    CHECK(count_ref == count);
    CHECK(loss[5] == 0.0f);
    CHECK(loss[40] == 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      // float rounding of a sum of O(10) terms in a loss of O(10): ~1e-6 relative.
      CHECK(loss[size_t(r)] == doctest::Approx(loss_ref[size_t(r)]).epsilon(2e-6));
      CHECK(lse[size_t(r)] == doctest::Approx(lse_ref[size_t(r)]).epsilon(2e-6));
    }

    std::vector<float> grad(size_t(rows * classes)), grad_ref(grad.size());
    pk::cross_entropy_backward(logits.data(), targets.data(), lse.data(), row_grad.data(), rows,
                               classes, options, grad.data());
    pk::cross_entropy_backward_reference(logits.data(), targets.data(), row_grad.data(), rows,
                                         classes, options, grad_ref.data());
    double worst = 0.0;
    for (size_t i = 0; i < grad.size(); ++i)
      worst = std::max(worst, std::abs(double(grad[i]) - double(grad_ref[i])));
    // Entries are ≤ 1 in size; exp of a float argument carries ~1e-6 relative error.
    CHECK(worst < 2e-6);
    for (int64_t j = 0; j < classes; ++j) CHECK(grad[size_t(5 * classes + j)] == 0.0f);
    // Each row of (softmax − q) sums to zero.
    for (int64_t r = 0; r < rows; ++r) {
      double row_sum = 0.0;
      for (int64_t j = 0; j < classes; ++j) row_sum += grad[size_t(r * classes + j)];
      CHECK(std::abs(row_sum) < 1e-5);
    }
  }
}

TEST_CASE("cross-entropy is stable for huge logits and honours a custom ignore_index") {
  const int64_t rows = 4, classes = 7;
  const auto base = random_floats(size_t(rows * classes), 21);
  auto shifted = base;
  for (auto& z : shifted) z += 1.0e4f;  // a naive exp() would overflow to inf
  const std::vector<int64_t> targets = {3, 0, 6, 3};
  const pk::CrossEntropyOptions ignore_three{.ignore_index = 3};
  const double loss = mean_loss(base, targets, classes, ignore_three);
  const double loss_shifted = mean_loss(shifted, targets, classes, ignore_three);
  REQUIRE(std::isfinite(loss_shifted));
  // Adding 1e4 to float logits rounds each to a multiple of 2^-10: loss moves by ≤ ~1e-3.
  CHECK(loss_shifted == doctest::Approx(loss).epsilon(2e-3));

  std::vector<float> row_loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows));
  CHECK(pk::cross_entropy_forward(base.data(), targets.data(), rows, classes, ignore_three,
                                  row_loss.data(), lse.data()) == 2);
  CHECK(row_loss[0] == 0.0f);
  CHECK(row_loss[3] == 0.0f);
}

TEST_CASE("cross-entropy finds the row maximum wherever it lies (vector lanes and the tail)") {
  // One logit 200 above the rest: a maximum that missed it would leave exp(z - max) past the
  // exp's range (clamped at 88), and the loss would be wrong by ~100 nats.
  for (const int64_t classes : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{37}}) {
    for (int64_t at = 0; at < classes; ++at) {
      std::vector<float> logits(size_t(classes), -1.0f);
      logits[size_t(at)] = 199.0f;
      const std::vector<int32_t> hit = {int32_t(at)}, miss = {int32_t((at + 1) % classes)};
      CHECK(mean_loss(logits, hit, classes, {}) ==
            doctest::Approx(std::log1p(double(classes - 1) * std::exp(-200.0))));
      if (classes > 1) CHECK(mean_loss(logits, miss, classes, {}) == doctest::Approx(200.0));
    }
  }
}

TEST_CASE("cross-entropy with every row ignored has count 0, so its mean is NaN") {
  const std::vector<float> logits(6, 1.0f);
  const std::vector<int32_t> targets = {-100, -100};
  CHECK(std::isnan(mean_loss(logits, targets, 3, {})));
}

TEST_CASE("cross-entropy backward matches central finite differences of the forward") {
  const int64_t rows = 3, classes = 5;
  auto logits = random_floats(size_t(rows * classes), 31);
  const std::vector<int32_t> targets = {4, -100, 1};
  const pk::CrossEntropyOptions options{.label_smoothing = 0.2f};
  // Objective: mean loss, so row_grad = 1/count on every row.
  std::vector<float> row_loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows));
  const int64_t count = pk::cross_entropy_forward(logits.data(), targets.data(), rows, classes,
                                                  options, row_loss.data(), lse.data());
  const std::vector<float> row_grad(size_t(rows), 1.0f / float(count));
  std::vector<float> grad(logits.size());
  pk::cross_entropy_backward(logits.data(), targets.data(), lse.data(), row_grad.data(), rows,
                             classes, options, grad.data());
  const float step = 1e-2f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + step;
    const double up = mean_loss(logits, targets, classes, options);
    logits[i] = saved - step;
    const double down = mean_loss(logits, targets, classes, options);
    logits[i] = saved;
    // Truncation error ~ step²·|f'''|/6 ≈ 1e-5; float forward rounding / step ≈ 1e-5.
    CHECK(grad[i] == doctest::Approx((up - down) / (2.0 * step)).epsilon(2e-3).scale(0.1));
  }
}

TEST_CASE_TEMPLATE("first_invalid_target accepts ignore_index and rejects the rest", Index, int32_t,
                   int64_t) {
  const std::vector<Index> targets = {0, -100, 4, 5, -1};
  CHECK(pk::first_invalid_target(targets.data(), 3, 5, -100) == -1);
  CHECK(pk::first_invalid_target(targets.data(), 5, 5, -100) == 3);
  CHECK(pk::first_invalid_target(targets.data(), 5, 5, 5) == 1);
}

TEST_CASE("exp_f32 is within a few ulp of exp, 0 below -87, and propagates NaN") {
  double worst_relative = 0.0;
  for (int i = 0; i < 175000; ++i) {
    const auto x = static_cast<float>(-87.0 + 0.001 * i);  // [-87, 88)
    const double exact = std::exp(double(x));
    worst_relative = std::max(worst_relative, std::abs(double(pk::exp_f32(x)) - exact) / exact);
  }
  CHECK(worst_relative < 4 * 5.97e-8);  // 4 ulp at the bottom of a binade (2^-24)
  CHECK(pk::exp_f32(0.0f) == 1.0f);
  CHECK(pk::exp_f32(-100.0f) == 0.0f);
  CHECK(pk::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(pk::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}
