// ffn_moe inside a language model built by core/model, as a training run builds it: dense and
// MoE blocks alternating through `pattern`, the MoE aux losses summed into ForwardResult::aux_loss
// (which train_step adds to the loss) and differentiable through the model to the routers, the
// statistics named per block, and expert choice refused in the causal model at build.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "model/language_model.hpp"
#include "runtime/registry.hpp"

namespace rt = patchbay::runtime;
namespace pm = patchbay::model;
namespace eng = patchbay::engine;

namespace {

rt::Registry& registry() {
  static rt::Registry* instance = [] {
    rt::set_host_ops(eng::host_ops_table());
    const pb_host_api* host = rt::host_api();
    eng::set_ops_status_functions(
        {host->status_create, host->status_code, host->status_message, host->status_free});
    const char* env = std::getenv("PATCHBAY_PLUGIN_PATH");
    REQUIRE_MESSAGE(env != nullptr, "PATCHBAY_PLUGIN_PATH is not set (run through ctest)");
    auto* r = new rt::Registry(host);
    for (const char* file : {"attention_dense.so", "ffn_mlp.so", "ffn_moe.so"})
      r->scan_file(std::filesystem::path(env) / file);
    for (const rt::RefusedPlugin& refused : r->refused()) FAIL_CHECK(refused.reason);
    return r;
  }();
  return *instance;
}

pm::ModelOptions options(std::vector<std::string> feedforward_kinds) {
  pm::ModelOptions o;
  o.vocab_size = 11;
  o.context_length = 8;
  o.n_layers = 2;
  o.n_heads = 2;
  o.d_model = 16;
  o.d_ff = 32;
  o.init_std = 0.2;
  o.seed = 7;
  o.feedforward_kinds = std::move(feedforward_kinds);
  return o;
}

const eng::Tensor* find_parameter(const std::vector<pm::NamedParameter>& params,
                                  const std::string& name) {
  for (const pm::NamedParameter& p : params)
    if (p.name == name) return &p.tensor;
  return nullptr;
}

}  // namespace

TEST_CASE(
    "a dense/MoE pattern: aux loss summed and differentiable to the router, stats per block") {
  pm::ComponentTables tables;
  // The pattern's moe blocks take their options from their own table ([model.feedforward.moe]).
  tables.feedforward.insert(
      "moe",
      toml::table{{"experts", 4}, {"top_k", 2}, {"expert_d_ff", 16}, {"balance_loss_coef", 0.05}});
  auto model = pm::LanguageModel::build(options({"mlp", "moe"}), tables, registry());
  std::vector<float> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(static_cast<float>((i * 7) % 11));
  const eng::Tensor tokens = eng::Tensor::from_vector(ids, {2, 8}).to(eng::DType::kI32);
  const pm::ForwardResult out = model->forward(tokens, /*training=*/true);
  REQUIRE(out.aux_loss.defined());
  double from_stats = 0;
  bool has_load = false;
  for (const auto& [name, values] : out.stats) {
    CHECK(name.rfind("blocks.1.ffn.", 0) == 0);  // block 0 is the dense MLP: no statistics
    if (name == "blocks.1.ffn.balance_loss" || name == "blocks.1.ffn.z_loss")
      from_stats += values[0];
    has_load = has_load || name == "blocks.1.ffn.expert_load";
  }
  CHECK(has_load);
  CHECK(out.aux_loss.item() == doctest::Approx(from_stats).epsilon(1e-5));
  CHECK(out.aux_loss.item() > 0.05 * 0.99);  // the balancing loss alone is >= its coefficient

  const std::vector<pm::NamedParameter> params = model->parameters();
  const eng::Tensor* router = find_parameter(params, "blocks.1.ffn.router.weight");
  const eng::Tensor* expert = find_parameter(params, "blocks.1.ffn.experts.0.fc.weight");
  REQUIRE(router != nullptr);
  REQUIRE(expert != nullptr);
  eng::backward(out.aux_loss);
  REQUIRE(router->grad().defined());
  double norm = 0;
  for (float g : router->grad().to_vector()) norm += static_cast<double>(g) * g;
  CHECK(norm > 0);                        // the aux loss reaches the router through the model
  CHECK_FALSE(expert->grad().defined());  // and only the router
}

TEST_CASE("expert choice is refused in a causal language model when it is built") {
  CHECK_THROWS_WITH(pm::LanguageModel::build(options({"moe_expert_choice"}), {}, registry()),
                    doctest::Contains("cannot be used in a causal language model"));
}
