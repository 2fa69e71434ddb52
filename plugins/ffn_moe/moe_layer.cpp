// The "moe" component; see moe_layer.hpp and README.md. Dispatch: route (router.cpp) -> plan
// on the host (dispatch_plan.cpp: histogram + offsets, capacity in causal order) -> gather the
// kept rows grouped by expert (one embedding op: a row gather whose backward scatter-adds) ->
// one GEMM chain per expert on its contiguous slice -> scale by the gates -> add back per token
// (combine_rows). Never a dense tokens × experts × capacity tensor. Backward is the engine's
// autograd through these ops.
#include "moe_layer.hpp"

#include <string>

#include "split_rows.hpp"

namespace patchbay_ffn_moe {

using patchbay::PluginError;
using patchbay::Tensor;

namespace {

// Separate streams so that router noise and dropout never shift the init draws or each other.
constexpr uint64_t kNoiseStream = 0x6a09e667f3bcc909ull;
constexpr uint64_t kDropoutStream = 0x9e3779b97f4a7c15ull;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

ExpertSettings read_expert_settings(const patchbay::ConfigView& config) {
  ExpertSettings s;
  s.experts = config.get_int("experts");
  s.expert_d_ff = config.get_int("expert_d_ff");
  s.activation = parse_activation(config.get_string("activation"));
  s.bias = config.get_bool("bias");
  s.dropout = config.get_float("dropout");
  s.z_loss_coef = config.get_float("z_loss_coef");
  return s;
}

int64_t check_context(const pb_layer_context& ctx, const ExpertSettings& s, const char* component,
                      const std::string& device_refusal) {
  const std::string who = component;
  if (ctx.d_model <= 0 || ctx.d_ff <= 0) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      who + ": layer context d_model and d_ff must be > 0, got " +
                          std::to_string(ctx.d_model) + " and " + std::to_string(ctx.d_ff));
  }
  if (!(ctx.init_std >= 0) || !(ctx.residual_init_std >= 0)) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      who + ": layer context init_std and residual_init_std must be >= 0");
  }
  if (ctx.device_type != PB_DEVICE_CPU && !device_refusal.empty())
    throw PluginError(PB_STATUS_UNSUPPORTED, who + " runs on the CPU only: " + device_refusal);
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      who + ": param_dtype must be a float dtype (f32, bf16, f16)");
  }
  if (s.experts < 1) throw PluginError(PB_STATUS_INVALID_ARGUMENT, who + ": experts must be >= 1");
  return s.expert_d_ff > 0 ? s.expert_d_ff : ctx.d_ff;
}

Tensor combine_rows(const patchbay::Ops& ops, const Tensor& rows, const DispatchPlan& plan) {
  const int64_t c = rows.size(1);
  const Tensor padded =
      ops.concat({rows, ops.zeros({1, c}, rows.dtype())}, 0);  // [M + 1, C], row M = 0
  Tensor sum;
  for (int64_t j = 0; j < plan.k; ++j) {
    std::vector<int64_t> ids(static_cast<size_t>(plan.tokens));
    for (int64_t n = 0; n < plan.tokens; ++n)
      ids[static_cast<size_t>(n)] = plan.slot_rows[static_cast<size_t>(n * plan.k + j)];
    const Tensor part = ops.embedding(padded, ops.from_vector(ids, {plan.tokens}));  // [N, C]
    sum = sum.defined() ? sum + part : part;
  }
  return sum;
}

MoeLayer::MoeLayer(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      experts_settings_(read_expert_settings(config)),
      capacity_factor_(config.get_float("capacity_factor")),
      eval_capacity_factor_(config.get_float("eval_capacity_factor")),
      dropless_(config.get_bool("dropless")),
      shared_expert_(config.get_bool("shared_expert")),
      balance_loss_coef_(config.get_float("balance_loss_coef")),
      split_with_custom_op_(config.get_string("expert_split") == "custom_op") {
  router_settings_.kind = parse_router(config.get_string("router"));
  router_settings_.experts = experts_settings_.experts;
  const int64_t k = config.get_int("top_k");
  if (router_settings_.kind == RouterKind::kSwitch && k > 1) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "router = \"switch\" is top-1, but top_k = " + std::to_string(k) +
                          "; leave top_k at 0 (or 1), or use router = \"topk\" for k > 1");
  }
  router_settings_.k = k > 0 ? k : (router_settings_.kind == RouterKind::kSwitch ? 1 : 2);
  if (router_settings_.k > experts_settings_.experts) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "top_k = " + std::to_string(router_settings_.k) +
                          " exceeds experts = " + std::to_string(experts_settings_.experts) +
                          "; a token picks k distinct experts");
  }
  router_settings_.renormalize = config.get_bool("renormalize");
  router_settings_.jitter = config.get_float("router_jitter");
}

void MoeLayer::init(const pb_layer_context& ctx) {
  const pb_ops_table* table = host_.api()->ops;
  std::string device_refusal;
  if (!patchbay::has_device_tensors(table))
    device_refusal = "a device needs the host's to_device (ops table version 11)";
  else if (dropless_)
    device_refusal =
        "dropless routing has no fixed capacity, and a device runs the fixed-capacity "
        "dispatch (no host reads); set dropless = false there (capacity_factor)";
  const int64_t hidden = check_context(ctx, experts_settings_, "moe", device_refusal);
  d_model_ = ctx.d_model;
  device_ = DeviceTensors{table, ctx.device_type, ctx.device_index};
  router_settings_.device_type = ctx.device_type;
  router_settings_.device_index = ctx.device_index;
  const patchbay::Ops ops(table);
  patchbay::NoGradGuard no_grad(ops.table());
  patchbay::Generator init_gen(ops.table(), ctx.seed);
  // Drawn on the CPU and moved: a seed gives the same layer on every device.
  const RegisterParameter add = [this](std::string name, Tensor t) -> Tensor& {
    return register_parameter(std::move(name), device_.moved(t));
  };
  // Draw order: router, experts 0..E-1, shared expert: fixed, so a seed always gives the same
  // model.
  router_.emplace(ops, init_gen, router_settings_, ctx.d_model, ctx.init_std, ctx.param_dtype, add);
  const ExpertShape shape{ctx.d_model, hidden, experts_settings_.activation,
                          experts_settings_.bias};
  experts_.reserve(static_cast<size_t>(experts_settings_.experts));
  for (int64_t e = 0; e < experts_settings_.experts; ++e) {
    experts_.emplace_back(ops, init_gen, shape, "experts." + std::to_string(e), ctx.init_std,
                          ctx.residual_init_std, ctx.param_dtype, add);
  }
  if (shared_expert_) {
    shared_.emplace(ops, init_gen, shape, "shared_expert", ctx.init_std, ctx.residual_init_std,
                    ctx.param_dtype, add);
  }
  noise_gen_ = std::make_unique<patchbay::Generator>(ops.table(), ctx.seed ^ kNoiseStream);
  dropout_gen_ = std::make_unique<patchbay::Generator>(ops.table(), ctx.seed ^ kDropoutStream);
}

patchbay::FeedForward::Output MoeLayer::forward(const Tensor& x, bool training) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_) {
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "moe: x must be [B, T, " + std::to_string(d_model_) + "] but is " + shape_text(shape));
  }
  const patchbay::Ops ops(host_.api()->ops);
  const int64_t batch = shape[0], seq = shape[1], n = batch * seq, k = router_settings_.k;
  const int64_t e_count = experts_settings_.experts;
  const Tensor x2 = x.reshape({n, d_model_});  // [N, C]

  const Routing routing = router_->route(x2, training, *noise_gen_);
  const double factor = training ? capacity_factor_ : eval_capacity_factor_;
  const int64_t capacity = dropless_ ? -1 : expert_capacity(n, k, e_count, factor);
  if (device_.type != PB_DEVICE_CPU) return forward_on_device(x, x2, routing, capacity, training);
  const DispatchPlan plan = plan_dispatch(routing.choices, batch, seq, k, e_count, capacity);

  Tensor y2;
  if (plan.kept() > 0) {
    const int64_t kept = plan.kept();
    const Tensor grouped =
        ops.embedding(x2, ops.from_vector(plan.sorted_tokens, {kept}));  // [M, C]
    std::vector<Tensor> blocks;  // one per expert with rows, in expert order
    if (split_with_custom_op_) {
      blocks = split_rows(grouped, plan.offsets);
    } else {
      for (int64_t e = 0; e < e_count; ++e) {
        const int64_t begin = plan.offsets[static_cast<size_t>(e)],
                      end = plan.offsets[static_cast<size_t>(e) + 1];
        if (end > begin) blocks.push_back(grouped.slice(0, begin, end));
      }
    }
    std::vector<Tensor> outputs;
    for (int64_t e = 0; e < e_count; ++e) {
      if (plan.offsets[static_cast<size_t>(e) + 1] > plan.offsets[static_cast<size_t>(e)]) {
        outputs.push_back(experts_[static_cast<size_t>(e)].forward(blocks[outputs.size()]));
      }
    }
    const Tensor expert_out = outputs.size() == 1 ? outputs[0] : ops.concat(outputs, 0);  // [M, C]
    const Tensor gates = ops.embedding(routing.gates.reshape({n * k, 1}),
                                       ops.from_vector(plan.sorted_slots, {kept}));
    y2 = combine_rows(ops, expert_out * gates.to(expert_out.dtype()), plan);  // [N, C]
  } else {
    y2 = ops.zeros({n, d_model_}, x.dtype());
  }
  if (shared_) y2 = y2 + shared_->forward(x2);
  Tensor y = y2.reshape(shape);
  if (training && experts_settings_.dropout >= 1.0) {
    y = y * 0.0;
  } else if (training && experts_settings_.dropout > 0) {
    y = y.dropout(experts_settings_.dropout, *dropout_gen_, true);
  }

  // Auxiliary losses (f32, over every token of x: the interface carries no padding mask, so
  // every token is real) and statistics.
  Tensor aux;
  double balance_value = 0, z_value = 0;
  if (balance_loss_coef_ > 0) {
    const Tensor balance = load_balancing_loss(routing.probs, plan.routed, k) * balance_loss_coef_;
    balance_value = balance.item();
    aux = balance;
  }
  if (experts_settings_.z_loss_coef > 0) {
    const Tensor z = router_z_loss(routing.logits) * experts_settings_.z_loss_coef;
    z_value = z.item();
    aux = aux.defined() ? aux + z : z;
  }
  std::vector<float> load(static_cast<size_t>(e_count));
  for (int64_t e = 0; e < e_count; ++e) {
    load[static_cast<size_t>(e)] = static_cast<float>(
        static_cast<double>(plan.routed[static_cast<size_t>(e)]) / static_cast<double>(n * k));
  }
  const double entropy = mean_router_entropy(routing.probs.to_vector(), e_count);
  std::vector<Stat> stats = {
      Stat{"expert_load", std::move(load)},
      Stat{"dropped_fraction",
           {static_cast<float>(static_cast<double>(plan.dropped) / static_cast<double>(n * k))}},
      Stat{"router_entropy", {static_cast<float>(entropy)}},
      Stat{"balance_loss", {static_cast<float>(balance_value)}},
      Stat{"z_loss", {static_cast<float>(z_value)}},
  };
  return Output{std::move(y), std::move(aux), std::move(stats)};
}

// The device path (device_dispatch.hpp): the same routing, the fixed-capacity dispatch, the same
// auxiliary losses from device counts; no statistics (they are host numbers: a read per layer).
patchbay::FeedForward::Output MoeLayer::forward_on_device(const Tensor& x, const Tensor& x2,
                                                          const Routing& routing, int64_t capacity,
                                                          bool training) {
  const std::vector<int64_t> shape = x.shape();
  const patchbay::Ops ops(host_.api()->ops);
  const int64_t batch = shape[0], seq = shape[1], n = batch * seq, k = router_settings_.k;
  const int64_t e_count = experts_settings_.experts;
  if (priority_shape_ != std::vector<int64_t>{batch, seq}) {  // one copy up per batch shape
    priority_ = device_.moved(ops.from_vector(priority_scores(batch, seq, k), {n * k}));
    priority_shape_ = {batch, seq};
  }
  const DeviceDispatch plan =
      plan_dispatch_on_device(device_, routing.ids, priority_, e_count, capacity);
  const int64_t c = plan.capacity;
  const Tensor x_per_choice =
      x2.reshape({n, 1, d_model_}).expand({n, k, d_model_}).reshape({n * k, d_model_});
  const Tensor rows = ops.embedding(x_per_choice, plan.slots);  // [E·C, C_model]
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<size_t>(e_count));
  for (int64_t e = 0; e < e_count; ++e)
    outputs.push_back(experts_[static_cast<size_t>(e)].forward(rows.slice(0, e * c, (e + 1) * c)));
  const Tensor expert_out = outputs.size() == 1 ? outputs[0] : ops.concat(outputs, 0);
  const Tensor gates = ops.embedding(routing.gates.reshape({n * k, 1}), plan.slots) * plan.filled;
  Tensor y2 = combine_on_device(device_, expert_out * gates.to(expert_out.dtype()), plan, n, k);
  if (shared_) y2 = y2 + shared_->forward(x2);
  Tensor y = y2.reshape(shape);
  if (training && experts_settings_.dropout >= 1.0) {
    y = y * 0.0;
  } else if (training && experts_settings_.dropout > 0) {
    y = y.dropout(experts_settings_.dropout, *dropout_gen_, true);
  }
  Tensor aux;
  if (balance_loss_coef_ > 0) {
    // f_i = routed_i / (N·k) as an f32 division: the host path's float(routed / (N·k)).
    const Tensor fraction = plan.routed / device_.full({e_count}, static_cast<double>(n * k));
    aux = (fraction * routing.probs.mean({0})).sum() * static_cast<double>(e_count) *
          balance_loss_coef_;
  }
  if (experts_settings_.z_loss_coef > 0) {
    const Tensor z = router_z_loss(routing.logits) * experts_settings_.z_loss_coef;
    aux = aux.defined() ? aux + z : z;
  }
  return Output{std::move(y), std::move(aux), {}};
}

}  // namespace patchbay_ffn_moe
