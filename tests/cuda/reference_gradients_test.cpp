// CPU tests of the CPU twins in kernels/cuda/reference (what the GPU tests trust): every
// backward pass against central finite differences of its forward, through a random linear
// loss L = sum(forward(x) * w), so dL/dy = w; and adjoint identities for the linear ops
// (embedding, rotary). Runs in CI with or without nvcc.
#include <doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "patchbay/kernels/cuda/attention_reference.hpp"
#include "patchbay/kernels/cuda/bias_activation_reference.hpp"
#include "patchbay/kernels/cuda/embedding_rotary_reference.hpp"
#include "patchbay/kernels/cuda/normalization_reference.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy_reference.hpp"

namespace cuda = patchbay::kernels::cuda;

namespace {

std::vector<float> random_values(size_t count, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (auto& v : values) v = normal(generator);
  return values;
}

double weighted_sum(const std::vector<float>& y, const std::vector<float>& w) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) sum += double(y[i]) * w[i];
  return sum;
}

// Checks analytic[i] against (loss(x + h e_i) - loss(x - h e_i)) / 2h for every i.
void check_gradient(const char* what, std::vector<float> x,
                    const std::function<double(const std::vector<float>&)>& loss,
                    const std::vector<float>& analytic, double h = 1e-2, double tolerance = 2e-3) {
  REQUIRE(analytic.size() == x.size());
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float original = x[i];
    x[i] = original + float(h);
    const double up = loss(x);
    x[i] = original - float(h);
    const double down = loss(x);
    x[i] = original;
    const double numeric =
        (up - down) / (double(original + float(h)) - double(original - float(h)));
    error += (numeric - analytic[i]) * (numeric - analytic[i]);
    norm += numeric * numeric;
  }
  INFO(what);
  CHECK(std::sqrt(error / std::max(norm, 1e-30)) < tolerance);
}

}  // namespace

TEST_CASE("bias_activation reference: dx and dbias are the forward's gradients") {
  const int64_t rows = 3, cols = 5;
  const auto x = random_values(15, 1), bias = random_values(5, 2), w = random_values(15, 3);
  for (const auto kind : {cuda::math::Activation::kGeluTanh, cuda::math::Activation::kGeluErf}) {
    std::vector<float> dx(15), dbias(5), y(15);
    cuda::bias_activation_backward_reference(kind, x.data(), bias.data(), w.data(), dx.data(),
                                             dbias.data(), rows, cols);
    check_gradient(
        "dx", x,
        [&](const std::vector<float>& xs) {
          cuda::bias_activation_forward_reference(kind, xs.data(), bias.data(), y.data(), rows,
                                                  cols);
          return weighted_sum(y, w);
        },
        dx);
    check_gradient(
        "dbias", bias,
        [&](const std::vector<float>& bs) {
          cuda::bias_activation_forward_reference(kind, x.data(), bs.data(), y.data(), rows, cols);
          return weighted_sum(y, w);
        },
        dbias);
  }
}

TEST_CASE("layer norm and RMS norm references: dx, dgamma, dbeta by finite differences") {
  const int64_t rows = 3, cols = 7;
  const auto x = random_values(21, 4, 2.0f), gamma = random_values(7, 5),
             beta = random_values(7, 6), w = random_values(21, 7);
  std::vector<float> y(21), mean(3), rstd(3), dx(21), dgamma(7), dbeta(7);
  cuda::layer_norm_forward_reference(x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                                     rstd.data(), rows, cols, 1e-5f);
  cuda::layer_norm_backward_reference(x.data(), gamma.data(), mean.data(), rstd.data(), w.data(),
                                      nullptr, dx.data(), dgamma.data(), dbeta.data(), rows, cols);
  auto layer_norm_loss = [&](const std::vector<float>& xs, const std::vector<float>& gs,
                             const std::vector<float>& bs) {
    std::vector<float> out(21), m(3), r(3);
    cuda::layer_norm_forward_reference(xs.data(), gs.data(), bs.data(), out.data(), m.data(),
                                       r.data(), rows, cols, 1e-5f);
    return weighted_sum(out, w);
  };
  check_gradient(
      "layer norm dx", x, [&](const auto& xs) { return layer_norm_loss(xs, gamma, beta); }, dx);
  check_gradient(
      "layer norm dgamma", gamma, [&](const auto& gs) { return layer_norm_loss(x, gs, beta); },
      dgamma);
  check_gradient(
      "layer norm dbeta", beta, [&](const auto& bs) { return layer_norm_loss(x, gamma, bs); },
      dbeta);

  cuda::rms_norm_forward_reference(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols,
                                   1e-6f);
  cuda::rms_norm_backward_reference(x.data(), gamma.data(), rstd.data(), w.data(), dx.data(),
                                    dgamma.data(), rows, cols);
  auto rms_loss = [&](const std::vector<float>& xs, const std::vector<float>& gs) {
    std::vector<float> out(21), r(3);
    cuda::rms_norm_forward_reference(xs.data(), gs.data(), out.data(), r.data(), rows, cols, 1e-6f);
    return weighted_sum(out, w);
  };
  check_gradient(
      "rms dx", x, [&](const auto& xs) { return rms_loss(xs, gamma); }, dx);
  check_gradient(
      "rms dgamma", gamma, [&](const auto& gs) { return rms_loss(x, gs); }, dgamma);
}

TEST_CASE("softmax and cross-entropy references: gradients by finite differences") {
  const int64_t rows = 2, cols = 6;
  const auto x = random_values(12, 8, 2.0f), w = random_values(12, 9);
  std::vector<float> y(12), dx(12);
  cuda::softmax_forward_reference(x.data(), y.data(), rows, cols);
  cuda::softmax_backward_reference(y.data(), w.data(), dx.data(), rows, cols);
  check_gradient(
      "softmax dx", x,
      [&](const std::vector<float>& xs) {
        std::vector<float> out(12);
        cuda::softmax_forward_reference(xs.data(), out.data(), rows, cols);
        return weighted_sum(out, w);
      },
      dx, 1e-2, 5e-3);

  cuda::log_softmax_forward_reference(x.data(), y.data(), rows, cols);
  cuda::log_softmax_backward_reference(y.data(), w.data(), dx.data(), rows, cols);
  check_gradient(
      "log-softmax dx", x,
      [&](const std::vector<float>& xs) {
        std::vector<float> out(12);
        cuda::log_softmax_forward_reference(xs.data(), out.data(), rows, cols);
        return weighted_sum(out, w);
      },
      dx);

  const std::vector<int32_t> targets = {4, -100};
  std::vector<float> losses(2), dlogits(12);
  cuda::cross_entropy_forward_backward_reference(x.data(), targets.data(), losses.data(),
                                                 dlogits.data(), rows, cols, -100, 0.5f);
  CHECK(losses[1] == 0.0f);
  check_gradient(
      "cross-entropy dlogits", x,
      [&](const std::vector<float>& xs) {
        std::vector<float> l(2);
        cuda::cross_entropy_forward_backward_reference(xs.data(), targets.data(), l.data(), nullptr,
                                                       rows, cols, -100, 1.0f);
        return 0.5 * (double(l[0]) + l[1]);
      },
      dlogits);
}

TEST_CASE("attention reference: dq, dk, dv by finite differences; causal (future keys unused)") {
  const int64_t heads = 2, steps = 5, dim = 4;
  const size_t n = size_t(heads * steps * dim);
  const auto q = random_values(n, 10), k = random_values(n, 11), v = random_values(n, 12),
             w = random_values(n, 13);
  const float scale = 0.5f;
  std::vector<float> dq(n), dk(n), dv(n);
  cuda::causal_attention_backward_reference(q.data(), k.data(), v.data(), w.data(), dq.data(),
                                            dk.data(), dv.data(), heads, steps, dim, scale);
  auto loss = [&](const std::vector<float>& qs, const std::vector<float>& ks,
                  const std::vector<float>& vs) {
    std::vector<float> out(n), lse(size_t(heads * steps));
    cuda::causal_attention_forward_reference(qs.data(), ks.data(), vs.data(), out.data(),
                                             lse.data(), heads, steps, dim, scale);
    return weighted_sum(out, w);
  };
  check_gradient(
      "dq", q, [&](const auto& qs) { return loss(qs, k, v); }, dq);
  check_gradient(
      "dk", k, [&](const auto& ks) { return loss(q, ks, v); }, dk);
  check_gradient(
      "dv", v, [&](const auto& vs) { return loss(q, k, vs); }, dv);
  // Row 0 attends to key 0 only: its output is v_0 exactly, and lse is its own scaled score.
  std::vector<float> out(n), lse(size_t(heads * steps));
  cuda::causal_attention_forward_reference(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                           heads, steps, dim, scale);
  for (int64_t d = 0; d < dim; ++d) CHECK(out[size_t(d)] == doctest::Approx(v[size_t(d)]));
  // Row 0's log-sum-exp is its one scaled score q_0 . k_0.
  double self = 0.0;
  for (int64_t d = 0; d < dim; ++d) self += double(q[size_t(d)]) * k[size_t(d)];
  CHECK(lse[0] == doctest::Approx(self * scale).epsilon(1e-6));
}

TEST_CASE("embedding and rotary references are adjoint to their backward passes") {
  const int64_t count = 6, vocab = 4, dim = 3;
  const std::vector<int64_t> ids = {0, 3, 3, 1, 0, 3};
  const auto weight = random_values(12, 14), g = random_values(18, 15);
  std::vector<float> out(18), dweight(12, 0.0f);
  cuda::embedding_forward_reference(ids.data(), weight.data(), out.data(), count, vocab, dim);
  cuda::embedding_backward_reference(ids.data(), g.data(), dweight.data(), count, vocab, dim);
  CHECK(weighted_sum(out, g) == doctest::Approx(weighted_sum(weight, dweight)).epsilon(1e-6));
  CHECK(dweight[2 * 3] == 0.0f);  // id 2 never appears

  const int64_t rows = 2, steps = 3, rdim = 8;
  const auto x = random_values(48, 16), y = random_values(48, 17);
  std::vector<float> rx(48), ry_inverse(48), back(48);
  cuda::rotary_embedding_reference(x.data(), rx.data(), rows, steps, rdim, 5, 10000.0, false);
  cuda::rotary_embedding_reference(y.data(), ry_inverse.data(), rows, steps, rdim, 5, 10000.0,
                                   true);
  CHECK(weighted_sum(rx, y) == doctest::Approx(weighted_sum(x, ry_inverse)).epsilon(1e-5));
  cuda::rotary_embedding_reference(rx.data(), back.data(), rows, steps, rdim, 5, 10000.0, true);
  for (size_t i = 0; i < 48; ++i) CHECK(back[i] == doctest::Approx(x[i]).epsilon(1e-5));
}
