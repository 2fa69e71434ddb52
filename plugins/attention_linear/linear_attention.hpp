// The "linear" attention component: multi-head linear attention (Katharopoulos, Vyas,
// Pappas, Fleuret 2020, "Transformers are RNNs") with the feature map phi(x) = elu(x) + 1,
// following idiap/fast-transformers (eps = 1e-6 in the denominator, NO 1/sqrt(Dh) scaling).
//
//   x [B, T, C] -> qkv = x W_qkv^T + b_qkv -> q, k, v [B, H, T, Dh] (GPT-2 layout, as "dense")
//   -> fq = phi(q), fk = phi(k) (computed in fp32 whatever the parameter dtype)
//   causal:        num_l = sum_{j <= l} (fq_l . fk_j) v_j     (ops->causal_linear_attention)
//                  den_l = fq_l . sum_{j <= l} fk_j          (cumsum over T)
//   bidirectional: num = fq (fk^T v),  den = fq . sum_j fk_j
//   -> o = num / (den + eps) [B, H, T, Dh] -> [B, T, C] -> y = o W_proj^T + b_proj
// Decoding keeps the RNN state per head, S = sum_j fk_j v_j^T [B, H, Dh, Dh] and
// z = sum_j fk_j [B, H, 1, Dh] in fp32: constant memory and time per token whatever the
// position. A step of Tn tokens adds the state's contribution to the chunk's own causal sums.
// Parameters: as "dense" (qkv.weight [3C, C] ~ N(0, init_std), qkv.bias 0, proj.weight [C, C]
// ~ N(0, residual_init_std), proj.bias 0), drawn in that order from one generator (ctx.seed).
// Cross-attention (attention.h 1.3, linear_cross_attention.cpp): non-causal linear attention
// with queries from x and keys / values from the encoder's memory. The memory object holds
// each sequence's summary S = sum_j fk_j v_j^T [B, H, Dh, Dh] and z = sum_j fk_j [B, H, 1, Dh]
// over its attended keys only (padded rows never enter the sums), computed once; a call is
// then o = fq S / (fq . z + eps), O(Tq C Dh) whatever the memory's length.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>

namespace patchbay_linear {

class LinearAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities =
      PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_NONCAUSAL | PB_ATTENTION_CAP_CROSS;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_RECURRENT;
  static constexpr const char* kComplexity =
      "time O(T C Dh), memory O(T C) (fused prefix sum); decode O(C Dh) per token, state "
      "B H Dh (Dh + 1) floats whatever the length; cross-attention O((Tq + Tk) C Dh), memory "
      "B H Dh (Dh + 1) floats";

  LinearAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

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

 private:
  struct Features {
    patchbay::Tensor fq, fk, v;  // [B, H, T, Dh], fp32
  };
  Features project_features(const patchbay::Tensor& x) const;
  // Block `which` (0 q, 1 k, 2 v) of the qkv projection of x [B, T, C] alone (one GEMM on
  // its rows) -> [B, H, T, Dh] fp32.
  patchbay::Tensor project_block(const patchbay::Tensor& x, int64_t which) const;
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;  // [B, H, T, Dh] -> [B, T, C]
  // t moved to the layer's device (ops table version 11; itself on the CPU).
  patchbay::Tensor on_device(const patchbay::Tensor& t) const;

  patchbay::Ops ops_;
  pb_device_type device_type_ = PB_DEVICE_CPU;
  int32_t device_index_ = 0;
  bool causal_;
  double eps_;
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0;
  pb_dtype dtype_ = PB_DTYPE_F32;
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;
};

inline constexpr pb_config_field kLinearConfigFields[] = {
    patchbay::Field::boolean("causal", "true",
                             "causal (prefix sums); false for a bidirectional (encoder) model"),
    patchbay::Field::real("eps", "1e-6",
                          "added to the normaliser phi(q) . sum phi(k) (fast-transformers' value)")
        .range(0.0, 1.0),
};

inline constexpr pb_component_descriptor kLinearAttention =
    patchbay::make_attention_component<LinearAttention>(
        "linear", "1.0.0",
        "linear attention (elu+1 features, Katharopoulos 2020): fused causal prefix sum, "
        "recurrent decoding state",
        kLinearConfigFields);

}  // namespace patchbay_linear
