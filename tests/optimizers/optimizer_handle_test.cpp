// optimizers_basic.so through the host: the registry loads and validates it, both components
// pass the conformance kit with the host's api, and runtime::OptimizerHandle drives them over
// engine tensors — tiny quadratics minimised (with train/ schedule, clipping and groups), the
// state enumerated and restored bit-identically, sharding, and the host's refusals.
#include "runtime/optimizer_handle.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "runtime/registry.hpp"
#include "train/grad_clip.hpp"
#include "train/lr_schedule.hpp"
#include "train/param_groups.hpp"

namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
namespace tr = patchbay::train;

namespace {

struct Fixture {
  Fixture() {
    rt::set_host_ops(eng::host_ops_table());
    registry.scan_file(OPTIMIZERS_BASIC_SO);
  }
  rt::Registry registry;

  std::unique_ptr<rt::OptimizerHandle> make(const std::string& name,
                                            const std::map<std::string, double>& floats = {},
                                            bool nesterov = false) {
    rt::ComponentConfig config(*registry.find(PB_KIND_OPTIMIZER, name).descriptor);
    for (const auto& [key, value] : floats) config.set_float(key, value);
    if (nesterov) config.set_bool("nesterov", true);
    return std::make_unique<rt::OptimizerHandle>(
        registry.create(PB_KIND_OPTIMIZER, name, config.view()), registry.host());
  }
};

// f(w, b) = 0.5 sum a (w - c)^2 + 0.5 sum (b - d)^2 with w [2, 3] (decay group) and b [3]
// (no_decay); minimum at w = c, b = d (weight decay 0 in these runs).
struct Quadratic {
  eng::Tensor w = eng::Tensor::from_vector({3, -1, 0.5, 2, 0, -2}, {2, 3});
  eng::Tensor b = eng::Tensor::from_vector({1, 1, 1}, {3});
  eng::Tensor a = eng::Tensor::from_vector({1, 2, 4, 0.5, 1, 3}, {2, 3});
  eng::Tensor c = eng::Tensor::from_vector({0.5, 0.25, -1, 1, 2, -0.5}, {2, 3});
  eng::Tensor d = eng::Tensor::from_vector({-1, 0, 2}, {3});
  Quadratic() {
    w.set_requires_grad(true);
    b.set_requires_grad(true);
  }
  std::vector<rt::OptimizerHandle::Parameter> parameters() const {
    std::vector<rt::OptimizerHandle::Parameter> out;
    for (const auto& [name, t] :
         {std::pair{std::string("fc.weight"), w}, std::pair{std::string("fc.bias"), b}}) {
      const pb_param_options o = tr::param_options(name, t.shape());
      out.push_back({name, t, o.weight_decay_scale, o.lr_scale, o.group});
    }
    return out;
  }
  double loss_and_grad() {
    w.zero_grad();
    b.zero_grad();
    eng::Tensor dw = w - c;
    eng::Tensor db = b - d;
    eng::Tensor loss = (eng::sum(a * dw * dw) + eng::sum(db * db)) * 0.5;
    eng::backward(loss);
    return loss.item();
  }
};

double minimise(rt::OptimizerHandle& opt, Quadratic& q, const tr::LrSchedule& schedule) {
  opt.add_parameters(q.parameters());
  const double initial = q.loss_and_grad();
  for (int64_t step = 0; step < schedule.max_steps; ++step) {
    tr::clip_grad_norm({q.w, q.b}, 10.0);
    opt.step(tr::learning_rate(schedule, step));
    q.loss_and_grad();
  }
  return q.loss_and_grad() / initial;
}

}  // namespace

TEST_CASE("both components conform when loaded from the .so through the host") {
  Fixture f;
  REQUIRE(f.registry.refused().empty());
  for (const char* name : {"adamw", "sgd"}) {
    CAPTURE(name);
    const rt::ComponentEntry& entry = f.registry.find(PB_KIND_OPTIMIZER, name);
    rt::ComponentConfig config(*entry.descriptor);
    if (std::string(name) == "sgd") config.set_float("momentum", 0.9);
    patchbay::testing::OptimizerCase c;
    c.params = {
        {"w", {2, 2}, {1, 2, 3, 4}}, {"b", {2}, {0.5, -0.5}, 0.0}, {"g", {3}, {1, 1, 1}, 0.0, 2.0}};
    c.lrs = {0.1, 0.05, 0.1, 0.02};
    c.grads = {{{1, -1, 0.5, 2}, {1, 1}, {0.1, 0.2, 0.3}},
               {{0.5, 0.5, 0.5, 0.5}, {}, {1, -1, 1}},
               {{-1, 2, -3, 4}, {2, -2}, {}},
               {{1, 1, 1, 1}, {1, 1}, {1, 1, 1}}};
    const auto report = patchbay::testing::check_optimizer_conformance(
        *entry.descriptor, &config.view(), f.registry.host(), c);
    CHECK_MESSAGE(report.ok(), report.message());
  }
}

TEST_CASE("adamw and sgd (momentum, Nesterov) minimise a tiny quadratic through the handle") {
  Fixture f;
  const tr::LrSchedule cosine{tr::LrScheduleKind::kCosine, 0.1, 0.0, 10, 300};
  {
    Quadratic q;
    auto opt = f.make("adamw", {{"weight_decay", 0.0}});
    CHECK(minimise(*opt, q, cosine) < 1e-6);
  }
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    Quadratic q;
    auto opt = f.make("sgd", {{"momentum", 0.9}}, nesterov);
    CHECK(minimise(*opt, q, tr::LrSchedule{tr::LrScheduleKind::kConstant, 0.05, 0.0, 0, 300}) <
          1e-6);
  }
}

TEST_CASE("a clip factor folded into the step equals scaling the gradients first") {
  Fixture f;
  for (const std::string name : {"adamw", "sgd", "lion", "adafactor"}) {
    CAPTURE(name);
    Quadratic folded_q, scaled_q;
    auto folded = f.make(name);
    auto scaled = f.make(name);
    CHECK(folded->supports_grad_scale());
    folded->add_parameters(folded_q.parameters());
    scaled->add_parameters(scaled_q.parameters());
    for (int step = 0; step < 5; ++step) {
      folded_q.loss_and_grad();
      scaled_q.loss_and_grad();
      const std::vector<float> grad_before = folded_q.w.grad().to_vector();
      const double factor = tr::clip_factor(tr::global_grad_norm({folded_q.w, folded_q.b}), 0.5);
      CHECK(factor < 1.0);  // the factor is applied
      tr::optimizer_step_scaled(*folded, {folded_q.w, folded_q.b}, 0.01, factor);
      CHECK(folded_q.w.grad().to_vector() == grad_before);  // read, not written
      tr::clip_grad_norm({scaled_q.w, scaled_q.b}, 0.5);
      scaled->step(0.01);
      CHECK(folded_q.w.to_vector() == scaled_q.w.to_vector());
      CHECK(folded_q.b.to_vector() == scaled_q.b.to_vector());
    }
  }
  auto opt = f.make("adamw");
  CHECK_THROWS_AS(opt->step_scaled(0.01, 0.0), patchbay::Error);
  CHECK_THROWS_AS(opt->step_scaled(0.01, std::nan("")), patchbay::Error);
}

TEST_CASE("an optimizer without step_scaled gets its gradients scaled by the host first") {
  rt::set_host_ops(eng::host_ops_table());
  rt::Registry registry;
  registry.scan_file(EXAMPLE_LION_SO);  // the SDK example: no kScalesGradients
  auto make = [&] {
    rt::ComponentConfig config(*registry.find(PB_KIND_OPTIMIZER, "lion").descriptor);
    return std::make_unique<rt::OptimizerHandle>(
        registry.create(PB_KIND_OPTIMIZER, "lion", config.view()), registry.host());
  };
  auto fallback = make();
  auto reference = make();
  CHECK_FALSE(fallback->supports_grad_scale());
  CHECK_THROWS_AS(fallback->step_scaled(0.01, 0.5), patchbay::Error);
  Quadratic fallback_q, reference_q;
  fallback->add_parameters(fallback_q.parameters());
  reference->add_parameters(reference_q.parameters());
  for (int step = 0; step < 3; ++step) {
    fallback_q.loss_and_grad();
    reference_q.loss_and_grad();
    const std::vector<float> grad_before = fallback_q.w.grad().to_vector();
    const double factor = tr::clip_factor(tr::global_grad_norm({fallback_q.w, fallback_q.b}), 0.5);
    REQUIRE(factor < 1.0);
    tr::optimizer_step_scaled(*fallback, {fallback_q.w, fallback_q.b}, 0.01, factor);
    // The gradients were scaled in place (f32), as clip_grad_norm does.
    CHECK(fallback_q.w.grad().to_vector()[0] == grad_before[0] * static_cast<float>(factor));
    tr::clip_grad_norm({reference_q.w, reference_q.b}, 0.5);
    reference->step(0.01);
    CHECK(fallback_q.w.to_vector() == reference_q.w.to_vector());
    CHECK(fallback_q.b.to_vector() == reference_q.b.to_vector());
  }
}

TEST_CASE("state enumerates by name and restore_state resumes bit-identically") {
  Fixture f;
  Quadratic q1, q2;
  auto a = f.make("adamw");
  a->add_parameters(q1.parameters());
  const auto state = a->state();
  std::vector<std::string> names;
  for (const auto& s : state) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"step/fc.weight", "exp_avg/fc.weight",
                                          "exp_avg_sq/fc.weight", "step/fc.bias", "exp_avg/fc.bias",
                                          "exp_avg_sq/fc.bias"});
  for (int i = 0; i < 3; ++i) {
    q1.loss_and_grad();
    a->step(0.05);
  }
  // Checkpoint: copies of the state and of the parameters.
  std::map<std::string, eng::Tensor> saved;
  for (const auto& s : a->state()) saved[s.name] = s.tensor.clone();
  CHECK(saved.at("step/fc.bias").item() == 3.0);
  eng::copy_(q2.w, q1.w.detach());
  eng::copy_(q2.b, q1.b.detach());
  auto b = f.make("adamw");
  b->add_parameters(q2.parameters());
  b->restore_state(saved);
  for (int i = 0; i < 3; ++i) {
    q1.loss_and_grad();
    a->step(0.05);
    q2.loss_and_grad();
    b->step(0.05);
  }
  CHECK(q1.w.to_vector() == q2.w.to_vector());
  CHECK(q1.b.to_vector() == q2.b.to_vector());

  saved.erase("exp_avg/fc.bias");
  saved["exp_avg/fc.other"] = eng::zeros({3});
  auto c = f.make("adamw");
  Quadratic q3;
  c->add_parameters(q3.parameters());
  CHECK_THROWS_WITH_AS(
      c->restore_state(saved),
      doctest::Contains("missing: exp_avg/fc.bias\n  unexpected: exp_avg/fc.other"),
      patchbay::Error);
}

TEST_CASE("a sharded handle keeps and updates only its own parameters") {
  Fixture f;
  Quadratic q;
  auto opt = f.make("sgd", {{"momentum", 0.9}});
  REQUIRE(opt->supports_sharding());
  opt->set_shard(1, 2);
  opt->add_parameters(q.parameters());
  const auto state = opt->state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].name == "step/fc.bias");
  const std::vector<float> w_before = q.w.to_vector();
  q.loss_and_grad();
  opt->step(0.1);
  CHECK(q.w.to_vector() == w_before);
  CHECK(q.b.to_vector() != std::vector<float>{1, 1, 1});
}

TEST_CASE("the host names the optimizer and the problem") {
  Fixture f;
  auto opt = f.make("adamw");
  eng::Tensor bf16 = eng::zeros({2, 2}, eng::DType::kBF16);
  CHECK_THROWS_WITH_AS(opt->add_parameter({"emb.weight", bf16}),
                       doctest::Contains("'emb.weight' is not f32"), patchbay::Error);
  CHECK_THROWS_WITH_AS(opt->step(std::nan("")), doctest::Contains("optimizer 'adamw'"),
                       patchbay::Error);
  Quadratic q;
  opt->add_parameters(q.parameters());
  CHECK(opt->parameter_count() == 2);
  CHECK_THROWS_AS(opt->set_shard(0, 2), patchbay::Error);
  CHECK_THROWS_WITH_AS(f.make("sgd", {{"dampening", 0.5}}, true),
                       doctest::Contains("dampening = 0"), patchbay::Error);
}
