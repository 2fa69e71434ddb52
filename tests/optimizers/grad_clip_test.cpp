// Global-norm clipping: the norm over several parameters (one without a grad), scaling only
// above max_norm, NaN/Inf reported without touching the grads, determinism over threads, and
// clip_factor (the factor the trainer folds into the optimizer's pass).
#include "train/grad_clip.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace eng = patchbay::engine;
namespace tr = patchbay::train;

namespace {

// A leaf whose grad is `grad` (set directly, as backward would leave it).
eng::Tensor param_with_grad(const std::vector<float>& grad) {
  eng::Tensor p = eng::zeros({static_cast<int64_t>(grad.size())});
  p.set_requires_grad(true);
  p.set_grad(eng::Tensor::from_vector(grad, {static_cast<int64_t>(grad.size())}));
  return p;
}

}  // namespace

TEST_CASE("the global norm covers every grad; clipping scales all by max_norm / (norm + 1e-6)") {
  // grads [3, 4] and [12]: norm sqrt(9 + 16 + 144) = 13; a parameter without grad is skipped.
  eng::Tensor no_grad = eng::zeros({5});
  no_grad.set_requires_grad(true);
  const std::vector<eng::Tensor> params = {param_with_grad({3, 4}), no_grad, param_with_grad({12})};
  CHECK(tr::global_grad_norm(params) == doctest::Approx(13.0));
  const tr::ClipResult r = tr::clip_grad_norm(params, 1.0);
  CHECK(r.norm == doctest::Approx(13.0));
  CHECK(r.clipped);
  const double scale = 1.0 / (13.0 + 1e-6);
  CHECK(params[0].grad().to_vector()[1] == doctest::Approx(4 * scale));
  CHECK(params[2].grad().to_vector()[0] == doctest::Approx(12 * scale));
  CHECK(tr::global_grad_norm(params) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK_FALSE(params[1].grad().defined());
}

TEST_CASE("a norm at or below max_norm leaves the grads untouched") {
  const std::vector<eng::Tensor> params = {param_with_grad({3, 4})};
  const tr::ClipResult r = tr::clip_grad_norm(params, 5.0);
  CHECK_FALSE(r.clipped);
  CHECK(params[0].grad().to_vector() == std::vector<float>{3, 4});
}

TEST_CASE("NaN and Inf norms are reported and nothing is scaled") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<eng::Tensor> params = {param_with_grad({3, nan}), param_with_grad({100})};
  const tr::ClipResult r = tr::clip_grad_norm(params, 1.0);
  CHECK(std::isnan(r.norm));
  CHECK_FALSE(r.finite);
  CHECK_FALSE(r.clipped);
  CHECK(params[1].grad().to_vector()[0] == 100.0f);
  const std::vector<eng::Tensor> inf = {param_with_grad({std::numeric_limits<float>::infinity()})};
  CHECK(std::isinf(tr::clip_grad_norm(inf, 1.0).norm));
  CHECK_THROWS_AS(tr::clip_grad_norm(params, 0.0), patchbay::Error);
}

TEST_CASE("the norm of a large grad is accumulated in double and does not depend on threads") {
  // 300k elements of 0.1f (above kNormBlock, so several blocks): sum of squares 300000 * 0.1f^2.
  const int64_t n = 300000;
  std::vector<float> g(static_cast<size_t>(n), 0.1f);
  const std::vector<eng::Tensor> params = {param_with_grad(g)};
  const double expected = std::sqrt(static_cast<double>(n) * double(0.1f) * double(0.1f));
  const double first = tr::global_grad_norm(params);
  CHECK(first == doctest::Approx(expected).epsilon(1e-12));
  CHECK(tr::global_grad_norm(params) == first);  // bit-identical on repeat
}

TEST_CASE("clip_factor is the factor clip_grad_norm scales by, and 1 where it scales nothing") {
  CHECK(tr::clip_factor(13.0, 1.0) == 1.0 / (13.0 + tr::kClipEpsilon));
  CHECK(tr::clip_factor(13.0, 20.0) == 1.0);  // below max_norm
  CHECK(tr::clip_factor(13.0, 0.0) == 1.0);   // clipping off
  CHECK(tr::clip_factor(std::numeric_limits<double>::quiet_NaN(), 1.0) == 1.0);
  CHECK(tr::clip_factor(std::numeric_limits<double>::infinity(), 1.0) == 1.0);
  // The same bits as the in-place scaling clip_grad_norm does.
  const std::vector<eng::Tensor> params = {param_with_grad({3, 4}), param_with_grad({12})};
  const std::vector<float> before = params[0].grad().to_vector();
  const double factor = tr::clip_factor(tr::global_grad_norm(params), 1.0);
  tr::clip_grad_norm(params, 1.0);
  CHECK(params[0].grad().to_vector()[1] == before[1] * static_cast<float>(factor));
}
