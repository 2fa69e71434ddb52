// Global-norm clipping: the norm over several parameters (one without a grad), scaling only
// above max_norm, NaN/Inf reported without touching the grads, determinism over threads,
// clip_factor (the factor the trainer folds into the optimizer's pass), and the norm summed
// during backward (GradNormInBackward) against the norm taken afterwards.
#include "train/grad_clip.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "train/grad_norm_in_backward.hpp"

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

TEST_CASE("the square sum of one grad: odd lengths and block borders against a long double sum") {
  for (const int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, tr::kNormBlock - 1,
                          tr::kNormBlock + 17, 3 * tr::kNormBlock + 5}) {
    std::vector<float> g(static_cast<size_t>(n));
    long double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      g[size_t(i)] = static_cast<float>(std::sin(0.37 * double(i)) * (1.0 + double(i % 7)));
      expected += static_cast<long double>(g[size_t(i)]) * g[size_t(i)];
    }
    const eng::Tensor p = param_with_grad(g);
    CAPTURE(n);
    CHECK(tr::param_grad_square_sum(p) ==
          doctest::Approx(static_cast<double>(expected)).epsilon(1e-13));
  }
  CHECK(tr::param_grad_square_sum(eng::zeros({4})) == 0.0);  // no grad
}

namespace {

// Three parameters of a small graph: `tied` used twice (a tied embedding's two edges), `big`
// above one norm block, `unused` outside the graph. loss = sum((x @ tied^T) * (x @ tied^T))
// + sum(big * big * 0.5) + sum(tied * 3).
struct NormGraph {
  eng::Generator gen{7};
  eng::Tensor x = eng::randn({8, 16}, gen);
  std::vector<eng::Tensor> params = {leaf({12, 16}), leaf({3 * tr::kNormBlock + 11}), leaf({5})};
  eng::Tensor leaf(const eng::Shape& shape) {
    eng::Tensor p = eng::randn(shape, gen);
    p.set_requires_grad(true);
    return p;
  }
  eng::Tensor loss_all() {
    const eng::Tensor y = eng::matmul(x, params[0], false, true);
    return eng::sum(y * y) + eng::sum(params[1] * params[1] * 0.5) + eng::sum(params[0] * 3.0);
  }
  eng::Tensor loss_tied_only() { return eng::sum(params[0] * params[0]); }
};

}  // namespace

TEST_CASE("the norm summed during backward has the bits of the norm taken afterwards") {
  NormGraph graph;
  double in_backward = 0;
  size_t summed = 0;
  {
    tr::GradNormInBackward norm(graph.params);
    eng::backward(graph.loss_all());
    in_backward = norm.finish();
    summed = norm.summed_in_backward();
  }
  CHECK(summed == 2);  // tied and big: the hook really took them; unused has no grad
  CHECK(in_backward == tr::global_grad_norm(graph.params));
  CHECK(in_backward > 0);
}

TEST_CASE("a grad left by an earlier backward only is summed by finish(), and hooks chain") {
  NormGraph graph;
  eng::backward(graph.loss_all());  // first micro-batch: every used parameter gets a grad
  int outer_calls = 0;
  eng::set_leaf_grad_ready_hook([&](const eng::Tensor&) { ++outer_calls; });
  struct ClearHook {  // the hook captures locals: removed however the test ends
    ~ClearHook() { eng::set_leaf_grad_ready_hook(nullptr); }
  } clear_hook;
  double in_backward = 0;
  {
    tr::GradNormInBackward norm(graph.params);
    eng::backward(graph.loss_tied_only());  // last micro-batch reaches `tied` only
    CHECK(norm.summed_in_backward() == 1);
    in_backward = norm.finish();
  }
  CHECK(outer_calls == 1);  // the hook set before was called too
  CHECK(in_backward == tr::global_grad_norm(graph.params));  // big's grad counted by finish()
  // The previous hook is back in place once the norm is finished.
  eng::backward(graph.loss_tied_only());
  CHECK(outer_calls == 2);
}
