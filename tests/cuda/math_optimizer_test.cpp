// CPU tests of the shared optimizer updates (math/optimizer_update.hpp) against the textbook
// formulas in double (torch.optim's AdamW, SGD and Lion), over several steps of fresh
// random gradients, and known answers (AdamW's first step is about lr * sign(g); Lion moves
// every weight by exactly lr).
#include <doctest.h>

#include <cmath>
#include <random>

#include "patchbay/kernels/cuda/math/optimizer_update.hpp"

namespace math = patchbay::kernels::cuda::math;

TEST_CASE("AdamW update follows the decoupled-decay formula step by step") {
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float p = 0.5f, m = 0, v = 0;
  double p_ref = 0.5, m_ref = 0, v_ref = 0;
  for (int t = 1; t <= 20; ++t) {
    const float g = normal(generator);
    const auto c = math::make_adamw_scalars(lr, beta1, beta2, eps, wd, t, 1.0f);
    math::adamw_update(p, g, m, v, c);
    m_ref = beta1 * m_ref + (1 - beta1) * g;
    v_ref = beta2 * v_ref + (1 - beta2) * double(g) * g;
    const double m_hat = m_ref / (1 - std::pow(beta1, t));
    const double v_hat = v_ref / (1 - std::pow(beta2, t));
    p_ref = p_ref * (1 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
    CHECK(double(p) == doctest::Approx(p_ref).epsilon(1e-6));
    CHECK(double(m) == doctest::Approx(m_ref).epsilon(1e-5).scale(1e-3));
    CHECK(double(v) == doctest::Approx(v_ref).epsilon(1e-5).scale(1e-6));
  }
  // First step from zero state, no decay: the move is lr * g / (|g| + eps) ~ lr * sign(g).
  float q = 1.0f, mq = 0, vq = 0;
  math::adamw_update(q, -3.0f, mq, vq,
                     math::make_adamw_scalars(lr, beta1, beta2, eps, 0.0, 1, 1.0f));
  CHECK(double(q) == doctest::Approx(1.0 + lr).epsilon(1e-6));
  // grad_scale multiplies the gradient first.
  float a = 1.0f, ma = 0, va = 0, b = 1.0f, mb = 0, vb = 0;
  math::adamw_update(a, 0.5f, ma, va,
                     math::make_adamw_scalars(lr, beta1, beta2, eps, wd, 1, 0.25f));
  math::adamw_update(b, 0.125f, mb, vb,
                     math::make_adamw_scalars(lr, beta1, beta2, eps, wd, 1, 1.0f));
  CHECK(a == b);
  CHECK(ma == mb);
}

TEST_CASE("SGD update: plain, momentum with dampening, Nesterov, weight decay") {
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  for (const bool nesterov : {false, true}) {
    const double dampening = nesterov ? 0.0 : 0.25;
    float p = 1.0f, buf = 0;
    double p_ref = 1.0, buf_ref = 0;
    for (int t = 0; t < 10; ++t) {
      const float g = 0.3f * float(t % 3) - 0.2f;
      math::sgd_update(p, g, buf,
                       math::make_sgd_scalars(lr, mu, dampening, nesterov, wd, t == 0, 1.0f));
      double d = g + wd * p_ref;
      buf_ref = t == 0 ? d : mu * buf_ref + (1 - dampening) * d;
      d = nesterov ? d + mu * buf_ref : buf_ref;
      p_ref -= lr * d;
      CHECK(double(p) == doctest::Approx(p_ref).epsilon(1e-6));
    }
  }
  float p = 2.0f, unused = 123.0f;
  math::sgd_update(p, 0.5f, unused, math::make_sgd_scalars(0.1, 0.0, 0.0, false, 0.0, true, 1.0f));
  CHECK(p == doctest::Approx(1.95f));
  CHECK(unused == 123.0f);  // no momentum: the buffer is not touched
}

TEST_CASE("Lion update moves each weight by exactly lr (plus decay) in the sign of the blend") {
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.99, wd = 0.5;
  float p = 1.0f, m = 0.2f;
  math::lion_update(p, -1.0f, m, math::make_lion_scalars(lr, beta1, beta2, wd, 1.0f));
  // blend = 0.9 * 0.2 + 0.1 * -1 = 0.08 > 0: p = 1 * (1 - lr * wd) - lr.
  CHECK(double(p) == doctest::Approx(1.0 * (1 - lr * wd) - lr).epsilon(1e-7));
  CHECK(double(m) == doctest::Approx(0.99 * 0.2 + 0.01 * -1.0).epsilon(1e-6));
  float q = 1.0f, mq = 0.0f;
  math::lion_update(q, 0.0f, mq, math::make_lion_scalars(lr, beta1, beta2, 0.0, 1.0f));
  CHECK(q == 1.0f);  // sign(0) = 0
}
