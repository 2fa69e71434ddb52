// The "performer" attention component: multi-head FAVOR+ attention (Choromanski et al. 2021)
// with positive orthogonal random features, causal or bidirectional, recurrent decoding.
//
//   x [B, T, C] -> q, k, v [B, H, T, Dh] (GPT-2 layout, as "dense"), fp32 inside
//   -> xs = x * Dh^(-1/4) for q and k; u = xs omega^T [B, H, T, m] (omega [m, Dh], one matrix
//      per layer shared by the heads)
//   -> phi(k)_f = exp(u_f - |ks|^2 / 2 - c),  c = max_f |omega_f|^2 / 2   (constant stabiliser)
//      as one GEMM: [ks, |ks|^2/2 + c] [omega, -1]^T, then exp
//      phi(q)_f = exp(u_f - max_f' u_f') / sum_f' exp(u_f' - max u)     (per-row stabiliser)
//      as the engine's fused softmax over the features
//   -> causal: num_l = sum_{j<=l} (phi(q_l).phi(k_j)) v_j and den_l = phi(q_l) . sum_{j<=l}
//      phi(k_j) in one ops->causal_linear_attention call on [v, 1]; bidirectional: the sums
//      over all j
//   -> o = num / (den + 1e-30) -> [B, T, C] -> output projection
// phi(q_l).phi(k_j) = exp(q_l.k_j / sqrt(Dh)) estimated up to factors that depend on l only
// (exp(|qs|^2/2 - max u), the softmax's row sum, 1/m, e^-c), which cancel in num/den. Both
// stabilisers are causal: the key's is a constant of the drawn features (u_f - |ks|^2/2 <=
// |omega_f|^2/2, so phi(k) <= 1, never overflowing), the query's uses only its own row.
// Features: drawn at init from (ctx.seed, draw 0); in training, redrawn every
// `redraw_interval` training forwards (draw index = training forwards / interval), fixed in
// evaluation and decoding. They are the parameter "features.omega" [m, Dh], registered
// WITHOUT requires_grad (the optimizer skips it) so that checkpoints save and restore them.
// Cross-attention (attention.h 1.3, performer_cross_attention.cpp): bidirectional FAVOR+ with
// queries from x and keys / values from the encoder's memory. The memory object holds each
// sequence's sums S = sum_j phi(k_j) v_j^T [B, H, m, Dh] and z = sum_j phi(k_j) [B, H, 1, m]
// over its attended keys only, and the features omega they were computed with (the queries
// of every call use the same draw); a training memory counts as one training forward for the
// redraw schedule.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>
#include <vector>

namespace patchbay_performer {

// Guards num / den against 0 / 0 only: den > 0 unless every key feature underflowed (fp32
// exp below -87, i.e. head dims far above 128) or, in cross-attention, every key is padding.
inline constexpr double kDenominatorFloor = 1e-30;

class PerformerAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities =
      PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_NONCAUSAL | PB_ATTENTION_CAP_CROSS;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_RECURRENT;
  static constexpr const char* kComplexity =
      "time O(T H m Dh), memory O(T H m) (m random features, fused prefix sum); decode "
      "O(H m Dh) per token, state B H m (Dh + 1) floats whatever the length; cross-attention "
      "O((Tq + Tk) H m Dh), memory B H m (Dh + 1) floats";

  PerformerAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

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
    patchbay::Tensor fq, fk, v;  // [B, H, T, m], [B, H, T, m], [B, H, T, Dh]; fp32
  };
  Features project_features(const patchbay::Tensor& x) const;
  // Block `which` (0 q, 1 k, 2 v) of the qkv projection of x [B, T, C] alone -> [B, H, T, Dh]
  // fp32 (one GEMM on its rows).
  patchbay::Tensor project_block(const patchbay::Tensor& x, int64_t which) const;
  // phi(q), phi(k) [B, H, T, m] of q, k heads [B, H, T, Dh] fp32 with the features omega.
  patchbay::Tensor query_features(const patchbay::Tensor& q, const patchbay::Tensor& omega) const;
  patchbay::Tensor key_features(const patchbay::Tensor& k, const patchbay::Tensor& omega) const;
  // Training: counts one training forward and redraws the features when the schedule says so.
  void count_training_forward();
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;
  void draw_features(uint64_t draw);  // writes omega_ in place (draw index `draw`)
  // t moved to the layer's device (ops table version 11; itself on the CPU).
  patchbay::Tensor on_device(const patchbay::Tensor& t) const;
  // A tensor of `value` created on the layer's device.
  patchbay::Tensor filled(const std::vector<int64_t>& shape, double value,
                          pb_dtype dtype = PB_DTYPE_F32) const;

  patchbay::Ops ops_;
  pb_device_type device_type_ = PB_DEVICE_CPU;
  int32_t device_index_ = 0;
  bool causal_;
  int64_t configured_features_;  // 0: default floor(Dh ln Dh)
  int64_t redraw_interval_;      // 0: never redraw
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0, features_ = 0;
  uint64_t feature_seed_ = 0;
  uint64_t current_draw_ = 0;  // the draw index omega_ holds, as far as this layer knows
  int64_t next_forward_ = 0;   // the count this layer wrote last (a restore changes it)
  pb_dtype dtype_ = PB_DTYPE_F32;
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_, omega_;
  patchbay::Tensor minus_ones_column_;  // [m, 1] of -1 on the layer's device (key_features)
  // [2] f32, the training forwards so far as {count / 2^24, count mod 2^24}: non-trainable
  // state like omega_, so a checkpoint carries the redraw schedule and a resumed run redraws
  // exactly when the uninterrupted one would.
  patchbay::Tensor training_forwards_;
};

inline constexpr pb_config_field kPerformerConfigFields[] = {
    patchbay::Field::boolean("causal", "true",
                             "causal (prefix sums); false for a bidirectional (encoder) model"),
    patchbay::Field::integer("nb_features", "0",
                             "random features m per head; 0 = floor(Dh ln Dh) (lucidrains)")
        .range(0, 65536),
    patchbay::Field::integer("redraw_interval", "1000",
                             "redraw the features every N training forwards; 0 = never")
        .range(0, 1000000000),
};

inline constexpr pb_component_descriptor kPerformerAttention =
    patchbay::make_attention_component<PerformerAttention>(
        "performer", "1.1.0",
        "Performer FAVOR+ attention: positive orthogonal random features, causal-safe "
        "stabiliser, redraw in training, recurrent decoding",
        kPerformerConfigFields);

}  // namespace patchbay_performer
