// LocalAttention: parameters, whole-sequence forward and KV-cache decoding through the host's
// ops table (patchbay::Tensor); see local_attention.hpp for the shapes and the window rule.
#include "local_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace local_attention {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

// Use the engine's fused windowed attention when the host's ops table has it (version >= 3);
// false always takes the explicit masked path (same values, O(T^2) memory).
[[maybe_unused]] constexpr bool kPreferFusedWindowOp = true;

// The KV cache of one decoding run: keys and values [B, H, capacity, Dh].
class KvCache : public patchbay::AttentionState {
 public:
  KvCache(int64_t batch, int64_t capacity, Tensor keys, Tensor values)
      : AttentionState(batch, capacity), k(std::move(keys)), v(std::move(values)) {}
  Tensor k, v;
};

// Copies src into the (strided) cache view dst through the ops table.
void copy_into(Tensor& dst, const Tensor& src) {
  Tensor packed = src.to(dst.dtype()).contiguous();
  const pb_ops_table* ops = dst.ops();
  const size_t bytes = static_cast<size_t>(packed.numel()) * (dst.dtype() == PB_DTYPE_F32 ? 4 : 2);
  patchbay::check_ops_status(ops, ops->copy_from_host(dst.handle(), packed.data<void>(), bytes),
                             "kv cache write");
}

}  // namespace

LocalAttention::LocalAttention(const patchbay::Host& host, const patchbay::ConfigView& config)
    : ops_(host.api()->ops), window_(config.get_int("window")) {
  if (window_ < 1)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "window must be at least 1, found " + std::to_string(window_));
}

void LocalAttention::init(const pb_layer_context& ctx) {
  if (ctx.device_type != PB_DEVICE_CPU)
    throw PluginError(PB_STATUS_UNSUPPORTED, "attention 'local' runs on the CPU only");
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "param_dtype must be a float dtype");
  d_model_ = ctx.d_model;
  n_heads_ = ctx.n_heads;
  head_dim_ = d_model_ / n_heads_;
  max_seq_len_ = ctx.max_seq_len;
  rotary_ = ctx.positional == PB_POSITIONAL_ROTARY;
  rope_theta_ = ctx.rope_theta > 0 ? ctx.rope_theta : 10000.0;
  if (rotary_ && head_dim_ % 2 != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "rotary positions need an even head dim, found " + std::to_string(head_dim_));
  dtype_ = ctx.param_dtype;

  patchbay::Generator gen(ops_.table(), ctx.seed);
  const int64_t c = d_model_;
  qkv_weight_ =
      add_parameter("qkv.weight", (ops_.randn({3 * c, c}, gen) * ctx.init_std).to(dtype_));
  qkv_bias_ = add_parameter("qkv.bias", ops_.zeros({3 * c}, dtype_));
  proj_weight_ =
      add_parameter("proj.weight", (ops_.randn({c, c}, gen) * ctx.residual_init_std).to(dtype_));
  proj_bias_ = add_parameter("proj.bias", ops_.zeros({c}, dtype_));
}

LocalAttention::Heads LocalAttention::project_heads(const Tensor& x, int64_t position_offset) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'local' expects x [B, T, " + std::to_string(d_model_) +
                          "], found rank " + std::to_string(shape.size()));
  const int64_t b = shape[0], t = shape[1];
  Tensor qkv = x.to(dtype_).matmul(qkv_weight_, false, true) + qkv_bias_;  // [B, T, 3C]
  auto head = [&](int64_t which) {  // block `which` of qkv -> [B, H, T, Dh]
    return qkv.slice(2, which * d_model_, (which + 1) * d_model_)
        .reshape({b, t, n_heads_, head_dim_})
        .permute({0, 2, 1, 3});
  };
  Heads heads{head(0), head(1), head(2)};
  if (rotary_) {
    heads.q = patchbay::rotary_embedding(heads.q, position_offset, rope_theta_);
    heads.k = patchbay::rotary_embedding(heads.k, position_offset, rope_theta_);
  }
  return heads;
}

Tensor LocalAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_});
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

Tensor LocalAttention::windowed_attention(const Tensor& q, const Tensor& k, const Tensor& v) const {
  const int64_t tq = q.size(2), tk = k.size(2), offset = tk - tq;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
#if defined(PB_OPS_TABLE_VERSION) && PB_OPS_TABLE_VERSION >= 3
  const pb_ops_table* table = ops_.table();
  if (kPreferFusedWindowOp && table->version >= 3 &&
      PB_HAS_FIELD(table, pb_ops_table, attention_with_options) && table->attention_with_options != nullptr) {
    // Causal, bottom-right aligned (query i is position offset + i), keys p - window < j <= p.
    pb_attention_options options{};
    options.struct_size = sizeof(options);
    options.causal = 1;
    options.scale = scale;
    options.window = window_;
    options.alibi_slopes = nullptr;
    pb_tensor* out = nullptr;
    patchbay::check_ops_status(table, table->attention_with_options(q.handle(), k.handle(), v.handle(), &options, &out),
                               "windowed attention");
    return Tensor(table, out);
  }
#endif
  // mask [Tq, Tk]: 1 (filled with -inf) where key j is in the future of query i (absolute
  // position p = offset + i) or at least `window` positions behind it.
  std::vector<float> mask(static_cast<size_t>(tq * tk), 0.0f);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t p = offset + i;
    for (int64_t j = 0; j < tk; ++j)
      if (j > p || j <= p - window_) mask[static_cast<size_t>(i * tk + j)] = 1.0f;
  }
  Tensor scores = q.to(PB_DTYPE_F32).matmul(k.to(PB_DTYPE_F32), false, true) * scale;
  Tensor masked = scores.masked_fill(ops_.from_vector(mask, {tq, tk}),
                                     -std::numeric_limits<double>::infinity());
  return masked.softmax().matmul(v.to(PB_DTYPE_F32)).to(q.dtype());  // [B, H, Tq, Dh]
}

Tensor LocalAttention::forward(const Tensor& x, bool /*training*/) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  Heads h = project_heads(x, 0);
  return project_out(windowed_attention(h.q, h.k, h.v));
}

std::unique_ptr<patchbay::AttentionState> LocalAttention::create_state(int64_t batch,
                                                                       int64_t capacity) {
  if (max_seq_len_ > 0 && capacity > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "capacity " + std::to_string(capacity) +
                                                  " exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  const std::vector<int64_t> shape = {batch, n_heads_, capacity, head_dim_};
  return std::make_unique<KvCache>(batch, capacity, ops_.zeros(shape, dtype_),
                                   ops_.zeros(shape, dtype_));
}

Tensor LocalAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& cache = static_cast<KvCache&>(state);
  const int64_t start = cache.length(), steps = x.size(1), end = start + steps;
  Heads h = project_heads(x, start);
  Tensor k_slot = cache.k.slice(2, start, end), v_slot = cache.v.slice(2, start, end);
  copy_into(k_slot, h.k);
  copy_into(v_slot, h.v);
  cache.advance(steps);
  // Only the keys some query of this step can see: [max(0, start - window + 1), end).
  const int64_t first = std::max<int64_t>(0, start - window_ + 1);
  Tensor q = h.q.to(dtype_);
  return project_out(
      windowed_attention(q, cache.k.slice(2, first, end), cache.v.slice(2, first, end)));
}

}  // namespace local_attention
