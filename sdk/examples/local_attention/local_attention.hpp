// The "local" attention component: multi-head causal self-attention in which position p
// attends only to the last `window` positions (keys j with p - window < j <= p), with a KV
// cache for decoding. A complete, small attention plugin for the SDK walkthrough.
//
//   x [B, T, C] -> qkv = x W_qkv^T + b_qkv [B, T, 3C] -> q, k, v [B, H, T, Dh] (Dh = C / H)
//   -> rotary(q), rotary(k) at absolute positions (when ctx.positional == ROTARY)
//   -> o = softmax(q k^T / sqrt(Dh) + local causal mask) v -> [B, T, C] -> o W_proj^T + b_proj
// Parameters: qkv.weight [3C, C] ~ N(0, init_std), qkv.bias [3C] = 0,
// proj.weight [C, C] ~ N(0, residual_init_std), proj.bias [C] = 0, drawn in that order from
// one generator seeded with ctx.seed.
// The windowed attention runs on the engine's fused op with a window when the host's ops
// table offers it (attention_with_options, ops-table version >= 3: no T x T matrix);
// otherwise on explicit scores q k^T [B, H, Tq, Tk], masked_fill(-inf) outside the window,
// softmax, times v — same values, O(T^2) memory.
// KV cache: k, v [B, H, capacity, Dh]; a step of Tn tokens writes positions [len, len + Tn)
// and its queries (absolute positions len + i) attend over the cached keys in their window.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>

namespace local_attention {

class LocalAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_ROTARY;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_KV;
  static constexpr const char* kComplexity =
      "time O(T min(T, window) C) with the fused window op (O(T^2 C) on the fallback), "
      "decode O(min(len, window) C) per token, cache 2 B len C";

  LocalAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
  std::unique_ptr<patchbay::AttentionState> create_state(int64_t batch, int64_t capacity) override;
  patchbay::Tensor forward_step(patchbay::AttentionState& state,
                                const patchbay::Tensor& x) override;

 private:
  struct Heads {
    patchbay::Tensor q, k, v;  // [B, H, T, Dh]
  };
  Heads project_heads(const patchbay::Tensor& x, int64_t position_offset) const;
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;
  // q [B, H, Tq, Dh] at absolute positions kv_len - Tq .. kv_len - 1; k, v [B, H, kv_len, Dh].
  patchbay::Tensor windowed_attention(const patchbay::Tensor& q, const patchbay::Tensor& k,
                                      const patchbay::Tensor& v) const;

  patchbay::Ops ops_;
  int64_t window_;  // config `window`: how many positions (itself included) a query sees
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0;
  bool rotary_ = false;
  double rope_theta_ = 10000.0;
  pb_dtype dtype_ = PB_DTYPE_F32;
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;
};

inline constexpr pb_config_field kLocalConfigFields[] = {
    patchbay::Field::integer("window", "16",
                             "positions each query attends to, itself included (p - window < j <= p)")
        .range(1, 1 << 20),
};

inline constexpr pb_component_descriptor kLocalAttention =
    patchbay::make_attention_component<LocalAttention>(
        "local", "1.0.0", "sliding-window causal self-attention with a KV cache",
        kLocalConfigFields);

}  // namespace local_attention
