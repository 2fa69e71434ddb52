// LinformerAttention: parameters, sharing modes and the bidirectional forward through the
// host's ops table; see linformer_attention.hpp for the definition and the choices.
#include "linformer_attention.hpp"

#include <cmath>
#include <vector>

namespace patchbay_linformer {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

LinformerAttention::Sharing parse_sharing(const std::string& text) {
  if (text == "none") return LinformerAttention::Sharing::kNone;
  if (text == "headwise") return LinformerAttention::Sharing::kHeadwise;
  if (text == "kv") return LinformerAttention::Sharing::kKeyValue;
  if (text == "layerwise")
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'linformer': sharing = \"layerwise\" needs one E shared by every "
                      "layer, and the host has no parameter sharing across layers yet; use "
                      "\"none\", \"headwise\" or \"kv\"");
  throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                    "attention 'linformer': sharing must be \"none\", \"headwise\" or \"kv\", "
                    "found \"" +
                        text + "\"");
}

}  // namespace

LinformerAttention::LinformerAttention(const patchbay::Host& host,
                                       const patchbay::ConfigView& config)
    : ops_(host.api()->ops),
      slots_(config.get_int("k")),
      sharing_(parse_sharing(config.get_string("sharing"))) {
  if (slots_ < 1)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "attention 'linformer': k must be >= 1, found " + std::to_string(slots_));
}

void LinformerAttention::init(const pb_layer_context& ctx) {
  if (ctx.device_type != PB_DEVICE_CPU && !patchbay::has_device_tensors(ops_.table()))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'linformer' runs on a device through the host's to_device (ops "
                      "table version 11); this host's table is version " +
                          std::to_string(ops_.table()->version));
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "param_dtype must be a float dtype, found " +
                          std::to_string(static_cast<int>(ctx.param_dtype)));
  if (ctx.max_seq_len < 1)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linformer' projects along the sequence and needs max_seq_len "
                      ">= 1 (the projection length n), found " +
                          std::to_string(ctx.max_seq_len));
  if (slots_ > ctx.max_seq_len)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linformer': k = " + std::to_string(slots_) +
                          " exceeds the projection length n = max_seq_len = " +
                          std::to_string(ctx.max_seq_len) + "; choose k <= n");
  d_model_ = ctx.d_model;
  n_heads_ = ctx.n_heads;
  head_dim_ = d_model_ / n_heads_;
  max_seq_len_ = ctx.max_seq_len;
  dtype_ = ctx.param_dtype;
  device_type_ = ctx.device_type;
  device_index_ = ctx.device_index;
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  // Drawn on the CPU and moved to the layer's device: a seed gives one layer on every device.
  auto on_device = [&](const Tensor& t) {
    return patchbay::to_device(t, ctx.device_type, ctx.device_index);
  };
  const int64_t c = d_model_;
  qkv_weight_ = add_parameter(
      "qkv.weight", on_device((ops_.randn({3 * c, c}, init_generator) * ctx.init_std).to(dtype_)));
  qkv_bias_ = add_parameter("qkv.bias", on_device(ops_.zeros({3 * c}, dtype_)));
  proj_weight_ = add_parameter(
      "proj.weight",
      on_device((ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_)));
  proj_bias_ = add_parameter("proj.bias", on_device(ops_.zeros({c}, dtype_)));
  std::vector<int64_t> shape = {slots_, max_seq_len_};
  if (sharing_ == Sharing::kNone) shape.insert(shape.begin(), n_heads_);
  const double bound = 1.0 / std::sqrt(static_cast<double>(slots_));
  proj_e_ = add_parameter("proj_e",
                          on_device(ops_.uniform(shape, init_generator, -bound, bound).to(dtype_)));
  if (sharing_ == Sharing::kKeyValue)
    proj_f_ = proj_e_;
  else
    proj_f_ = add_parameter(
        "proj_f", on_device(ops_.uniform(shape, init_generator, -bound, bound).to(dtype_)));
}

Tensor LinformerAttention::project_sequence(const Tensor& heads, const Tensor& p, int64_t t) const {
  // p [.., k, n] -> [.., k, T]: shorter inputs use the first T columns (zero-padding to n).
  Tensor used = p.slice(p.dim() - 1, 0, t);
  if (sharing_ == Sharing::kNone) used = used.reshape({1, n_heads_, slots_, t});
  return used.matmul(heads);  // [.., k, T] x [B, H, T, Dh] -> [B, H, k, Dh]
}

Tensor LinformerAttention::attend_slots(const Tensor& q, const Tensor& key_slots,
                                        const Tensor& value_slots) const {
  const int64_t b = q.size(0), t = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  // Every query sees every slot: the fused kernel, non-causal, over k keys.
  Tensor o = ops_.attention(q, key_slots, value_slots, false, scale);  // [B, H, T, Dh]
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_});
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

Tensor LinformerAttention::forward(const Tensor& x, bool /*training*/) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linformer' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t b = shape[0], t = shape[1];
  if (t > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "attention 'linformer': sequence of " + std::to_string(t) +
                          " positions exceeds the projection length n = max_seq_len = " +
                          std::to_string(max_seq_len_));
  Tensor qkv = x.to(dtype_).matmul(qkv_weight_, false, true) + qkv_bias_;  // [B, T, 3C]
  auto head = [&](int64_t which) {
    Tensor part =
        qkv.slice(2, which * d_model_, (which + 1) * d_model_).reshape({b, t, n_heads_, head_dim_});
    return part.permute({0, 2, 1, 3}).contiguous();  // [B, H, T, Dh]
  };
  Tensor k_slots = project_sequence(head(1), proj_e_, t);  // [B, H, k, Dh]
  Tensor v_slots = project_sequence(head(2), proj_f_, t);
  return attend_slots(head(0), k_slots, v_slots);
}

}  // namespace patchbay_linformer
