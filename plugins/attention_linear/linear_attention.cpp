// LinearAttention: parameters, whole-sequence forward (causal and bidirectional) and the
// recurrent decoding state, all through the host's ops table; see linear_attention.hpp.
#include "linear_attention.hpp"

#include <span>
#include <string>
#include <vector>

namespace patchbay_linear {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

// phi(x) = elu(x) + 1 = (x > 0 ? x + 1 : exp(x)) = relu(x) + exp(-relu(-x)): positive, and
// composed of differentiable ops.
Tensor elu_plus_one(const Tensor& x) { return x.relu() + (-((-x).relu())).exp(); }

// The RNN state of one decoding run (fp32): S [B, H, Dh, Dh], z [B, H, 1, Dh].
class RecurrentState : public patchbay::AttentionState {
 public:
  RecurrentState(int64_t batch, int64_t capacity, Tensor s, Tensor z)
      : AttentionState(batch, capacity), kv_sum(std::move(s)), key_sum(std::move(z)) {}
  Tensor kv_sum, key_sum;
  // Beam search (attention interface 1.1): sequence i takes sequence source[i]'s sums.
  void reorder(std::span<const int64_t> source) override {
    kv_sum = patchbay::reorder_batch(kv_sum, source);
    key_sum = patchbay::reorder_batch(key_sum, source);
  }
  // Shared prefixes (attention interface 1.4): new sums whose sequence i copies source[i]'s.
  std::unique_ptr<patchbay::AttentionState> fork(std::span<const int64_t> source) const override {
    return std::make_unique<RecurrentState>(static_cast<int64_t>(source.size()), capacity(),
                                            patchbay::reorder_batch(kv_sum, source),
                                            patchbay::reorder_batch(key_sum, source));
  }
};

}  // namespace

LinearAttention::LinearAttention(const patchbay::Host& host, const patchbay::ConfigView& config)
    : ops_(host.api()->ops), causal_(config.get_bool("causal")), eps_(config.get_float("eps")) {
  if (!(eps_ >= 0.0 && eps_ <= 1.0))
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "eps must lie in [0, 1], found " + std::to_string(eps_));
}

void LinearAttention::init(const pb_layer_context& ctx) {
  // A bidirectional model (model.causal = false, masked-LM) expects every position to see the
  // whole sequence; a layer left at causal = true there would silently see only the past.
  if (ctx.causal == 0 && causal_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linear' is configured with causal = true but the model is "
                      "bidirectional (model.causal = false); set [model.attention.linear] "
                      "causal = false");
  if (ctx.causal != 0 && !causal_)
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "attention 'linear' is configured with causal = false but the model is a causal language "
        "model; set causal = true (the default) or build a bidirectional model");
  if (ctx.device_type != PB_DEVICE_CPU && !patchbay::has_device_tensors(ops_.table()))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'linear' runs on a device through the host's to_device (ops "
                      "table version 11); this host's table is version " +
                          std::to_string(ops_.table()->version));
  device_type_ = ctx.device_type;
  device_index_ = ctx.device_index;
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "param_dtype must be a float dtype, found " +
                          std::to_string(static_cast<int>(ctx.param_dtype)));
  d_model_ = ctx.d_model;
  n_heads_ = ctx.n_heads;
  head_dim_ = d_model_ / n_heads_;
  max_seq_len_ = ctx.max_seq_len;
  dtype_ = ctx.param_dtype;
  // Drawn on the CPU and moved: a seed gives the same layer on every device.
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  const int64_t c = d_model_;
  qkv_weight_ = add_parameter(
      "qkv.weight", on_device((ops_.randn({3 * c, c}, init_generator) * ctx.init_std).to(dtype_)));
  qkv_bias_ = add_parameter("qkv.bias", on_device(ops_.zeros({3 * c}, dtype_)));
  proj_weight_ = add_parameter(
      "proj.weight",
      on_device((ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_)));
  proj_bias_ = add_parameter("proj.bias", on_device(ops_.zeros({c}, dtype_)));
}

Tensor LinearAttention::on_device(const Tensor& t) const {
  return device_type_ == PB_DEVICE_CPU ? t : patchbay::to_device(t, device_type_, device_index_);
}

LinearAttention::Features LinearAttention::project_features(const Tensor& x) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linear' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()) +
                          (shape.size() == 3 ? " with C " + std::to_string(shape[2]) : ""));
  const int64_t b = shape[0], t = shape[1];
  Tensor qkv = x.to(dtype_).matmul(qkv_weight_, false, true) + qkv_bias_;  // [B, T, 3C]
  auto head = [&](int64_t which) {  // block `which` -> [B, H, T, Dh] fp32, contiguous
    Tensor part =
        qkv.slice(2, which * d_model_, (which + 1) * d_model_).reshape({b, t, n_heads_, head_dim_});
    return part.permute({0, 2, 1, 3}).to(PB_DTYPE_F32).contiguous();
  };
  return Features{elu_plus_one(head(0)), elu_plus_one(head(1)), head(2)};
}

Tensor LinearAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_}).to(dtype_);  // [B, T, C]
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

Tensor LinearAttention::forward(const Tensor& x, bool /*training*/) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  Features f = project_features(x);
  Tensor num, key_sums;  // num [B, H, T, Dh]; key_sums broadcastable to [B, H, T, Dh]
  if (causal_) {
    num = patchbay::causal_linear_attention(f.fq, f.fk, f.v);
    key_sums = patchbay::cumsum(f.fk, 2);
  } else {
    num = f.fq.matmul(f.fk.matmul(f.v, true, false));  // fq (fk^T v)
    key_sums = f.fk.sum({2}, true);                    // [B, H, 1, Dh]
  }
  Tensor den = (f.fq * key_sums).sum({3}, true) + eps_;  // [B, H, T, 1]
  return project_out(num / den);
}

std::unique_ptr<patchbay::AttentionState> LinearAttention::create_state(int64_t batch,
                                                                        int64_t capacity) {
  if (!causal_)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "incremental decoding needs a causal layer; attention 'linear' is "
                      "configured with causal = false");
  // The state does not grow with the capacity; the capacity only bounds state_length.
  return std::make_unique<RecurrentState>(
      batch, capacity, on_device(ops_.zeros({batch, n_heads_, head_dim_, head_dim_}, PB_DTYPE_F32)),
      on_device(ops_.zeros({batch, n_heads_, 1, head_dim_}, PB_DTYPE_F32)));
}

Tensor LinearAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& rnn = static_cast<RecurrentState&>(state);
  Features f = project_features(x);  // [B, H, Tn, Dh]
  // Chunk positions see the state (all earlier tokens) plus the chunk's own prefix.
  Tensor num = patchbay::causal_linear_attention(f.fq, f.fk, f.v) + f.fq.matmul(rnn.kv_sum);
  Tensor key_sums = patchbay::cumsum(f.fk, 2) + rnn.key_sum;
  Tensor den = (f.fq * key_sums).sum({3}, true) + eps_;
  rnn.kv_sum = rnn.kv_sum + f.fk.matmul(f.v, true, false);
  rnn.key_sum = rnn.key_sum + f.fk.sum({2}, true);
  rnn.advance(x.size(1));
  return project_out(num / den);
}

}  // namespace patchbay_linear
