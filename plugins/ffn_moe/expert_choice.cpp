// The "moe_expert_choice" component; see expert_choice.hpp. Each expert's picks are already
// grouped (row-major [E, capacity] of topk), so the gather is one embedding op and the
// combine one scatter_add along tokens.
#include "expert_choice.hpp"

#include <algorithm>
#include <string>

#include "engine_calls.hpp"
#include "split_rows.hpp"

namespace patchbay_ffn_moe {

using patchbay::PluginError;
using patchbay::Tensor;

namespace {
constexpr uint64_t kDropoutStream = 0x9e3779b97f4a7c15ull;
}

ExpertChoiceLayer::ExpertChoiceLayer(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      experts_settings_(read_expert_settings(config)),
      capacity_factor_(config.get_float("capacity_factor")) {}

void ExpertChoiceLayer::init(const pb_layer_context& ctx) {
  if (ctx.causal != 0) {
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "moe_expert_choice cannot be used in a causal language model: each expert picks its tokens "
        "from the whole batch, later positions included, so future tokens would decide what "
        "earlier "
        "ones get. Use kind = \"moe\" (token choice) here; expert choice needs a bidirectional "
        "objective (masked-LM)");
  }
  const int64_t hidden =
      check_context(ctx, experts_settings_, "moe_expert_choice",
                    "its dispatch is planned on the host from the router's scores (use "
                    "kind = \"moe\" on a device)");
  d_model_ = ctx.d_model;
  const patchbay::Ops ops(host_.api()->ops);
  patchbay::NoGradGuard no_grad(ops.table());
  patchbay::Generator init_gen(ops.table(), ctx.seed);
  const RegisterParameter add = [this](std::string name, Tensor t) -> Tensor& {
    return register_parameter(std::move(name), std::move(t));
  };
  RouterSettings router_settings;
  router_settings.kind = RouterKind::kTopK;
  router_settings.experts = experts_settings_.experts;
  router_.emplace(ops, init_gen, router_settings, ctx.d_model, ctx.init_std, ctx.param_dtype, add);
  const ExpertShape shape{ctx.d_model, hidden, experts_settings_.activation,
                          experts_settings_.bias};
  experts_.reserve(static_cast<size_t>(experts_settings_.experts));
  for (int64_t e = 0; e < experts_settings_.experts; ++e) {
    experts_.emplace_back(ops, init_gen, shape, "experts." + std::to_string(e), ctx.init_std,
                          ctx.residual_init_std, ctx.param_dtype, add);
  }
  dropout_gen_ = std::make_unique<patchbay::Generator>(ops.table(), ctx.seed ^ kDropoutStream);
}

patchbay::FeedForward::Output ExpertChoiceLayer::forward(const Tensor& x, bool training) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "moe_expert_choice: x must be [B, T, " + std::to_string(d_model_) + "]");
  }
  const patchbay::Ops ops(host_.api()->ops);
  const int64_t n = shape[0] * shape[1], e_count = experts_settings_.experts;
  const Tensor x2 = x.reshape({n, d_model_});
  const Tensor logits = router_->logits(x2.to(PB_DTYPE_F32));  // [N, E]
  const Tensor probs = logits.softmax();
  // capacity uses k = 1 in expert_capacity's formula: ceil(factor · N / E), at most N.
  const int64_t capacity = std::min(n, expert_capacity(n, 1, e_count, capacity_factor_));
  auto [gates, picked] = topk(probs.transpose(0, 1).contiguous(), capacity, 1);  // [E, cap] each
  const int64_t rows = e_count * capacity;
  const Tensor picked_rows = picked.reshape({rows});
  const Tensor grouped = ops.embedding(x2, picked_rows);  // [E·cap, C]
  std::vector<int64_t> bounds;
  for (int64_t e = 0; e <= e_count; ++e) bounds.push_back(e * capacity);
  const std::vector<Tensor> blocks = split_rows(grouped, bounds);  // capacity >= 1: one per expert
  std::vector<Tensor> outputs;
  for (int64_t e = 0; e < e_count; ++e)
    outputs.push_back(experts_[static_cast<size_t>(e)].forward(blocks[static_cast<size_t>(e)]));
  const Tensor expert_out = e_count == 1 ? outputs[0] : ops.concat(outputs, 0);  // [E·cap, C]
  const Tensor weighted = expert_out * gates.reshape({rows, 1}).to(expert_out.dtype());
  const Tensor index = picked_rows.reshape({rows, 1}).expand({rows, d_model_}).contiguous();
  Tensor y =
      scatter_add(ops.zeros({n, d_model_}, weighted.dtype()), 0, index, weighted).reshape(shape);
  if (training && experts_settings_.dropout >= 1.0) {
    y = y * 0.0;
  } else if (training && experts_settings_.dropout > 0) {
    y = y.dropout(experts_settings_.dropout, *dropout_gen_, true);
  }

  Tensor aux;
  double z_value = 0;
  if (experts_settings_.z_loss_coef > 0) {
    aux = router_z_loss(logits) * experts_settings_.z_loss_coef;
    z_value = aux.item();
  }
  const Tensor picked_host = picked_rows.contiguous();
  const int64_t* ids = picked_host.data<int64_t>();
  std::vector<char> chosen(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < rows; ++i) chosen[static_cast<size_t>(ids[i])] = 1;
  const auto unpicked = static_cast<double>(std::count(chosen.begin(), chosen.end(), 0));
  std::vector<float> load(static_cast<size_t>(e_count),
                          static_cast<float>(1.0 / static_cast<double>(e_count)));
  std::vector<Stat> stats = {
      Stat{"expert_load", std::move(load)},
      Stat{"dropped_fraction", {static_cast<float>(unpicked / static_cast<double>(n))}},
      Stat{"router_entropy", {static_cast<float>(mean_router_entropy(probs.to_vector(), e_count))}},
      Stat{"z_loss", {static_cast<float>(z_value)}},
  };
  return Output{std::move(y), std::move(aux), std::move(stats)};
}

}  // namespace patchbay_ffn_moe
