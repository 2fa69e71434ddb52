// SparseAttention: parameters, whole-sequence forward and KV-cache decoding over the engine's
// block-sparse attention (ops->attention_with_options with a block layout); see
// sparse_attention.hpp for the shapes and sparse_patterns.hpp for the index sets.
#include "sparse_attention.hpp"

#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace patchbay_sparse {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

size_t element_size(pb_dtype dtype) { return dtype == PB_DTYPE_F32 ? 4 : 2; }

// Copies src into the (strided) view dst, converting to dst's dtype (CPU only).
void copy_into(Tensor& dst, const Tensor& src) {
  Tensor packed = src.to(dst.dtype()).contiguous();
  const pb_ops_table* ops = dst.ops();
  patchbay::check_ops_status(
      ops,
      ops->copy_from_host(dst.handle(), packed.data<void>(),
                          static_cast<size_t>(packed.numel()) * element_size(packed.dtype())),
      "kv cache write");
}

class KvCache : public patchbay::AttentionState {
 public:
  KvCache(int64_t batch, int64_t capacity, Tensor keys, Tensor values)
      : AttentionState(batch, capacity), k(std::move(keys)), v(std::move(values)) {}
  // Beam search (attention interface 1.1): sequence i takes what sequence source[i] held.
  void reorder(std::span<const int64_t> source) override {
    k = patchbay::reorder_batch(k, source);
    v = patchbay::reorder_batch(v, source);
  }
  // Shared prefixes (attention interface 1.4): a new cache whose sequence i copies source[i].
  // The block pattern is a function of positions alone, so a copy decodes as its source would.
  std::unique_ptr<patchbay::AttentionState> fork(std::span<const int64_t> source) const override {
    return std::make_unique<KvCache>(static_cast<int64_t>(source.size()), capacity(),
                                     patchbay::reorder_batch(k, source),
                                     patchbay::reorder_batch(v, source));
  }
  Tensor k, v;  // [B, H, capacity, Dh]
};

}  // namespace

SparseAttention::SparseAttention(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host), ops_(host.api()->ops), dropout_(config.get_float("dropout")) {
  spec_.pattern = parse_pattern(config.get_string("mode"));
  spec_.combine = parse_combine(config.get_string("combine"));
  spec_.block_size = config.get_int("block_size");
  spec_.stride = config.get_int("stride");
  spec_.summary = config.get_int("summary");
  if (spec_.stride > 0 && spec_.summary == 0) spec_.summary = spec_.block_size;
  if (spec_.stride > 0)
    if (std::string err = pattern_spec_error(spec_); !err.empty())
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "attention 'sparse': " + err);
  if (!(dropout_ >= 0.0 && dropout_ < 1.0))
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "dropout must lie in [0, 1), found " + std::to_string(dropout_));
  const pb_ops_table* ops = host.api()->ops;
  if (!PB_HAS_FIELD(ops, pb_ops_table, attention_with_options) ||
      ops->attention_with_options == nullptr)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'sparse' needs ops table version 4 (attention_with_options with "
                      "a block layout); this host's table is version " +
                          std::to_string(ops->version) + ": upgrade Patchbay");
}

void SparseAttention::init(const pb_layer_context& ctx) {
  if (ctx.device_type != PB_DEVICE_CPU)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "attention 'sparse' runs its block-sparse kernel on the CPU only");
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 &&
      ctx.param_dtype != PB_DTYPE_F16)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "param_dtype must be a float dtype");
  d_model_ = ctx.d_model;
  n_heads_ = ctx.n_heads;
  head_dim_ = d_model_ / n_heads_;
  max_seq_len_ = ctx.max_seq_len;
  layer_index_ = ctx.layer_index;
  rotary_ = ctx.positional == PB_POSITIONAL_ROTARY;
  rope_theta_ = ctx.rope_theta > 0 ? ctx.rope_theta : 10000.0;
  if (rotary_ && head_dim_ % 2 != 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "rotary positions need an even head dim, found " + std::to_string(head_dim_));
  dtype_ = ctx.param_dtype;
  // auto stride: l ~ sqrt(T bs) (a power-of-two number of blocks), which minimises the keys per
  // row l + (T / l) bs of the block-granular sets, giving O(T^1.5) pairs in all.
  if (spec_.stride == 0) {
    const double length = static_cast<double>(max_seq_len_ > 0 ? max_seq_len_ : 1024);
    const double target = std::sqrt(length * static_cast<double>(spec_.block_size));
    int64_t blocks = 1;
    while (static_cast<double>(blocks * 2 * spec_.block_size) <= target * std::sqrt(2.0))
      blocks *= 2;
    spec_.stride = blocks * spec_.block_size;
  }
  if (spec_.summary == 0) spec_.summary = spec_.block_size;
  if (std::string err = pattern_spec_error(spec_); !err.empty())
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "attention 'sparse': " + err);
  patchbay::Generator init_generator(ops_.table(), ctx.seed);
  const int64_t c = d_model_;
  qkv_weight_ = add_parameter("qkv.weight",
                              (ops_.randn({3 * c, c}, init_generator) * ctx.init_std).to(dtype_));
  qkv_bias_ = add_parameter("qkv.bias", ops_.zeros({3 * c}, dtype_));
  proj_weight_ = add_parameter(
      "proj.weight", (ops_.randn({c, c}, init_generator) * ctx.residual_init_std).to(dtype_));
  proj_bias_ = add_parameter("proj.bias", ops_.zeros({c}, dtype_));
  dropout_generator_ =
      std::make_unique<patchbay::Generator>(ops_.table(), ctx.seed ^ 0x9e3779b97f4a7c15ull);
}

SparseAttention::Heads SparseAttention::project_heads(const Tensor& x,
                                                      int64_t position_offset) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'sparse' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t b = shape[0], t = shape[1];
  Tensor qkv = x.to(dtype_).matmul(qkv_weight_, false, true) + qkv_bias_;  // [B, T, 3C]
  auto head = [&](int64_t which) {
    Tensor part =
        qkv.slice(2, which * d_model_, (which + 1) * d_model_).reshape({b, t, n_heads_, head_dim_});
    return part.permute({0, 2, 1, 3});
  };
  Heads heads{head(0), head(1), head(2)};
  if (rotary_) {
    heads.q = patchbay::rotary_embedding(heads.q, position_offset, rope_theta_);
    heads.k = patchbay::rotary_embedding(heads.k, position_offset, rope_theta_);
  }
  return heads;
}

Tensor SparseAttention::project_out(const Tensor& o) const {
  const int64_t b = o.size(0), t = o.size(2);
  Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, d_model_});
  return merged.matmul(proj_weight_, false, true) + proj_bias_;
}

const Tensor& SparseAttention::layout_for(int64_t length) {
  const int64_t nb = (length + spec_.block_size - 1) / spec_.block_size;
  auto it = layouts_.find(nb);
  if (it != layouts_.end()) return it->second;
  std::vector<int32_t> layout = build_layout(spec_, layer_index_, n_heads_, nb * spec_.block_size);
  const int64_t shape[3] = {n_heads_, nb, nb};
  pb_tensor* handle = nullptr;
  const pb_ops_table* ops = ops_.table();
  patchbay::check_ops_status(ops, ops->from_data(layout.data(), shape, 3, PB_DTYPE_I32, &handle),
                             "sparse layout");
  return layouts_.emplace(nb, Tensor(ops, handle)).first->second;
}

Tensor SparseAttention::sparse_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const pb_ops_table* ops = ops_.table();
  pb_attention_options options{};
  options.struct_size = sizeof(options);
  options.causal = 1;
  options.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  options.block_layout = layout_for(k.size(2)).handle();
  options.block_size = spec_.block_size;
  pb_tensor* out = nullptr;
  patchbay::check_ops_status(
      ops, ops->attention_with_options(q.handle(), k.handle(), v.handle(), &options, &out),
      "block-sparse attention");
  return Tensor(ops, out);
}

Tensor SparseAttention::forward(const Tensor& x, bool training) {
  if (x.dim() == 3 && max_seq_len_ > 0 && x.size(1) > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "sequence of " + std::to_string(x.size(1)) +
                                                  " positions exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  Heads h = project_heads(x, 0);
  Tensor y = project_out(sparse_attention(h.q, h.k, h.v));
  if (training && dropout_ > 0.0) y = y.dropout(dropout_, *dropout_generator_, true);
  return y;
}

std::unique_ptr<patchbay::AttentionState> SparseAttention::create_state(int64_t batch,
                                                                        int64_t capacity) {
  if (max_seq_len_ > 0 && capacity > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE, "capacity " + std::to_string(capacity) +
                                                  " exceeds max_seq_len " +
                                                  std::to_string(max_seq_len_));
  const std::vector<int64_t> shape = {batch, n_heads_, capacity, head_dim_};
  return std::make_unique<KvCache>(batch, capacity, ops_.zeros(shape, dtype_),
                                   ops_.zeros(shape, dtype_));
}

Tensor SparseAttention::forward_step(patchbay::AttentionState& state, const Tensor& x) {
  auto& cache = static_cast<KvCache&>(state);
  const int64_t start = cache.length(), steps = x.size(1), end = start + steps;
  Heads h = project_heads(x, start);
  Tensor k_slot = cache.k.slice(2, start, end), v_slot = cache.v.slice(2, start, end);
  copy_into(k_slot, h.k);
  copy_into(v_slot, h.v);
  cache.advance(steps);
  // The queries are the last `steps` of `end` positions: the kernel aligns them bottom-right
  // and visits only the layout's active key blocks of their rows.
  return project_out(
      sparse_attention(h.q.to(dtype_), cache.k.slice(2, 0, end), cache.v.slice(2, 0, end)));
}

}  // namespace patchbay_sparse
