// PerformerAttention: parameters and features, whole-sequence forward (causal and
// bidirectional), feature redraw in training and the recurrent decoding state, all through the
// host's ops table; see performer_attention.hpp for the definition and the stabilisers.
// On a device (ops table version 11) every tensor of a forward lives there and nothing is read
// back: the parameters are drawn on the CPU and moved, constants are created on the device,
// the stabiliser c stays a device tensor, and only the redraw count lives in host memory.
#include "performer_attention.hpp"

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "random_features.hpp"

namespace patchbay_performer {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

class RecurrentState : public patchbay::AttentionState {
 public:
  RecurrentState(int64_t batch, int64_t capacity, Tensor s, Tensor z)
      : AttentionState(batch, capacity), kv_sum(std::move(s)), key_sum(std::move(z)) {}
  Tensor kv_sum;   // sum_j phi(k_j) v_j^T [B, H, m, Dh]
  Tensor key_sum;  // sum_j phi(k_j) [B, H, 1, m]
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

// The largest entry of x [m] as a [1] tensor on x's device, through the ops table's topk (no
// host read on any device).
Tensor top1(const Tensor& x) {
  const pb_ops_table* ops = x.ops();
  pb_tensor* values = nullptr;
  pb_tensor* indices = nullptr;
  patchbay::check_ops_status(ops, ops->topk(x.handle(), 1, 0, 1, &values, &indices), "topk");
  Tensor index_holder(ops, indices);  // released with the scope
  return Tensor(ops, values);
}

// The redraw count is stored as two f32 values below 2^24 (exact in f32): up to 2^48 forwards.
constexpr int64_t kCountHalf = int64_t{1} << 24;

}  // namespace

PerformerAttention::PerformerAttention(const patchbay::Host& host,
                                       const patchbay::ConfigView& config)
    : ops_(host.api()->ops),
      causal_(config.get_bool("causal")),
      configured_features_(config.get_int("nb_features")),
      redraw_interval_(config.get_int("redraw_interval")) {
  if (configured_features_ < 0 || redraw_interval_ < 0)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "nb_features and redraw_interval must be >= 0, found " +
                          std::to_string(configured_features_) + " and " +
                          std::to_string(redraw_interval_));
}

void PerformerAttention::init(const pb_layer_context& ctx) {
  // A bidirectional model (model.causal = false, masked-LM) expects every position to see the
  // whole sequence; a layer left at causal = true there would silently see only the past.
  if (ctx.causal == 0 && causal_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'performer' is configured with causal = true but the model is "
                      "bidirectional (model.causal = false); set [model.attention.performer] "
                      "causal = false");
  if (ctx.causal != 0 && !causal_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'performer' is configured with causal = false but the model is "
                      "a causal language model; set causal = true (the default) or build a "
                      "bidirectional model");
  if (ctx.device_type != PB_DEVICE_CPU && !patchbay::has_device_tensors(ops_.table()))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'performer' runs on a device through the host's to_device (ops "
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
  features_ = configured_features_ > 0 ? configured_features_ : default_feature_count(head_dim_);
  feature_seed_ = ctx.seed ^ 0x0fa70fa7ull;
  // Drawn on the CPU and moved: a seed gives the same layer on every device.
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  const int64_t c = d_model_;
  qkv_weight_ = add_parameter(
      "qkv.weight", on_device((ops_.randn({3 * c, c}, init_generator) * ctx.init_std).to(dtype_)));
  qkv_bias_ = add_parameter("qkv.bias", filled({3 * c}, 0.0, dtype_));
  proj_weight_ = add_parameter(
      "proj.weight",
      on_device((ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_)));
  proj_bias_ = add_parameter("proj.bias", filled({c}, 0.0, dtype_));
  // Features: fp32 state in the checkpoint, never trained (no requires_grad).
  omega_ = add_parameter("features.omega", filled({features_, head_dim_}, 0.0));
  omega_.requires_grad(false);
  minus_ones_column_ = filled({features_, 1}, -1.0);
  // The SDK registers parameters as float tensors; the count is kept exact as two f32 halves.
  // It stays in host memory on every device: the redraw decision is the host's, and reading it
  // from a device would wait for the GPU on every training forward (the optimizer never sees
  // it: no requires_grad; checkpoints copy it like any parameter).
  training_forwards_ = add_parameter("features.training_forwards", ops_.zeros({2}, PB_DTYPE_F32));
  training_forwards_.requires_grad(false);
  draw_features(0);
}

Tensor PerformerAttention::on_device(const Tensor& t) const {
  return device_type_ == PB_DEVICE_CPU ? t : patchbay::to_device(t, device_type_, device_index_);
}

Tensor PerformerAttention::filled(const std::vector<int64_t>& shape, double value,
                                  pb_dtype dtype) const {
  if (device_type_ == PB_DEVICE_CPU) return ops_.full(shape, value, dtype);
  pb_tensor* out = nullptr;  // created on the device (no copy from the host)
  patchbay::check_ops_status(ops_.table(),
                             ops_.table()->full(shape.data(), shape.size(), value, dtype,
                                                device_type_, device_index_, &out),
                             "performer full");
  return Tensor(ops_.table(), out);
}

void PerformerAttention::draw_features(uint64_t draw) {
  const std::vector<float> omega =
      draw_orthogonal_features(features_, head_dim_, feature_seed_, draw);
  patchbay::check_ops_status(
      ops_.table(),
      ops_.table()->copy_from_host(omega_.handle(), omega.data(), omega.size() * sizeof(float)),
      "performer feature draw");
  current_draw_ = draw;
}

PerformerAttention::Features PerformerAttention::project_features(const Tensor& x) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'performer' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t b = shape[0], t = shape[1];
  Tensor qkv = x.to(dtype_).matmul(qkv_weight_, false, true) + qkv_bias_;  // [B, T, 3C]
  auto head = [&](int64_t which) {                                         // [B, H, T, Dh] fp32
    Tensor part =
        qkv.slice(2, which * d_model_, (which + 1) * d_model_).reshape({b, t, n_heads_, head_dim_});
    return part.permute({0, 2, 1, 3}).to(PB_DTYPE_F32).contiguous();
  };
  const Tensor omega = omega_.detach();
  return Features{query_features(head(0), omega), key_features(head(1), omega), head(2)};
}

Tensor PerformerAttention::query_features(const Tensor& q, const Tensor& omega) const {
  const double pre_scale = std::pow(static_cast<double>(head_dim_), -0.25);
  // exp(u - max_f u) / sum_f exp(u - max_f u), the engine's fused softmax (one pass forward, one
  // backward): the per-row max stabiliser and a per-row sum, both factors common to row i's
  // numerator and denominator, so they cancel (and so does their gradient).
  return (q * pre_scale).matmul(omega, false, true).softmax();  // [B, H, T, m]
}

Tensor PerformerAttention::key_features(const Tensor& k, const Tensor& omega) const {
  // c is recomputed from the given omega on every call, so a checkpoint restore (which
  // writes omega in place) or a redraw never leaves it stale. It stays a tensor on omega's
  // device, [1]: the largest |omega_f|^2 by top-1 (values are copies, so the bits of max(),
  // whose argmax a device would read back), then halved (exact).
  const double pre_scale = std::pow(static_cast<double>(head_dim_), -0.25);
  const Tensor c = top1(omega.pow(2.0).sum({1})) * 0.5;  // [1]
  const Tensor ks = k * pre_scale;
  // exp(omega_f . ks - |ks|^2 / 2 - c) as one product: ks gets a column |ks|^2 / 2 + c and
  // omega a column of -1, so the shift rides in the GEMM instead of a broadcast pass.
  Tensor ks_aug = ops_.concat({ks, ks.pow(2.0).sum({3}, true) * 0.5 + c}, 3);  // [B, H, T, Dh + 1]
  Tensor omega_aug = ops_.concat({omega, minus_ones_column_}, 1);              // [m, Dh + 1]
  return ks_aug.matmul(omega_aug, false, true).exp();                          // [B, H, T, m]
}

Tensor PerformerAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_}).to(dtype_);
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

Tensor PerformerAttention::forward(const Tensor& x, bool training) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  if (training) count_training_forward();
  Features f = project_features(x);
  if (causal_) {
    // Numerator and normaliser in one kernel call: v gets a column of ones, whose output is
    // sum_{j <= i} phi(q_i) . phi(k_j), the denominator (no cumsum of phi(k), no product
    // with phi(q) and reduction over m, nor their backward passes).
    const int64_t dh = head_dim_;
    Tensor v_ones = ops_.concat({f.v, filled({f.v.size(0), f.v.size(1), f.v.size(2), 1}, 1.0)}, 3);
    Tensor num_den = patchbay::causal_linear_attention(f.fq, f.fk, v_ones);  // [B, H, T, Dh + 1]
    Tensor den = num_den.slice(3, dh, dh + 1) + kDenominatorFloor;
    return project_out(num_den.slice(3, 0, dh) / den);
  }
  Tensor num = f.fq.matmul(f.fk.matmul(f.v, true, false));
  Tensor den = (f.fq * f.fk.sum({2}, true)).sum({3}, true) + kDenominatorFloor;
  return project_out(num / den);
}

void PerformerAttention::count_training_forward() {
  // The count lives in a tensor that a checkpoint restore overwrites in place (together with
  // omega_). A count other than the one this layer last wrote means such a restore: the draw
  // omega_ holds is then unknown here, so the features are drawn again for this count (draws
  // are a function of (seed, index): the same index gives the same features).
  float* halves = training_forwards_.data<float>();  // {count / 2^24, count mod 2^24}
  const int64_t forwards =
      static_cast<int64_t>(halves[0]) * kCountHalf + static_cast<int64_t>(halves[1]);
  const uint64_t draw =
      redraw_interval_ > 0 ? static_cast<uint64_t>(forwards / redraw_interval_) : 0;
  if (draw != current_draw_ || forwards != next_forward_) draw_features(draw);
  next_forward_ = forwards + 1;
  halves[0] = static_cast<float>((forwards + 1) / kCountHalf);  // exact: both < 2^24
  halves[1] = static_cast<float>((forwards + 1) % kCountHalf);
}

std::unique_ptr<patchbay::AttentionState> PerformerAttention::create_state(int64_t batch,
                                                                           int64_t capacity) {
  if (!causal_)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "incremental decoding needs a causal layer; attention 'performer' is "
                      "configured with causal = false");
  return std::make_unique<RecurrentState>(batch, capacity,
                                          filled({batch, n_heads_, features_, head_dim_}, 0.0),
                                          filled({batch, n_heads_, 1, features_}, 0.0));
}

Tensor PerformerAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& rnn = static_cast<RecurrentState&>(state);
  Features f = project_features(x);
  Tensor num = patchbay::causal_linear_attention(f.fq, f.fk, f.v) + f.fq.matmul(rnn.kv_sum);
  Tensor key_sums = patchbay::cumsum(f.fk, 2) + rnn.key_sum;
  Tensor den = (f.fq * key_sums).sum({3}, true) + kDenominatorFloor;
  rnn.kv_sum = rnn.kv_sum + f.fk.matmul(f.v, true, false);
  rnn.key_sum = rnn.key_sum + f.fk.sum({2}, true);
  rnn.advance(x.size(1));
  return project_out(num / den);
}

}  // namespace patchbay_performer
