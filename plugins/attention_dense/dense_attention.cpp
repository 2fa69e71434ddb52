// DenseAttention: parameters, whole-sequence forward and KV-cache decoding, all through the
// host's ops table (patchbay::Tensor); see dense_attention.hpp for the shapes.
#include "dense_attention.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "alibi_slopes.hpp"

namespace patchbay_dense {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

size_t element_size(pb_dtype dtype) {
  switch (dtype) {
    case PB_DTYPE_F32:
    case PB_DTYPE_I32:
      return 4;
    case PB_DTYPE_BF16:
    case PB_DTYPE_F16:
      return 2;
    case PB_DTYPE_I64:
      return 8;
  }
  return 0;
}

// Copies src into the (strided) view dst, element for element, converting to dst's dtype.
// The bytes pass through the host (copy_from_host is the table's only write into a view):
// on a device that is a round trip per decoding step until the table has a device copy.
void copy_into(Tensor& dst, const Tensor& src) {
  Tensor packed = patchbay::to_device(src.to(dst.dtype()).contiguous(), PB_DEVICE_CPU);
  const pb_ops_table* ops = dst.ops();
  patchbay::check_ops_status(
      ops,
      ops->copy_from_host(dst.handle(), packed.data<void>(),
                          static_cast<size_t>(packed.numel()) * element_size(packed.dtype())),
      "kv cache write");
}

// The KV cache of one decoding run: keys and values [B, Hkv, capacity, Dh].
class KvCache : public patchbay::AttentionState {
 public:
  KvCache(int64_t batch, int64_t capacity, Tensor keys, Tensor values)
      : AttentionState(batch, capacity), k(std::move(keys)), v(std::move(values)) {}
  // Beam search: gathers the sequences of both buffers (a copy of the whole cache, as HF's
  // index_select of past_key_values).
  void reorder(std::span<const int64_t> source) override {
    k = patchbay::reorder_batch(k, source);
    v = patchbay::reorder_batch(v, source);
  }
  // Shared prefixes (attention interface 1.4): a new cache whose sequence i copies source[i].
  std::unique_ptr<patchbay::AttentionState> fork(std::span<const int64_t> source) const override {
    return std::make_unique<KvCache>(static_cast<int64_t>(source.size()), capacity(),
                                     patchbay::reorder_batch(k, source),
                                     patchbay::reorder_batch(v, source));
  }
  Tensor k, v;
};

}  // namespace

DenseAttention::DenseAttention(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      ops_(host.api()->ops),
      causal_(config.get_bool("causal")),
      dropout_(config.get_float("dropout")),
      window_(config.get_int("window")),
      configured_kv_heads_(config.get_int("n_kv_heads")),
      bias_(config.get_bool("bias")) {
  rope_scaling_.type = config.get_string("rope_scaling");
  rope_scaling_.factor = config.get_float("rope_factor");
  rope_scaling_.low_freq_factor = config.get_float("rope_low_freq_factor");
  rope_scaling_.high_freq_factor = config.get_float("rope_high_freq_factor");
  rope_scaling_.original_context = config.get_int("rope_original_context");
  if (!(dropout_ >= 0.0 && dropout_ < 1.0))
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "dropout must lie in [0, 1), found " + std::to_string(dropout_));
  if (window_ < 0)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "window must be >= 0 (0 = full attention), found " + std::to_string(window_));
  if (configured_kv_heads_ < 0)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "n_kv_heads must be >= 0 (0 = n_heads), found " +
                                                  std::to_string(configured_kv_heads_));
  if (rope_scaling_.type != "none" && rope_scaling_.type != "llama3")
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "rope_scaling must be \"none\" or \"llama3\", found \"" + rope_scaling_.type + "\"");
}

void DenseAttention::init(const pb_layer_context& ctx) {
  // A bidirectional model (model.causal = false, masked-LM) expects every position to see the
  // whole sequence; a layer left at causal = true there would silently see only the past.
  if (ctx.causal == 0 && causal_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'dense' is configured with causal = true but the model is "
                      "bidirectional (model.causal = false); set [model.attention.dense] "
                      "causal = false");
  if (ctx.causal != 0 && !causal_)
    throw PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "attention 'dense' is configured with causal = false but the model is a causal language "
        "model; set causal = true (the default) or build a bidirectional model");
  if (ctx.device_type != PB_DEVICE_CPU && !patchbay::has_device_tensors(ops_.table()))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'dense' runs on a device through the host's to_device (ops "
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
  n_kv_heads_ = configured_kv_heads_ == 0 ? n_heads_ : configured_kv_heads_;
  if (n_kv_heads_ > n_heads_ || n_heads_ % n_kv_heads_ != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'dense': n_kv_heads " + std::to_string(n_kv_heads_) +
                          " must divide n_heads " + std::to_string(n_heads_) +
                          " (each key/value head serves n_heads / n_kv_heads query heads); "
                          "choose a divisor, or 0 for multi-head attention");
  max_seq_len_ = ctx.max_seq_len;
  rotary_ = ctx.positional == PB_POSITIONAL_ROTARY;
  alibi_ = ctx.positional == PB_POSITIONAL_ALIBI;
  rope_theta_ = ctx.rope_theta > 0 ? ctx.rope_theta : 10000.0;
  if (rotary_ && head_dim_ % 2 != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "rotary positions need an even head dim, found d_model " +
                          std::to_string(d_model_) + " / n_heads " + std::to_string(n_heads_) +
                          " = " + std::to_string(head_dim_));
  if (rope_scaling_.type != "none" && !rotary_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "rope_scaling = \"" + rope_scaling_.type +
                          "\" scales rotary frequencies, but the model's positional encoding is "
                          "not rotary; set [model] positional = \"rotary\" or rope_scaling = "
                          "\"none\"");
  if (rotary_ && rope_scaling_.type != "none")
    rope_frequencies_ = rope_frequencies(head_dim_, rope_theta_, rope_scaling_);
  if (rotary_)
    packed_frequencies_ = rope_scaling_.type != "none"
                              ? rope_frequencies_
                              : rope_frequencies(head_dim_, rope_theta_, RopeScaling{});
  const patchbay::TensorParallel tp = patchbay::tensor_parallel_of(ctx, ops_.table());
  if (n_heads_ % tp.size != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'dense' splits its heads over the tensor-parallel ranks, but "
                      "n_heads " +
                          std::to_string(n_heads_) + " is not divisible by the " +
                          std::to_string(tp.size) +
                          " ranks; choose model.n_heads a multiple of the rank count (-np)");
  split_ = tp.size > 1;
  if (split_ && n_kv_heads_ != n_heads_)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'dense' with grouped-query attention (n_kv_heads " +
                          std::to_string(n_kv_heads_) + " < n_heads " + std::to_string(n_heads_) +
                          ") is not split over tensor-parallel ranks yet; run it on one process "
                          "or set n_kv_heads = 0");
  local_heads_ = n_heads_ / tp.size;
  local_width_ = local_heads_ * head_dim_;
  local_kv_heads_ = n_kv_heads_ / tp.size;
  local_kv_width_ = local_kv_heads_ * head_dim_;
  const pb_ops_table* table = ops_.table();
  if (split_ && !patchbay::has_tensor_parallel_ops(table))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "tensor parallelism needs the host's tp_copy_to_region / "
                      "tp_reduce_from_region (ops table version 9); this host's table is version " +
                          std::to_string(table->version));
  if ((alibi_ || window_ > 0) && (!PB_HAS_FIELD(table, pb_ops_table, attention_with_options) ||
                                  table->attention_with_options == nullptr))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      std::string(alibi_ ? "ALiBi" : "a sliding window") +
                          " needs the host's attention_with_options (ops table version 3); this "
                          "host's table is version " +
                          std::to_string(table->version) + ". Upgrade Patchbay");
  if (alibi_) {
    std::vector<float> slopes;
    const std::vector<double> all = alibi_slopes(n_heads_);  // this rank's heads only
    for (int64_t h = tp.rank * local_heads_; h < (tp.rank + 1) * local_heads_; ++h)
      slopes.push_back(static_cast<float>(all[static_cast<size_t>(h)]));
    alibi_slopes_ = on_device(ops_.from_vector(slopes, {local_heads_}));
  }
  dtype_ = ctx.param_dtype;

  // One generator for the four tensors, in declaration order, so equal seeds give equal layers.
  // Under tensor parallelism every rank draws the full tensors and keeps its shard, so the
  // split model starts equal to the one-process model.
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  const int64_t c = d_model_, qkv_rows = c + 2 * n_kv_heads_ * head_dim_;
  // Drawn on the CPU and moved: a seed gives the same layer on every device.
  qkv_weight_ = add_parameter(
      "qkv.weight",
      on_device(
          tp.shard((ops_.randn({qkv_rows, c}, init_generator) * ctx.init_std).to(dtype_), 0, 3)));
  // bias = false: the biases stay zero constants (not parameters, never trained), so the
  // forward is unchanged and the layer has T5's bias-free q, k, v, o (EncDecAttention).
  qkv_bias_ = on_device(ops_.zeros({local_width_ + 2 * local_kv_width_}, dtype_));
  if (bias_) qkv_bias_ = add_parameter("qkv.bias", qkv_bias_);
  proj_weight_ = add_parameter(
      "proj.weight",
      on_device(
          tp.shard((ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_), 1)));
  proj_bias_ = on_device(ops_.zeros({c}, dtype_));
  if (bias_) proj_bias_ = add_parameter("proj.bias", proj_bias_);
  tp.mark_partitioned("qkv.weight", 0, 3);
  if (bias_) tp.mark_partitioned("qkv.bias", 0, 3);
  tp.mark_partitioned("proj.weight", 1);
  // Dropout draws from its own stream, so turning it on does not change the initialisation.
  dropout_generator_ =
      std::make_unique<patchbay::Generator>(ops_.table(), ctx.seed ^ 0x9e3779b97f4a7c15ull);
}

Tensor DenseAttention::prepare_input(const Tensor& x) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'dense' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()) +
                          (shape.size() == 3 ? " with C " + std::to_string(shape[2]) : ""));
  // Tensor parallelism: f before the column-parallel projection (backward sums dL/dx).
  return split_ ? patchbay::tp_copy_to_region(x.to(dtype_)) : x.to(dtype_);
}

Tensor DenseAttention::project_part(const Tensor& input, int64_t lo, int64_t heads) const {
  const int64_t hi = lo + heads * head_dim_;
  Tensor part =
      input.matmul(qkv_weight_.slice(0, lo, hi), false, true) + qkv_bias_.slice(0, lo, hi);
  return part.reshape({input.size(0), input.size(1), heads, head_dim_}).permute({0, 2, 1, 3});
}

DenseAttention::Heads DenseAttention::project_heads(
    const Tensor& x, int64_t position_offset, bool fused,
    const std::vector<int64_t>* packed_positions) const {
  const Tensor input = prepare_input(x);
  const int64_t b = input.size(0), t = input.size(1);
  // Training: one GEMM per part on its rows of qkv.weight [3 Cl, C] (contiguous row slices),
  // not one [B, T, 3 Cl] GEMM sliced afterwards. The slices' backward builds one zero-filled
  // gradient of what was sliced and adds the other parts into it in place (the engine's slice
  // add-into form); slicing the weight puts that on the [3 Cl, C] weight gradient, not on a
  // [B, T, 3 Cl] activation gradient. Measured on GPT-2 (docs/BENCHMARKS.md, seventh pass) the
  // one-GEMM form was 0-4% faster at 4 x 64 tokens and 1-2% slower at 1 x 1024. Same
  // products, same result.
  // Decoding has no backward, so there one GEMM on the whole weight does: a decoding step's
  // three matrix-vector products become one, paying the per-call cost of a bandwidth-bound
  // product once instead of three times. The engine's matrix-vector kernel computes each
  // output element on its own, so a one-token step gives the same bits either way; a longer
  // prefill goes through oneDNN, whose blocking may round differently for the wider product.
  // The bias is added as the product writes each output (ops table version 10's linear).
  const Tensor qkv =
      fused ? patchbay::linear(input, qkv_weight_, qkv_bias_) : Tensor();  // [B, T, Cl + 2 Ckvl]
  // Rows of qkv: q [0, Cl), k [Cl, Cl + Ckvl), v [Cl + Ckvl, Cl + 2 Ckvl).
  auto head = [&](int64_t lo, int64_t heads) {  // rows [lo, lo + heads Dh) -> [B, heads, T, Dh]
    if (!fused) return project_part(input, lo, heads);
    return qkv.slice(2, lo, lo + heads * head_dim_)
        .reshape({b, t, heads, head_dim_})
        .permute({0, 2, 1, 3});
  };
  Heads heads{head(0, local_heads_), head(local_width_, local_kv_heads_),
              head(local_width_ + local_kv_width_, local_kv_heads_)};
  if (rotary_ && packed_positions != nullptr) {
    heads.q = rotary_at_positions(ops_, heads.q, *packed_positions, packed_frequencies_,
                                  device_type_, device_index_);
    heads.k = rotary_at_positions(ops_, heads.k, *packed_positions, packed_frequencies_,
                                  device_type_, device_index_);
  } else if (rotary_) {
    heads.q = rotate(heads.q, position_offset);
    heads.k = rotate(heads.k, position_offset);
  }
  return heads;
}

Tensor DenseAttention::rotate(const Tensor& x, int64_t position_offset) const {
  if (rope_frequencies_.empty()) return patchbay::rotary_embedding(x, position_offset, rope_theta_);
  return rotary_with_frequencies(ops_, x, position_offset, rope_frequencies_, device_type_,
                                 device_index_);
}

Tensor DenseAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, local_width_});   // [B, T, Cl]
  if (!split_) return patchbay::linear(merged, proj_weight_, proj_bias_);  // [B, T, C]
  // g: the sum of the ranks' partial outputs, then the bias once.
  return patchbay::tp_reduce_from_region(merged.matmul(proj_weight_, false, true)) + proj_bias_;
}

Tensor DenseAttention::forward(const Tensor& x, bool training) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  Heads h = project_heads(x, 0, /*fused=*/false);
  Tensor y = project_out(attend(h.q, h.k, h.v));
  if (training && dropout_ > 0.0) y = y.dropout(dropout_, *dropout_generator_, true);
  return y;
}

std::unique_ptr<patchbay::AttentionState> DenseAttention::create_state(int64_t batch,
                                                                       int64_t capacity) {
  if (!causal_)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "incremental decoding needs a causal layer; this one is configured "
                      "with causal = false");
  if (max_seq_len_ > 0 && capacity > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "capacity " + std::to_string(capacity) +
                                                  " exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  const std::vector<int64_t> shape = {batch, local_kv_heads_, capacity, head_dim_};
  return std::make_unique<KvCache>(batch, capacity, on_device(ops_.zeros(shape, dtype_)),
                                   on_device(ops_.zeros(shape, dtype_)));
}

Tensor DenseAttention::on_device(const Tensor& t) const {
  return patchbay::to_device(t, device_type_, device_index_);
}

Tensor DenseAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& cache = static_cast<KvCache&>(state);
  const int64_t start = cache.length(), steps = x.size(1), end = start + steps;
  Heads h = project_heads(x, start, /*fused=*/true);
  Tensor k_slot = cache.k.slice(2, start, end), v_slot = cache.v.slice(2, start, end);
  copy_into(k_slot, h.k);
  copy_into(v_slot, h.v);
  cache.advance(steps);
  // Bottom-right alignment: query i (absolute position start + i) sees keys 0..start + i.
  // The slices are views of the cache buffers (no copy); the engine reads them in place.
  Tensor o = attend(h.q.to(dtype_), cache.k.slice(2, 0, end), cache.v.slice(2, 0, end));
  return project_out(o);
}

Tensor DenseAttention::forward_packed(const Tensor& x, const Tensor& segment_ids,
                                      const patchbay::PackedSegments& segments, bool training) {
  if (x.size(1) > max_seq_len_ && max_seq_len_ > 0)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  const pb_ops_table* table = ops_.table();
  if (table->version < 13)  // older engines refuse the options field they do not know
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "packed sequences need the host's attention segment_ids (ops table "
                      "version 13); this host's table is version " +
                          std::to_string(table->version));
  Heads h = project_heads(x, 0, /*fused=*/false, &segments.positions);
  Tensor y = project_out(attend(h.q, h.k, h.v, &segment_ids));
  if (training && dropout_ > 0.0) y = y.dropout(dropout_, *dropout_generator_, true);
  return y;
}

Tensor DenseAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor* segment_ids) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  if (!alibi_ && window_ == 0 && segment_ids == nullptr)
    return ops_.attention(q, k, v, causal_, scale);
  pb_attention_options options{};
  options.struct_size = sizeof(options);
  options.causal = causal_ ? 1 : 0;
  options.scale = scale;
  options.window = window_;
  options.alibi_slopes = alibi_ ? alibi_slopes_.handle() : nullptr;
  options.segment_ids = segment_ids != nullptr ? segment_ids->handle() : nullptr;
  return patchbay::attention_with_options(q, k, v, options);
}

}  // namespace patchbay_dense
