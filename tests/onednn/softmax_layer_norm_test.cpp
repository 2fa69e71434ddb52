// softmax / log-softmax and layer norm, forward and backward, against double loops on odd
// shapes. Tolerances: a few f32 ulps relative to the magnitudes involved (the reference is
// exact to double precision; oneDNN computes in f32 with its own exp).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "onednn/onednn_ops.hpp"
#include "reference_math.hpp"

namespace patchbay::onednn {
namespace {

using testing::check_close;

const std::int64_t kShapes[][2] = {{1, 1}, {1, 17}, {3, 65}, {17, 3}, {65, 129}, {5, 1000}};

TEST_CASE("softmax and log-softmax forward and backward match the reference") {
  for (auto [rows, cols] : kShapes) {
    for (SoftmaxKind kind : {SoftmaxKind::kSoftmax, SoftmaxKind::kLogSoftmax}) {
      const bool log = kind == SoftmaxKind::kLogSoftmax;
      CAPTURE(rows);
      CAPTURE(cols);
      CAPTURE(log);
      const auto count = static_cast<std::size_t>(rows * cols);
      const std::vector<float> src = testing::random_floats(count, 21, -8.0f, 8.0f);
      const std::vector<float> diff_dst = testing::random_floats(count, 22);
      std::vector<float> dst(count), diff_src(count);
      softmax_forward(kind, src.data(), dst.data(), rows, cols);
      softmax_backward(kind, dst.data(), diff_dst.data(), diff_src.data(), rows, cols);

      std::vector<double> expected(count), expected_grad(count), grad_tolerance(count);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* x = src.data() + r * cols;
        double max = x[0];
        for (std::int64_t c = 0; c < cols; ++c) max = std::max(max, static_cast<double>(x[c]));
        double denominator = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) denominator += std::exp(x[c] - max);
        double dot = 0.0, grad_sum = 0.0, abs_dot = 0.0, abs_sum = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) {
          const auto at = static_cast<std::size_t>(r * cols + c);
          const double p = std::exp(x[c] - max) / denominator;
          expected[at] = log ? (x[c] - max) - std::log(denominator) : p;
          dot += diff_dst[at] * p;
          grad_sum += diff_dst[at];
          abs_dot += std::fabs(diff_dst[at]) * p;
          abs_sum += std::fabs(diff_dst[at]);
        }
        for (std::int64_t c = 0; c < cols; ++c) {
          const auto at = static_cast<std::size_t>(r * cols + c);
          const double p = std::exp(x[c] - max) / denominator;
          expected_grad[at] = log ? diff_dst[at] - p * grad_sum : p * (diff_dst[at] - dot);
          // Scale of the terms that cancel: f32 rounding of each is relative to it.
          const double scale = log ? std::fabs(diff_dst[at]) + p * abs_sum
                                   : p * (std::fabs(diff_dst[at]) + abs_dot);
          grad_tolerance[at] = 1e-7 + 1e-5 * scale;
        }
      }
      check_close(dst, expected, 2e-6, log ? 2e-5 : 1e-7, "forward");
      check_close(diff_src, expected_grad, grad_tolerance, "backward");
    }
  }
}

TEST_CASE("softmax forward works in place") {
  std::vector<float> data{0.0f, std::log(3.0f)};
  softmax_forward(SoftmaxKind::kSoftmax, data.data(), data.data(), 1, 2);
  CHECK(data[0] == doctest::Approx(0.25));
  CHECK(data[1] == doctest::Approx(0.75));
}

struct LayerNormReference {
  std::vector<double> dst, mean, variance, diff_src, diff_gain, diff_bias;
};

LayerNormReference layer_norm_reference(const std::vector<float>& src,
                                        const std::vector<float>& gain,
                                        const std::vector<float>& bias,
                                        const std::vector<float>& diff_dst, std::int64_t rows,
                                        std::int64_t cols, double epsilon) {
  LayerNormReference ref;
  const auto count = static_cast<std::size_t>(rows * cols);
  ref.dst.resize(count);
  ref.diff_src.resize(count);
  ref.diff_gain.assign(static_cast<std::size_t>(cols), 0.0);
  ref.diff_bias.assign(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, variance = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) mean += src[static_cast<std::size_t>(r * cols + c)];
    mean /= static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double d = src[static_cast<std::size_t>(r * cols + c)] - mean;
      variance += d * d;
    }
    variance /= static_cast<double>(cols);
    ref.mean.push_back(mean);
    ref.variance.push_back(variance);
    const double inv_std = 1.0 / std::sqrt(variance + epsilon);
    // dxhat = g * dy; dx = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    double mean_dxhat = 0.0, mean_dxhat_xhat = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto at = static_cast<std::size_t>(r * cols + c);
      const double xhat = (src[at] - mean) * inv_std;
      ref.dst[at] = gain[static_cast<std::size_t>(c)] * xhat + bias[static_cast<std::size_t>(c)];
      const double dxhat = gain[static_cast<std::size_t>(c)] * diff_dst[at];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
      ref.diff_gain[static_cast<std::size_t>(c)] += diff_dst[at] * xhat;
      ref.diff_bias[static_cast<std::size_t>(c)] += diff_dst[at];
    }
    mean_dxhat /= static_cast<double>(cols);
    mean_dxhat_xhat /= static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto at = static_cast<std::size_t>(r * cols + c);
      const double xhat = (src[at] - mean) * inv_std;
      const double dxhat = gain[static_cast<std::size_t>(c)] * diff_dst[at];
      ref.diff_src[at] = inv_std * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  return ref;
}

TEST_CASE("layer norm forward and backward match the reference") {
  const float epsilon = 1e-5f;
  for (auto [rows, cols] : kShapes) {
    if (cols == 1) continue;  // variance 0: x_hat == 0, covered by the constant-row case
    CAPTURE(rows);
    CAPTURE(cols);
    const auto count = static_cast<std::size_t>(rows * cols);
    const auto width = static_cast<std::size_t>(cols);
    const std::vector<float> src = testing::random_floats(count, 31, -3.0f, 5.0f);
    const std::vector<float> gain = testing::random_floats(width, 32, 0.5f, 1.5f);
    const std::vector<float> bias = testing::random_floats(width, 33);
    const std::vector<float> diff_dst = testing::random_floats(count, 34);
    const LayerNormReference ref =
        layer_norm_reference(src, gain, bias, diff_dst, rows, cols, epsilon);

    std::vector<float> dst(count), mean(static_cast<std::size_t>(rows)),
        variance(static_cast<std::size_t>(rows));
    layer_norm_forward({rows, cols, epsilon, src.data(), gain.data(), bias.data(), dst.data(),
                        mean.data(), variance.data()});
    check_close(dst, ref.dst, 1e-5, 1e-5, "dst");
    check_close(mean, ref.mean, 1e-6, 1e-6, "mean");
    check_close(variance, ref.variance, 1e-5, 1e-6, "variance");

    std::vector<float> diff_src(count), diff_gain(width), diff_bias(width);
    layer_norm_backward({rows, cols, epsilon, src.data(), diff_dst.data(), mean.data(),
                         variance.data(), gain.data(), diff_src.data(), diff_gain.data(),
                         diff_bias.data()});
    const double row_scale = std::sqrt(static_cast<double>(rows));
    check_close(diff_src, ref.diff_src, 1e-4, 1e-5, "diff_src");
    check_close(diff_gain, ref.diff_gain, 1e-5, 1e-5 * row_scale, "diff_gain");
    check_close(diff_bias, ref.diff_bias, 1e-5, 1e-5 * row_scale, "diff_bias");

    // Only diff_src wanted (backward_data); must match the full backward's diff_src.
    std::vector<float> diff_src_only(count);
    layer_norm_backward({rows, cols, epsilon, src.data(), diff_dst.data(), mean.data(),
                         variance.data(), gain.data(), diff_src_only.data(), nullptr, nullptr});
    check_close(diff_src_only, ref.diff_src, 1e-4, 1e-5, "diff_src (backward_data)");

    // Without gain and bias, with statistics not kept (inference).
    const std::vector<float> ones(width, 1.0f), zeros(width, 0.0f);
    const LayerNormReference plain =
        layer_norm_reference(src, ones, zeros, diff_dst, rows, cols, epsilon);
    layer_norm_forward({rows, cols, epsilon, src.data(), nullptr, nullptr, dst.data(), nullptr,
                        nullptr});
    check_close(dst, plain.dst, 1e-5, 1e-5, "dst without gain/bias");
  }
}

TEST_CASE("layer norm of a constant row is the bias, and its gradient is finite") {
  const std::vector<float> src(8, 3.0f), gain(8, 2.0f), bias{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> dst(8), mean(1), variance(1);
  layer_norm_forward({1, 8, 1e-5f, src.data(), gain.data(), bias.data(), dst.data(), mean.data(),
                      variance.data()});
  CHECK(mean[0] == doctest::Approx(3.0));
  CHECK(variance[0] == doctest::Approx(0.0));
  for (std::size_t c = 0; c < 8; ++c) CHECK(dst[c] == doctest::Approx(bias[c]));
}

TEST_CASE("layer norm refuses a diff_gain without a forward gain") {
  std::vector<float> x(4), stats(1), out(4);
  CHECK_THROWS_AS(layer_norm_backward({1, 4, 1e-5f, x.data(), x.data(), stats.data(),
                                       stats.data(), nullptr, out.data(), out.data(), nullptr}),
                  Error);
}

}  // namespace
}  // namespace patchbay::onednn
