// adafactor: hand-computed steps (unfactored with a fixed lr; factored with the relative step,
// the parameter scale and update clipping), the component through the SDK's conformance kit
// against an independent double reference written from Hugging Face's formulas (first moment,
// weight decay, 3-D parameters), its state layout and config checks.
#include "adafactor.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "optimizer_test_host.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "runtime/component_config.hpp"

namespace ob = optimizers_basic;
namespace pt = patchbay::testing;

namespace {

// Hugging Face's Adafactor.step for one parameter in double: [B, R, C] factored when the
// shape has >= 2 dims, else one vector (formulas in adafactor.hpp).
struct AdafactorReference {
  ob::AdafactorSettings s;
  std::map<size_t, std::vector<int64_t>> shapes;  // parameter index -> shape
  std::map<size_t, std::vector<double>> row, col, sq, m;
  std::map<size_t, int> t;
  void operator()(size_t, size_t i, std::vector<double>& p, const std::vector<float>& g, double lr,
                  const pt::OptimizerParamSpec& spec) {
    const int step = ++t[i];
    const std::vector<int64_t>& shape = spec.shape;
    const size_t n = p.size();
    double ss = 0;
    for (double x : p) ss += x * x;
    const double rms_p = std::sqrt(ss / double(n));
    double rho = lr * spec.lr_scale;
    if (s.relative_step) rho = std::min(s.warmup_init ? 1e-6 * step : 1e-2, 1.0 / std::sqrt(step)) * spec.lr_scale;
    const double alpha = (s.scale_parameter ? std::max(s.eps2, rms_p) : 1.0) * rho;
    const double b2 = 1.0 - std::pow(double(step), s.decay_rate);
    std::vector<double> u(n);
    if (shape.size() >= 2) {
      const size_t C = size_t(shape.back()), R = size_t(shape[shape.size() - 2]), B = n / (R * C);
      auto& rw = row[i];
      auto& cl = col[i];
      rw.resize(B * R, 0.0);
      cl.resize(B * C, 0.0);
      for (size_t b = 0; b < B; ++b) {
        for (size_t r = 0; r < R; ++r) {
          double s2 = 0;
          for (size_t c = 0; c < C; ++c) s2 += double(g[(b * R + r) * C + c]) * g[(b * R + r) * C + c] + s.eps1;
          rw[b * R + r] = b2 * rw[b * R + r] + (1 - b2) * s2 / double(C);
        }
        for (size_t c = 0; c < C; ++c) {
          double s2 = 0;
          for (size_t r = 0; r < R; ++r) s2 += double(g[(b * R + r) * C + c]) * g[(b * R + r) * C + c] + s.eps1;
          cl[b * C + c] = b2 * cl[b * C + c] + (1 - b2) * s2 / double(R);
        }
        double mean = 0;
        for (size_t r = 0; r < R; ++r) mean += rw[b * R + r] / double(R);
        for (size_t r = 0; r < R; ++r)
          for (size_t c = 0; c < C; ++c)
            u[(b * R + r) * C + c] = g[(b * R + r) * C + c] / std::sqrt(rw[b * R + r] / mean) / std::sqrt(cl[b * C + c]);
      }
    } else {
      auto& v = sq[i];
      v.resize(n, 0.0);
      for (size_t k = 0; k < n; ++k) {
        v[k] = b2 * v[k] + (1 - b2) * (double(g[k]) * g[k] + s.eps1);
        u[k] = g[k] / std::sqrt(v[k]);
      }
    }
    double su = 0;
    for (double x : u) su += x * x;
    const double clip = std::max(1.0, std::sqrt(su / double(n)) / s.clip_threshold);
    auto& mi = m[i];
    mi.resize(n, 0.0);
    for (size_t k = 0; k < n; ++k) {
      double upd = u[k] / clip * alpha;
      if (s.beta1 > 0) {
        mi[k] = s.beta1 * mi[k] + (1 - s.beta1) * upd;
        upd = mi[k];
      }
      p[k] = p[k] - s.weight_decay * spec.weight_decay_scale * alpha * p[k] - upd;
    }
  }
};

}  // namespace

TEST_CASE("adafactor_step, unfactored with a fixed lr, matches two hand-computed steps") {
  // lr 0.1, relative_step and scale_parameter off; p0 = [1, -2, 0.5, 3] (a vector: unfactored).
  // t = 1: b2 = 0, v = g^2 + eps1, U = sign(g) (0 where g = 0), RMS(U) = 0.866 < 1:
  //   p = p - 0.1 sign(g) = [0.9, -1.9, 0.4, 3].
  // t = 2: b2 = 1 - 2^-0.8 = 0.4256508, v = b2 v + (1 - b2) g^2, U = g / sqrt(v)
  //   = [-0.662708, 0.662708, 0.662708, 1.319508], RMS 0.87445 < 1: p -= 0.1 U.
  ob::AdafactorSettings s;
  s.relative_step = false;
  s.scale_parameter = false;
  const ob::AdafactorLayout layout = ob::adafactor_layout({4});
  CHECK_FALSE(layout.factored);
  std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f}, v(4, 0.0f);
  const std::vector<std::vector<float>> grads = {{0.5f, -1.0f, 2.0f, 0.0f}, {-0.25f, 0.5f, 1.0f, 4.0f}};
  const std::vector<std::vector<double>> after = {{0.9, -1.9, 0.4, 3.0},
                                                  {0.966270923, -1.966270923, 0.333729077, 2.868049209}};
  ob::AdafactorBuffers buffers;
  buffers.exp_avg_sq = v.data();
  for (int t = 1; t <= 2; ++t) {
    ob::adafactor_step(p.data(), grads[t - 1].data(), buffers, layout, t, 0.1, 1.0, 1.0, s);
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(t);
      CAPTURE(k);
      CHECK(p[k] == doctest::Approx(after[t - 1][k]).epsilon(1e-6));
    }
  }
}

TEST_CASE("adafactor_step, factored with relative step and parameter scale, clips the update") {
  // A 2 x 3 matrix with the defaults (relative_step, scale_parameter, clip 1). t = 1:
  // rho = 1e-2, alpha = RMS(p0) * 1e-2 = 0.0125698; row = mean_c g^2, col = mean_r g^2 (b2 = 0);
  // RMS(U) = 0.97086 (no clipping). t = 2: alpha = 0.0124735, RMS(U) = 1.30748 -> U / 1.30748.
  // Values by a direct transcription of the formulas (Python, double).
  ob::AdafactorSettings s;
  const ob::AdafactorLayout layout = ob::adafactor_layout({2, 3});
  REQUIRE(layout.factored);
  CHECK(layout.rows == 2);
  CHECK(layout.cols == 3);
  std::vector<float> p = {0.3f, -0.7f, 1.1f, 0.0f, 2.5f, -1.2f}, row(2, 0.0f), col(3, 0.0f);
  const std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f},
                                                 {1.5f, 0.0f, -2.5f, 0.25f, 3.0f, -0.5f}};
  const std::vector<std::vector<double>> after = {
      {0.292227499, -0.688098102, 1.085668217, 0.013256821, 2.487312534, -1.187777815},
      {0.274502642, -0.688098102, 1.103315193, 0.010500513, 2.470297863, -1.184484777}};
  ob::AdafactorBuffers buffers;
  buffers.exp_avg_sq_row = row.data();
  buffers.exp_avg_sq_col = col.data();
  for (int t = 1; t <= 2; ++t) {
    ob::adafactor_step(p.data(), grads[t - 1].data(), buffers, layout, t, 123.0 /* unused */, 1.0, 1.0, s);
    for (size_t k = 0; k < 6; ++k) {
      CAPTURE(t);
      CAPTURE(k);
      CHECK(p[k] == doctest::Approx(after[t - 1][k]).epsilon(2e-6));
    }
  }
  CHECK(row[0] == doctest::Approx(1.647186375).epsilon(1e-6));
  CHECK(col[1] == doctest::Approx(2.646290668).epsilon(1e-6));
}

TEST_CASE("adafactor conforms: known answers, skipped grads, resume, sharding") {
  patchbay::runtime::ComponentConfig config(ob::kAdafactor);
  pt::OptimizerCase c;
  c.params = {{"blocks.0.fc.weight", {2, 3}, {0.3f, -0.7f, 1.1f, 0.0f, 2.5f, -1.2f}},
              {"blocks.0.fc.bias", {3}, {0.1f, -0.2f, 0.3f}, 0.0},
              {"experts.weight", {2, 2, 2}, {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.125f, -0.5f}, 1.0, 0.5}};
  c.lrs = {0.01, 0.02, 0.03, 0.02};
  const std::vector<float> g6a = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f}, g6b = {1.5f, 0.0f, -2.5f, 0.25f, 3.0f, -0.5f};
  const std::vector<float> g3a = {0.05f, -0.5f, 1.0f}, g3b = {-2.0f, 0.125f, 0.75f};
  const std::vector<float> g8 = {0.3f, -0.1f, 2.0f, 0.5f, -1.0f, 0.25f, 0.75f, -0.6f};
  c.grads = {{g6a, g3a, g8}, {g6b, {}, g8}, {g6a, g3b, {}}, {{}, g3a, g8}};
  c.rtol = 2e-5;
  AdafactorReference reference;
  SUBCASE("defaults: relative step, parameter scale, no first moment") {}
  SUBCASE("fixed lr, first moment and weight decay") {
    config.set_bool("relative_step", false);
    config.set_float("beta1", 0.9);
    config.set_float("weight_decay", 0.1);
    reference.s.relative_step = false;
    reference.s.beta1 = 0.9;
    reference.s.weight_decay = 0.1;
  }
  pt::fill_expected(c, std::ref(reference));
  const auto report = pt::check_optimizer_conformance(ob::kAdafactor, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
  // Sharding and the scaled step were checked; the one note: no bf16 copies (the host rounds).
  REQUIRE(report.notes.size() == 1);
  CHECK(report.notes[0].find("set_bf16_copy is NULL") != std::string::npos);
}

TEST_CASE("adafactor refuses warmup_init without relative_step and a non-negative decay_rate") {
  ob::AdafactorSettings s;
  s.relative_step = false;
  s.warmup_init = true;
  CHECK_THROWS_WITH_AS(ob::Adafactor{s}, doctest::Contains("warmup_init"), patchbay::PluginError);
  ob::AdafactorSettings d;
  d.decay_rate = 0.5;
  CHECK_THROWS_WITH_AS(ob::Adafactor{d}, doctest::Contains("decay_rate"), patchbay::PluginError);
}
