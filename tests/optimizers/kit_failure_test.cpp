// The optimizer conformance kit fails broken optimizers: a wrong known answer, momentum kept
// outside the exposed state (resume diverges), a step that ignores the shard, an update of
// a parameter without a gradient, and a scaled step (step_scaled) that ignores the gradient
// scale or writes the scaled gradient back, and bf16 copies (set_bf16_copy) that are truncated
// instead of rounded or that change when their parameter is skipped.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "optimizer_test_host.hpp"
#include "patchbay/optimizer.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"

namespace pt = patchbay::testing;

namespace {

// SGD with momentum 0.5 whose buffer is NOT registered as state.
class HiddenMomentum : public patchbay::Optimizer {
 public:
  HiddenMomentum(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init_state(const Param&) override {}
  void update(const Param& p, const patchbay::Tensor& grad, double lr) override {
    std::vector<float>& buf = buffers_[p.index];
    buf.resize(static_cast<size_t>(p.tensor.numel()), 0.0f);
    float* x = p.tensor.data<float>();
    const float* g = grad.data<float>();
    for (size_t i = 0; i < buf.size(); ++i) {
      buf[i] = 0.5f * buf[i] + g[i];
      x[i] -= static_cast<float>(lr) * buf[i];
    }
  }

 private:
  std::map<size_t, std::vector<float>> buffers_;
};

// Plain SGD that updates every parameter, owned or not, and treats a missing grad as zero
// decay step (p *= 0.99).
class IgnoresShardAndSkip : public patchbay::Optimizer {
 public:
  IgnoresShardAndSkip(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init_state(const Param&) override {}
  void update(const Param&, const patchbay::Tensor&, double) override {}
  void step(double lr) override {
    for (const Param& p : params()) {
      float* x = p.tensor.data<float>();
      patchbay::Tensor g = p.tensor.grad();
      const float* gd = g.defined() ? g.data<float>() : nullptr;
      for (int64_t i = 0; i < p.tensor.numel(); ++i)
        x[i] = gd ? x[i] - static_cast<float>(lr) * gd[i] : x[i] * 0.99f;
    }
  }
};

// Plain SGD that claims to fold the gradient scale in (kScalesGradients) but either ignores it
// or scales the gradient in place (the host's job, not the optimizer's).
template <bool kWritesGrad>
class BadScaling : public patchbay::Optimizer {
 public:
  static constexpr bool kScalesGradients = true;
  BadScaling(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init_state(const Param&) override {}
  void update(const Param& p, const patchbay::Tensor& grad, double lr) override {
    update_scaled(p, grad, lr, 1.0f);
  }
  void update_scaled(const Param& p, const patchbay::Tensor& grad, double lr,
                     float grad_scale) override {
    float* x = p.tensor.data<float>();
    float* g = const_cast<float*>(grad.data<float>());
    for (int64_t i = 0; i < p.tensor.numel(); ++i) {
      if (kWritesGrad) g[i] *= grad_scale;    // right update, but the gradient is overwritten
      x[i] -= static_cast<float>(lr) * g[i];  // !kWritesGrad: the scale is ignored
    }
  }
};

inline constexpr pb_component_descriptor kIgnoresScale =
    patchbay::make_optimizer_component<BadScaling<false>>("ignores_scale", "1.0.0",
                                                          "broken on purpose");
inline constexpr pb_component_descriptor kWritesGrad =
    patchbay::make_optimizer_component<BadScaling<true>>("writes_grad", "1.0.0",
                                                         "broken on purpose");

// Plain SGD that claims to write bf16 copies (kWritesBf16Copies) but truncates instead of
// rounding to nearest even, or also changes the copy of a parameter the step skipped.
template <bool kTruncates>
class BadCopies : public patchbay::Optimizer {
 public:
  static constexpr bool kWritesBf16Copies = true;
  BadCopies(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init_state(const Param&) override {}
  void update(const Param& p, const patchbay::Tensor& grad, double lr) override {
    float* x = p.tensor.data<float>();
    const float* g = grad.data<float>();
    for (int64_t i = 0; i < p.tensor.numel(); ++i) x[i] -= static_cast<float>(lr) * g[i];
  }
  void step(double lr) override {
    patchbay::Optimizer::step(lr);
    for (const Param& p : params()) {
      if (!p.bf16_copy.defined()) continue;
      const bool skipped = !p.tensor.grad().defined();
      const float* x = p.tensor.data<float>();
      uint16_t* c = p.bf16_copy.data<uint16_t>();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &x[i], sizeof bits);
        if (kTruncates) {
          if (!skipped) c[i] = static_cast<uint16_t>(bits >> 16);  // truncation
        } else {
          c[i] = skipped ? static_cast<uint16_t>(c[i] + 1) : patchbay::bf16_bits_nearest_even(x[i]);
        }
      }
    }
  }
};

inline constexpr pb_component_descriptor kTruncatesCopy =
    patchbay::make_optimizer_component<BadCopies<true>>("truncates_copy", "1.0.0",
                                                        "broken on purpose");
inline constexpr pb_component_descriptor kTouchesSkippedCopy =
    patchbay::make_optimizer_component<BadCopies<false>>("touches_skipped_copy", "1.0.0",
                                                         "broken on purpose");

inline constexpr pb_component_descriptor kHidden =
    patchbay::make_optimizer_component<HiddenMomentum>("hidden", "1.0.0", "broken on purpose");
inline constexpr pb_component_descriptor kIgnores =
    patchbay::make_optimizer_component<IgnoresShardAndSkip>("ignores", "1.0.0",
                                                            "broken on purpose");

pt::OptimizerCase two_params() {
  pt::OptimizerCase c;
  c.params = {{"a", {2}, {1.0f, 2.0f}}, {"b", {2}, {3.0f, 4.0f}}};
  c.lrs = {0.1, 0.1, 0.1, 0.1};
  c.grads = {{{1, 1}, {1, 1}}, {{1, -1}, {}}, {{0.5, 0.5}, {2, 2}}, {{1, 1}, {1, 1}}};
  return c;
}

bool mentions(const pt::OptimizerConformanceReport& r, const std::string& text) {
  return r.message().find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("the kit reports a wrong known answer and state kept outside state_tensor") {
  pt::OptimizerCase c = two_params();
  c.expected.assign(4, {{0.0, 0.0}, {0.0, 0.0}});
  const auto report =
      pt::check_optimizer_conformance(kHidden, nullptr, optimizer_tests::engine_host(), c);
  CHECK_FALSE(report.ok());
  CHECK(mentions(report, "step 0, parameter 'a' element 0"));
  CHECK(mentions(report, "resume: parameter 'a' differs"));
}

TEST_CASE("the kit reports updates without a grad and updates of parameters another rank owns") {
  const auto report = pt::check_optimizer_conformance(kIgnores, nullptr,
                                                      optimizer_tests::engine_host(), two_params());
  CHECK(mentions(report, "changed although its grad is undefined"));
  CHECK(mentions(report, "(not owned) was modified"));
}

TEST_CASE("the kit reports a scaled step that ignores the scale or writes the gradient") {
  const auto ignores = pt::check_optimizer_conformance(
      kIgnoresScale, nullptr, optimizer_tests::engine_host(), two_params());
  CHECK(mentions(ignores, "scaled step 0 (grad_scale 0.300000): parameter 'a' differs"));
  const auto writes = pt::check_optimizer_conformance(kWritesGrad, nullptr,
                                                      optimizer_tests::engine_host(), two_params());
  CHECK(mentions(writes, "step_scaled 0 wrote the gradient of 'a'"));
  // An optimizer without kScalesGradients has no step_scaled: noted, not failed.
  const auto plain = pt::check_optimizer_conformance(kHidden, nullptr,
                                                     optimizer_tests::engine_host(), two_params());
  const bool has_step_scaled =
      static_cast<const pb_optimizer_vtable*>(kHidden.vtable)->step_scaled != nullptr;
  CHECK_FALSE(has_step_scaled);
  CHECK_FALSE(mentions(plain, "scaled step"));
  bool noted = false;
  for (const std::string& n : plain.notes)
    noted = noted || n.find("step_scaled is NULL") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("the kit reports bf16 copies that are truncated or touched when the step skips them") {
  pt::OptimizerCase c = two_params();
  c.params[0].values = {1.00390625f + 0.001953125f, -3.3f};  // bits that round up, not down
  const auto truncates = pt::check_optimizer_conformance(kTruncatesCopy, nullptr,
                                                         optimizer_tests::engine_host(), c);
  CHECK(mentions(truncates, "the copy is not the parameter rounded to bf16"));
  const auto touches = pt::check_optimizer_conformance(
      kTouchesSkippedCopy, nullptr, optimizer_tests::engine_host(), two_params());
  CHECK(mentions(touches, "the copy changed although the step skipped the parameter"));
}
