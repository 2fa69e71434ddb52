// Routers and auxiliary losses; formulas in router.hpp and README.md.
#include "router.hpp"

#include <cmath>

#include "engine_calls.hpp"

namespace patchbay_ffn_moe {

using patchbay::PluginError;
using patchbay::Tensor;

RouterKind parse_router(const std::string& name) {
  if (name == "topk") return RouterKind::kTopK;
  if (name == "switch") return RouterKind::kSwitch;
  if (name == "noisy_topk") return RouterKind::kNoisyTopK;
  throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                    "router '" + name + "' is not one of topk, switch, noisy_topk");
}

namespace {

// softplus(v) = max(v, 0) + log(1 + exp(−|v|)): no overflow for large |v|.
Tensor softplus(const Tensor& v) { return v.relu() + ((-v.abs()).exp() + 1.0).log(); }

}  // namespace

Router::Router(const patchbay::Ops& ops, patchbay::Generator& gen, const RouterSettings& settings,
               int64_t d_model, double init_std, pb_dtype dtype, const RegisterParameter& add)
    : ops_(ops), settings_(settings) {
  weight_ = add("router.weight", ops.randn({settings.experts, d_model}, gen, dtype) * init_std);
  if (settings.kind == RouterKind::kNoisyTopK) {
    noise_weight_ = add("router.noise_weight", ops.zeros({settings.experts, d_model}, dtype));
  }
}

Tensor Router::on_layer_device(const Tensor& t) const {
  return settings_.device_type == PB_DEVICE_CPU
             ? t
             : patchbay::to_device(t, settings_.device_type, settings_.device_index);
}

Tensor Router::logits(const Tensor& x2f) const {
  return x2f.matmul(weight_.to(PB_DTYPE_F32), false, true);
}

Routing Router::route(const Tensor& x2, bool training, patchbay::Generator& noise) const {
  const int64_t n = x2.size(0), c = x2.size(1);
  Tensor input = x2.to(PB_DTYPE_F32);
  if (training && settings_.jitter > 0) {
    input = input * on_layer_device(ops_.uniform({n, c}, noise, 1.0 - settings_.jitter,
                                                 1.0 + settings_.jitter));
  }
  Routing r;
  r.logits = logits(input);  // [N, E]
  r.probs = r.logits.softmax();
  Tensor selected_values, selected_ids;
  if (settings_.kind == RouterKind::kNoisyTopK) {
    Tensor h = r.logits;
    if (training) {
      const Tensor noise_std = softplus(input.matmul(noise_weight_.to(PB_DTYPE_F32), false, true));
      h = h + on_layer_device(ops_.randn({n, settings_.experts}, noise)) * noise_std;
    }
    std::tie(selected_values, selected_ids) = topk(h, settings_.k, 1);
    r.gates = selected_values.softmax();  // softmax(KeepTopK(H, k)) restricted to the kept k
  } else {
    std::tie(selected_values, selected_ids) = topk(r.probs, settings_.k, 1);
    r.gates = (settings_.kind == RouterKind::kTopK && settings_.renormalize)
                  ? selected_values / selected_values.sum({1}, true)
                  : selected_values;
  }
  const Tensor ids = selected_ids.contiguous();
  if (ids.dtype() != PB_DTYPE_I64)
    throw PluginError(PB_STATUS_INTERNAL, "topk returned non-int64 indices");
  r.ids = ids;
  if (settings_.device_type != PB_DEVICE_CPU) return r;  // no host copy (device_dispatch.hpp)
  const int64_t* id_data = ids.data<int64_t>();
  r.choices.assign(id_data, id_data + n * settings_.k);
  return r;
}

Tensor load_balancing_loss(const Tensor& probs, const std::vector<int64_t>& routed, int64_t k) {
  const patchbay::Ops ops(probs.ops());
  const int64_t n = probs.size(0), e = probs.size(1);
  std::vector<float> fraction(routed.size());
  for (size_t i = 0; i < routed.size(); ++i) {
    fraction[i] = static_cast<float>(static_cast<double>(routed[i]) / static_cast<double>(n * k));
  }
  const Tensor f = ops.from_vector(fraction, {e});
  return (f * probs.mean({0})).sum() * static_cast<double>(e);
}

Tensor router_z_loss(const Tensor& logits) {
  const Tensor m = topk(logits, 1, 1).first.detach();              // [N, 1], the row max
  const Tensor lse = (logits - m).exp().sum({1}, true).log() + m;  // [N, 1]
  return (lse * lse).mean();
}

double mean_router_entropy(const std::vector<float>& probs, int64_t experts) {
  const size_t n = probs.size() / static_cast<size_t>(experts);
  if (n == 0) return 0;
  double total = 0;
  for (float p : probs) {
    if (p > 0) total -= static_cast<double>(p) * std::log(static_cast<double>(p));
  }
  return total / static_cast<double>(n);
}

}  // namespace patchbay_ffn_moe
