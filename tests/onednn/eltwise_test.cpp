// Element-wise activations: forward (f32 and bf16) and backward (f32) against double
// formulas, each backward fed exactly what eltwise_backward_needs_dst() says.
// Tolerances: oneDNN's jit kernels use polynomial exp/erf/log approximations good to a few
// f32 ulps; we allow 1e-5 relative. bf16 forward: the input is already bf16, the output is
// one bf16 rounding of an f32 result: 2^-8 relative (+ f32 error).
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "onednn/bf16_through_f32.hpp"
#include "onednn/onednn_ops.hpp"
#include "reference_math.hpp"

namespace patchbay::onednn {
namespace {

using testing::check_close;

struct Reference {
  double value;
  double derivative;
};

Reference reference(EltwiseKind kind, double x) {
  const double sigmoid = 1.0 / (1.0 + std::exp(-x));
  switch (kind) {
    case EltwiseKind::kRelu:
      return {x > 0 ? x : 0.0, x > 0 ? 1.0 : 0.0};
    case EltwiseKind::kGeluTanh: {
      const double c = std::sqrt(2.0 / std::numbers::pi);
      const double t = std::tanh(c * (x + 0.044715 * x * x * x));
      return {0.5 * x * (1 + t),
              0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)};
    }
    case EltwiseKind::kGeluErf: {
      const double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
      return {x * cdf, cdf + x * pdf};
    }
    case EltwiseKind::kTanh: {
      const double t = std::tanh(x);
      return {t, 1 - t * t};
    }
    case EltwiseKind::kLogistic:
      return {sigmoid, sigmoid * (1 - sigmoid)};
    case EltwiseKind::kExp:
      return {std::exp(x), std::exp(x)};
    case EltwiseKind::kLog:
      return {std::log(x), 1 / x};
    case EltwiseKind::kSqrt:
      return {std::sqrt(x), 0.5 / std::sqrt(x)};
    case EltwiseKind::kSwish:
      return {x * sigmoid, sigmoid + x * sigmoid * (1 - sigmoid)};
  }
  return {0, 0};
}

constexpr EltwiseKind kAllKinds[] = {EltwiseKind::kRelu,  EltwiseKind::kGeluTanh,
                                     EltwiseKind::kGeluErf, EltwiseKind::kTanh,
                                     EltwiseKind::kLogistic, EltwiseKind::kExp,
                                     EltwiseKind::kLog,   EltwiseKind::kSqrt,
                                     EltwiseKind::kSwish};

std::vector<float> inputs_for(EltwiseKind kind, std::size_t count) {
  const bool positive = kind == EltwiseKind::kLog || kind == EltwiseKind::kSqrt;
  return positive ? testing::random_floats(count, 41, 0.05f, 6.0f)
                  : testing::random_floats(count, 41, -6.0f, 6.0f);
}

TEST_CASE("eltwise f32 forward and backward match the formulas") {
  for (EltwiseKind kind : kAllKinds) {
    for (std::int64_t count : {1, 17, 1000, 4099}) {
      const std::string name = eltwise_name(kind);
      CAPTURE(name);
      CAPTURE(count);
      const auto size = static_cast<std::size_t>(count);
      const std::vector<float> src = inputs_for(kind, size);
      const std::vector<float> diff_dst = testing::random_floats(size, 42);
      std::vector<float> dst(size), diff_src(size);
      eltwise_forward(kind, DType::kF32, src.data(), dst.data(), count);
      // Pass only what the backward declares it needs; the other pointer is null.
      const bool needs_dst = eltwise_backward_needs_dst(kind);
      eltwise_backward(kind, needs_dst ? nullptr : src.data(), needs_dst ? dst.data() : nullptr,
                       diff_dst.data(), diff_src.data(), count);

      std::vector<double> expected(size), expected_grad(size), grad_tolerance(size);
      for (std::size_t i = 0; i < size; ++i) {
        const Reference ref = reference(kind, src[i]);
        expected[i] = ref.value;
        expected_grad[i] = ref.derivative * diff_dst[i];
        // dst-based backward inherits dst's f32 rounding, amplified by |d f'/d y|.
        grad_tolerance[i] = 1e-6 + 2e-5 * std::fabs(expected_grad[i]) +
                            (needs_dst ? 1e-6 * std::fabs(diff_dst[i]) : 0.0);
      }
      // oneDNN's log polynomial is accurate in absolute terms (measured up to 3.5e-6 near
      // x = 1, where log x -> 0), not relative; the others hold 1e-5 relative.
      check_close(dst, expected, 1e-5, kind == EltwiseKind::kLog ? 5e-6 : 1e-6, "forward");
      testing::check_close(diff_src, expected_grad, grad_tolerance, "backward");
    }
  }
}

TEST_CASE("eltwise bf16 forward matches the formulas within one bf16 rounding") {
  for (EltwiseKind kind : kAllKinds) {
    const std::string name = eltwise_name(kind);
      CAPTURE(name);
    const std::vector<float> src = testing::from_bf16(testing::to_bf16(inputs_for(kind, 777)));
    const std::vector<std::uint16_t> src16 = testing::to_bf16(src);
    std::vector<std::uint16_t> dst16(src.size());
    eltwise_forward(kind, DType::kBF16, src16.data(), dst16.data(), 777);
    std::vector<double> expected(src.size());
    for (std::size_t i = 0; i < src.size(); ++i) expected[i] = reference(kind, src[i]).value;
    check_close(testing::from_bf16(dst16), expected, 1.0 / 128.0, 1e-6, "bf16 forward");
  }
}

// The path eltwise_forward takes for bf16 on CPUs without oneDNN bf16 kernels, called directly
// so that it runs on every CPU: the f32 result of the same inputs, rounded to nearest even.
TEST_CASE("eltwise bf16 through f32 equals the f32 primitive rounded to bf16") {
  for (EltwiseKind kind : kAllKinds) {
    const std::string name = eltwise_name(kind);
    CAPTURE(name);
    const std::vector<float> src = testing::from_bf16(testing::to_bf16(inputs_for(kind, 301)));
    const std::vector<std::uint16_t> src16 = testing::to_bf16(src);
    std::vector<std::uint16_t> dst16(src.size());
    eltwise_forward_bf16_through_f32(kind, src16.data(), dst16.data(), 301);
    std::vector<float> wide(src.size());
    eltwise_forward(kind, DType::kF32, src.data(), wide.data(), 301);
    CHECK(dst16 == testing::to_bf16(wide));
  }
}

TEST_CASE("eltwise backward refuses a missing saved tensor") {
  std::vector<float> x(4, 1.0f), g(4);
  CHECK(eltwise_backward_needs_dst(EltwiseKind::kTanh));
  CHECK_FALSE(eltwise_backward_needs_dst(EltwiseKind::kGeluTanh));
  CHECK_THROWS(eltwise_backward(EltwiseKind::kTanh, x.data(), nullptr, x.data(), g.data(), 4));
  CHECK_THROWS(
      eltwise_backward(EltwiseKind::kGeluErf, nullptr, x.data(), x.data(), g.data(), 4));
}

TEST_CASE("eltwise forward works in place") {
  std::vector<float> data{-1.0f, 2.0f};
  eltwise_forward(EltwiseKind::kRelu, DType::kF32, data.data(), data.data(), 2);
  CHECK(data == std::vector<float>{0.0f, 2.0f});
}

}  // namespace
}  // namespace patchbay::onednn
