// The "dense" attention component: multi-head self-attention over the engine's fused
// scaled-dot-product attention (ops->attention, which never materialises T x T), with
// optional rotary or ALiBi positions, an optional sliding window, and a KV cache for decoding.
//
//   x [B, T, C] -> qkv = x W_qkv^T + b_qkv [B, T, C + 2 Ckv] -> q [B, H, T, Dh] (Dh = C / H),
//   k, v [B, Hkv, T, Dh] (Ckv = Hkv Dh; Hkv = config n_kv_heads, = H unless grouped-query)
//   -> rotary(q), rotary(k) at positions offset + t (when ctx.positional == ROTARY)
//   -> o = softmax(q k^T / sqrt(Dh) + ALiBi bias + causal/window mask) v [B, H, T, Dh]
//   -> [B, T, C]   (ALiBi when ctx.positional == ALIBI: -m_h (i - j), alibi_slopes.hpp;
//                   window w > 0: query i sees keys i - w < j <= i; both inside the fused op)
//   -> y = o W_proj^T + b_proj -> dropout (training only)
// Parameters (GPT-2 names and layout, [out, in]): qkv.weight [C + 2 Ckv, C] ~ N(0, init_std),
// qkv.bias [C + 2 Ckv] = 0, proj.weight [C, C] ~ N(0, residual_init_std), proj.bias [C] = 0
// (config bias = false: no bias parameters, zeros added as constants),
// drawn in that order from one generator seeded with ctx.seed. The rows of qkv are q (C rows,
// H heads), k then v (Ckv rows each, Hkv heads), head h at rows h * Dh .. (h + 1) * Dh of its
// block. Grouped-query attention (Ainslie et al. 2023): query head h reads key/value head
// h / (H / Hkv), as transformers' repeat_kv and the fused op's rule; Hkv = H is multi-head
// attention with the same layout and draws as before (3C rows).
// Rotary frequencies: theta^(-2i/Dh), or LLaMA 3.1's rescaled ones (rope_scaling = "llama3":
// wavelengths above original_context / low_freq_factor divided by `factor`, below
// original_context / high_freq_factor kept, smoothly interpolated between), applied by
// rotary_with_frequencies (rotary_frequencies.hpp) since the host's rotary op takes theta only.
// KV cache: k, v [B, Hkv, capacity, Dh] in the parameters' dtype, allocated once; a step writes
// positions [len, len + Tn) and attends over the view [:, :, 0 : len + Tn) of the buffer with
// the causal mask aligned bottom-right (query i of the step, at absolute position len + i,
// sees keys j <= len + i; the ALiBi distances and the window use the same positions). The
// engine reads an f32 cache view in place: a step copies nothing but its own Tn rows.
// Tensor parallelism (ctx.tp_size = W > 1, Megatron): rank r holds heads [r H/W, (r+1) H/W)
// (Hl = H/W heads, Cl = Hl Dh channels): qkv.weight [3 Cl, C] = rows r of each of q, k, v
// (column-parallel, marked dim 0 stride 3), qkv.bias [3 Cl], proj.weight [C, Cl] = its
// columns (row-parallel, dim 1), proj.bias [C] replicated. x passes tp_copy_to_region (f)
// first; the partial outputs o_r W_proj,r^T [B, T, C] are summed by tp_reduce_from_region
// (g) and the bias is added once, after the sum. The KV cache holds the rank's heads only.
// Grouped-query attention is not split over ranks yet (refused at init): the checkpoint
// layout marks qkv as three equal blocks.
// Cross-attention (attention.h 1.3, dense_cross_attention.cpp): the same parameters, q rows
// applied to the decoder's x [B, Tq, C], k and v rows to the encoder's memory [B, Tk, C]
// (projected once per memory); no causal mask, positions or window. Without padding one fused
// attention call; with padding each sequence attends over its attended keys only (the memory's
// rows gathered per sequence before the fused op), so padded rows are never read.
// Packed sequences (attention.h 1.4): forward with segment ids [B, T]; the fused op restricts
// each query to its segment's keys (ops table version 13) and rotary uses each token's
// position within its segment (rotary_at_positions); ALiBi distances and the window are
// relative already. Each segment's output equals forward() on it alone, up to rounding.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>
#include <patchbay/tensor_parallel.hpp>
#include <vector>

#include "rotary_frequencies.hpp"

namespace patchbay_dense {

class DenseAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_NONCAUSAL |
                                            PB_ATTENTION_CAP_ROTARY | PB_ATTENTION_CAP_ALIBI |
                                            PB_ATTENTION_CAP_TENSOR_PARALLEL |
                                            PB_ATTENTION_CAP_CROSS | PB_ATTENTION_CAP_PACKED;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_KV;
  static constexpr const char* kComplexity =
      "time O(T^2 C), with window w O(T w C); memory O(T C) (fused attention); decode O(len C) "
      "per token (O(w C) with a window), cache 2 B len Ckv (Ckv = n_kv_heads C / n_heads); "
      "cross-attention O(Tq Tk C), memory 2 B Tk Ckv";

  DenseAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
  std::unique_ptr<patchbay::AttentionState> create_state(int64_t batch, int64_t capacity) override;
  patchbay::Tensor forward_step(patchbay::AttentionState& state,
                                const patchbay::Tensor& x) override;
  std::unique_ptr<patchbay::CrossMemory> create_cross_memory(const patchbay::Tensor& memory,
                                                             const patchbay::KeyPadding& padding,
                                                             bool training) override;
  patchbay::Tensor forward_cross(const patchbay::Tensor& x, const patchbay::CrossMemory& memory,
                                 bool training) override;
  patchbay::Tensor forward_packed(const patchbay::Tensor& x, const patchbay::Tensor& segment_ids,
                                  const patchbay::PackedSegments& segments, bool training) override;

 private:
  struct Heads {
    patchbay::Tensor q, k, v;  // [B, H, T, Dh]
  };
  // Projects x [B, T, C] and splits heads; rotary at positions offset + t when enabled, or at
  // packed_positions[b * T + t] when given (packed sequences: positions per segment).
  // fused: one GEMM on the whole qkv.weight and views of its [B, T, 3 Cl] output (incremental
  // decoding, which has no backward); else one GEMM per part (training; see the .cpp).
  Heads project_heads(const patchbay::Tensor& x, int64_t position_offset, bool fused,
                      const std::vector<int64_t>* packed_positions = nullptr) const;
  // x [B, T, C] checked, in the parameters' dtype, through tp_copy_to_region when split.
  patchbay::Tensor prepare_input(const patchbay::Tensor& x) const;
  // Rows [lo, lo + heads Dh) of the qkv projection of a prepared input [B, T, C]
  // -> [B, heads, T, Dh] (one GEMM on those rows; differentiable).
  patchbay::Tensor project_part(const patchbay::Tensor& input, int64_t lo, int64_t heads) const;
  // Rotary on x [B, heads, T, Dh] at positions offset + t with this layer's frequencies.
  patchbay::Tensor rotate(const patchbay::Tensor& x, int64_t position_offset) const;
  // t moved to the layer's device (t itself on the CPU).
  patchbay::Tensor on_device(const patchbay::Tensor& t) const;
  // o [B, H, T, Dh] -> merged [B, T, C] -> output projection.
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;
  // The fused attention of q [B, H, Tq, Dh] over k, v [B, H, Tk, Dh] (queries at the last Tq
  // positions) with this layer's mask, window and ALiBi slopes.
  // segment_ids (packed sequences): null, or [B, Tk] ids for the fused op (ops table 13).
  patchbay::Tensor attend(const patchbay::Tensor& q, const patchbay::Tensor& k,
                          const patchbay::Tensor& v,
                          const patchbay::Tensor* segment_ids = nullptr) const;

  patchbay::Host host_;
  patchbay::Ops ops_;
  bool causal_;     // config `causal`: mask future positions
  double dropout_;  // config `dropout`: on the output, training only
  int64_t window_;  // config `window`: 0 = full, else sliding window of that many positions
  int64_t configured_kv_heads_;  // config `n_kv_heads`: 0 = n_heads
  bool bias_;                    // config `bias`: qkv.bias and proj.bias are parameters
  RopeScaling rope_scaling_;     // config rope_scaling* keys
  int64_t d_model_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0;
  // This rank's heads and channels (n_heads_ / W, that times head_dim_; all of them when W = 1),
  // and its key/value heads and channels (n_kv_heads_ / W, that times head_dim_).
  int64_t local_heads_ = 0, local_width_ = 0, local_kv_heads_ = 0, local_kv_width_ = 0;
  bool split_ = false;  // tensor parallelism: W > 1
  bool rotary_ = false;
  bool alibi_ = false;
  patchbay::Tensor alibi_slopes_;  // f32 [H] when alibi_ (a constant, not a parameter)
  double rope_theta_ = 10000.0;
  std::vector<double> rope_frequencies_;    // [Dh / 2] when rope_scaling_ is not "none"
  std::vector<double> packed_frequencies_;  // [Dh / 2] for packed rotary: the ones in use
  pb_dtype dtype_ = PB_DTYPE_F32;
  pb_device_type device_type_ =
      PB_DEVICE_CPU;  // pb_layer_context's: parameters and cache live there
  int32_t device_index_ = 0;
  std::unique_ptr<patchbay::Generator> dropout_generator_;  // seeded from ctx.seed
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;
};

inline constexpr pb_config_field kDenseConfigFields[] = {
    patchbay::Field::boolean(
        "causal", "true", "mask future positions; false only for a bidirectional (encoder) model"),
    patchbay::Field::real("dropout", "0.0", "dropout on the attention output, training only")
        .range(0.0, 0.99),
    patchbay::Field::integer("window", "0",
                             "0: full attention; w > 0: sliding-window (local) attention, each "
                             "query sees itself and the w - 1 positions before it (both sides "
                             "when causal = false); time O(T w C) instead of O(T^2 C)")
        .range(0, 1 << 30),
    patchbay::Field::integer("n_kv_heads", "0",
                             "key/value heads (grouped-query attention): 0 = n_heads (multi-head); "
                             "else a divisor of n_heads, query head h reading key/value head "
                             "h / (n_heads / n_kv_heads); the KV cache holds these heads only")
        .range(0, 1 << 20),
    patchbay::Field::boolean("bias", "true",
                             "qkv.bias and proj.bias as parameters; false: no biases (T5's "
                             "attention), the layer's parameters are qkv.weight and proj.weight"),
    patchbay::Field::string("rope_scaling", "\"none\"",
                            "rotary frequency scaling: \"none\" or \"llama3\" (LLaMA 3.1's "
                            "rescaled long wavelengths; the rope_* keys below)")
        .choices("none|llama3"),
    patchbay::Field::real("rope_factor", "8.0", "llama3 scaling: wavelength divisor")
        .range(1.0, 1e6),
    patchbay::Field::real("rope_low_freq_factor", "1.0", "llama3 scaling: low_freq_factor")
        .range(1e-6, 1e6),
    patchbay::Field::real("rope_high_freq_factor", "4.0", "llama3 scaling: high_freq_factor")
        .range(1e-6, 1e6),
    patchbay::Field::integer("rope_original_context", "8192",
                             "llama3 scaling: original_max_position_embeddings")
        .range(1, 1 << 30),
};

inline constexpr pb_component_descriptor kDenseAttention =
    patchbay::make_attention_component<DenseAttention>(
        "dense", "1.0.0", "multi-head causal self-attention (fused, GPT-2 layout) with a KV cache",
        kDenseConfigFields);

}  // namespace patchbay_dense
