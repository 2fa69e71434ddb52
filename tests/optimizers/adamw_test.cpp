// adamw: the fused loop against hand-computed first two steps, the component through the SDK's
// optimizer conformance kit (known answers, skipping, resume, sharding) and its config checks.
#include "adamw.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "adamw_loop.hpp"
#include "optimizer_test_host.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "runtime/component_config.hpp"

namespace ob = optimizers_basic;
namespace pt = patchbay::testing;

namespace {

// lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01; p0 = [1, -2, 0.5, 3].
// Step 1, g = [0.5, -1, 2, 0]: p *= 1 - 0.1 * 0.01 = 0.999; m = 0.1 g; v = 0.001 g^2; the bias
// corrections give m_hat = g, v_hat = g^2, so p -= 0.1 * g / (|g| + 1e-8) (0 where g = 0):
//   [0.999 - 0.1, -1.998 + 0.1, 0.4995 - 0.1, 2.997] = [0.899, -1.898, 0.3995, 2.997]
// Step 2, g = [-0.25, 0.5, 1, 4]; element 0: p = 0.899 * 0.999 = 0.898101;
//   m = 0.9 * 0.05 + 0.1 * -0.25 = 0.02;  v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225;
//   m_hat = 0.02 / 0.19 = 0.1052632;  v_hat = 0.00031225 / 0.001999 = 0.1562031;
//   p -= 0.1 * 0.1052632 / (0.3952254 + 1e-8) = 0.0266337  ->  0.8714673
// and likewise for the others:
const std::vector<float> kStart = {1.0f, -2.0f, 0.5f, 3.0f};
const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f, 2.0f, 0.0f},
                                                {-0.25f, 0.5f, 1.0f, 4.0f}};
const std::vector<std::vector<double>> kAfter = {
    {0.899000002, -1.898000001, 0.399500001, 2.997000000},
    {0.871467299, -1.869468297, 0.305882537, 2.919589318}};

// torch.optim.AdamW in double, for the conformance case.
struct AdamWReference {
  ob::AdamWSettings settings;
  std::map<size_t, std::vector<double>> m, v;
  std::map<size_t, int> t;
  void operator()(size_t, size_t i, std::vector<double>& p, const std::vector<float>& g, double lr,
                  const pt::OptimizerParamSpec& spec) {
    const double step_lr = lr * spec.lr_scale;
    const double wd = settings.weight_decay * spec.weight_decay_scale;
    auto& mi = m[i];
    auto& vi = v[i];
    mi.resize(p.size(), 0.0);
    vi.resize(p.size(), 0.0);
    const int step = ++t[i];
    for (size_t k = 0; k < p.size(); ++k) {
      p[k] *= 1.0 - step_lr * wd;
      mi[k] = settings.beta1 * mi[k] + (1 - settings.beta1) * g[k];
      vi[k] = settings.beta2 * vi[k] + (1 - settings.beta2) * double(g[k]) * g[k];
      const double m_hat = mi[k] / (1 - std::pow(settings.beta1, step));
      const double v_hat = vi[k] / (1 - std::pow(settings.beta2, step));
      p[k] -= step_lr * m_hat / (std::sqrt(v_hat) + settings.eps);
    }
  }
};

}  // namespace

TEST_CASE("adamw_step matches the hand-computed first two steps") {
  std::vector<float> p = kStart, m(4, 0.0f), v(4, 0.0f);
  for (int t = 1; t <= 2; ++t) {
    ob::adamw_step(p.data(), kGrads[t - 1].data(), m.data(), v.data(), 4, t, 0.1, 0.01,
                   ob::AdamWSettings{});
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(t);
      CAPTURE(k);
      CHECK(p[k] == doctest::Approx(kAfter[t - 1][k]).epsilon(1e-6));
    }
  }
  // The moments after step 2 (element 2: m = 0.9 * 0.2 + 0.1 * 1 = 0.28, v = 0.999 * 0.004 +
  // 0.001).
  CHECK(m[2] == doctest::Approx(0.28).epsilon(1e-6));
  CHECK(v[2] == doctest::Approx(0.004996).epsilon(1e-6));
}

TEST_CASE("adamw conforms: known answers, skipped grads, resume, sharding") {
  patchbay::runtime::ComponentConfig config(ob::kAdamW);
  SUBCASE("the hand-computed case through the C ABI") {
    pt::OptimizerCase c;
    c.params = {{"w", {2, 2}, kStart}};
    c.lrs = {0.1, 0.1};
    c.grads = {{kGrads[0]}, {kGrads[1]}};
    c.expected = {{kAfter[0]}, {kAfter[1]}};
    const auto report = pt::check_optimizer_conformance(ob::kAdamW, &config.view(),
                                                        optimizer_tests::engine_host(), c);
    CHECK_MESSAGE(report.ok(), report.message());
  }
  SUBCASE("several parameters, groups, lr scales and missing grads against a double reference") {
    config.set_float("beta2", 0.95);
    config.set_float("weight_decay", 0.1);
    pt::OptimizerCase c;
    c.params = {{"blocks.0.fc.weight", {2, 3}, {0.3f, -0.7f, 1.1f, 0.0f, 2.5f, -1.2f}},
                {"blocks.0.fc.bias", {3}, {0.1f, -0.2f, 0.3f}, 0.0},
                {"norm_f.gain", {3}, {1.0f, 1.0f, 1.0f}, 0.0, 0.5},
                {"head.weight", {3, 2}, {0.5f, 0.25f, -0.125f, 2.0f, -3.0f, 1.5f}}};
    c.lrs = {0.01, 0.02, 0.03, 0.02, 0.01};
    const std::vector<float> g6a = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f},
                             g6b = {1.5f, 0.0f, -2.5f, 0.25f, 3.0f, -0.5f};
    const std::vector<float> g3a = {0.05f, -0.5f, 1.0f}, g3b = {-2.0f, 0.125f, 0.75f};
    c.grads = {{g6a, g3a, g3b, g6b},
               {g6b, {}, g3a, g6a},
               {g6a, g3b, {}, {}},
               {{}, g3a, g3b, g6b},
               {g6b, g3b, g3a, g6a}};
    AdamWReference reference;
    reference.settings.beta2 = 0.95;
    reference.settings.weight_decay = 0.1;
    pt::fill_expected(c, std::ref(reference));
    const auto report = pt::check_optimizer_conformance(ob::kAdamW, &config.view(),
                                                        optimizer_tests::engine_host(), c);
    CHECK_MESSAGE(report.ok(), report.message());
    CHECK(report.notes.empty());  // sharding was checked
  }
}

TEST_CASE("adamw refuses betas of 1 and names the key") {
  CHECK_THROWS_WITH_AS(ob::AdamW(ob::AdamWSettings{1.0, 0.999, 1e-8, 0.0}),
                       doctest::Contains("beta1"), patchbay::PluginError);
  CHECK_THROWS_WITH_AS(ob::AdamW(ob::AdamWSettings{0.9, 1.0, 1e-8, 0.0}),
                       doctest::Contains("[0, 1)"), patchbay::PluginError);
}

TEST_CASE("adamw with amsgrad steps with the running maximum of v") {
  // p0 = 1, lr 0.1, beta1 0.9, beta2 0.5, eps 1e-8, no decay; g1 = 2, g2 = 0.01.
  // Step 1: m = 0.2, v = vmax = 2; m_hat = 2, v_hat = 4 -> p = 1 - 0.1 * 2 / 2 = 0.9.
  // Step 2: m = 0.181, v = 1.00005 < vmax = 2, so v_hat = 2 / 0.75 (plain AdamW: 1.00005 / 0.75)
  //   -> p = 0.9 - 0.1 * (0.181 / 0.19) / sqrt(2.6667) = 0.841663.
  ob::AdamWSettings settings{0.9, 0.5, 1e-8, 0.0, true};
  std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f}, vmax = {0.0f};
  const float grads[2] = {2.0f, 0.01f};
  for (int t = 1; t <= 2; ++t) {
    ob::adamw_step(p.data(), &grads[t - 1], m.data(), v.data(), 1, t, 0.1, 0.0, settings, vmax.data());
  }
  CHECK(p[0] == doctest::Approx(0.841663469).epsilon(1e-6));
  CHECK(vmax[0] == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(v[0] == doctest::Approx(1.00005).epsilon(1e-6));
  patchbay::runtime::ComponentConfig config(ob::kAdamW);
  config.set_bool("amsgrad", true);
  config.set_float("beta2", 0.5);
  config.set_float("weight_decay", 0.0);
  pt::OptimizerCase c;
  c.params = {{"w", {1}, {1.0f}}};
  c.lrs = {0.1, 0.1};
  c.grads = {{{2.0f}}, {{0.01f}}};
  c.expected = {{{0.9}}, {{0.841663469}}};
  const auto report = pt::check_optimizer_conformance(ob::kAdamW, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
}

// The loop is compiled for the baseline target and for AVX-512 (adamw_loop.hpp); without FMA
// contraction and with IEEE sqrt and division both give the same bits, for every variant of the
// loop (scaled gradient, amsgrad, bf16 copy), including the copy's rounding. The AVX-512 run
// writes its copy one element past a 64-byte line start, so the streamed lines, the unaligned
// head and the tail of each block all occur.
TEST_CASE("adamw's baseline and AVX-512 loops give the same bits") {
  if (!ob::adamw_update_avx512_available()) {
    MESSAGE("no AVX-512 on this CPU: one loop only");
    return;
  }
  const int64_t n = 70001;  // odd: vector bodies and remainders, more than one thread's share
  for (int variant = 0; variant < 8; ++variant) {
    CAPTURE(variant);
    std::vector<float> state[2][5];  // param, grad, m, v, vmax per run
    std::vector<uint16_t> copy[2];
    std::vector<uint16_t> copy_storage;
    for (int run = 0; run < 2; ++run) {
      for (int k = 0; k < 5; ++k) {
        state[run][k].resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          state[run][k][static_cast<size_t>(i)] =
              k >= 2 ? static_cast<float>((i * 37 + k) % 101) * 1e-4f
                     : std::sin(static_cast<float>(i * (k + 3))) * 3.0f;
      }
      copy[run].assign(static_cast<size_t>(n), 0);
      copy_storage.assign(static_cast<size_t>(n) + 64, 0xffff);
      uint16_t* const copy_out =
          run == 0 ? copy[run].data()
                   : copy_storage.data() +
                         (64 - reinterpret_cast<uintptr_t>(copy_storage.data()) % 64) % 64 / 2 + 1;
      ob::AdamWLoop loop;
      loop.param = state[run][0].data();
      loop.grad = state[run][1].data();
      loop.exp_avg = state[run][2].data();
      loop.exp_avg_sq = state[run][3].data();
      loop.amsgrad = (variant & 2) != 0;
      loop.max_exp_avg_sq = loop.amsgrad ? state[run][4].data() : nullptr;
      loop.bf16_copy = (variant & 4) != 0 ? copy_out : nullptr;
      loop.n = n;
      loop.decay = 0.999f;
      loop.step_size = 1.3e-3f;
      loop.bias_correction2_sqrt = 0.0447f;
      loop.one_minus_beta1 = 0.1f;
      loop.beta2 = 0.999f;
      loop.one_minus_beta2 = 0.001f;
      loop.eps = 1e-8f;
      loop.grad_scale = (variant & 1) != 0 ? 0.37f : 1.0f;
      run == 0 ? ob::adamw_update_generic(loop) : ob::adamw_update_avx512(loop);
      if (run == 1 && (variant & 4) != 0) {
        CHECK(copy_out[-1] == 0xffff);  // nothing written outside [0, n)
        CHECK(copy_out[n] == 0xffff);
        std::copy(copy_out, copy_out + n, copy[run].begin());
      }
    }
    for (int k = 0; k < 5; ++k) CHECK(state[0][k] == state[1][k]);
    CHECK(copy[0] == copy[1]);
    if ((variant & 4) != 0) {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i)
        wrong += copy[0][static_cast<size_t>(i)] !=
                 patchbay::bf16_bits_nearest_even(state[0][0][static_cast<size_t>(i)]);
      CHECK(wrong == 0);
    }
  }
}
