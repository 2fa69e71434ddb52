// The "linformer" attention component (Wang et al. 2020, "Linformer: Self-Attention with
// Linear Complexity"): keys and values projected along the sequence axis to k slots,
//
//   head_i = softmax(Q_i (E_i K_i)^T / sqrt(Dh)) (F_i V_i),   E_i, F_i in R^{k x n}
//
// with n = max_seq_len, so time and memory O(T k) per head instead of O(T^2).
// Sharing (config `sharing`, tatp22/linformer-pytorch's names):
//   none     E_i, F_i per head        parameters proj_e, proj_f [H, k, n]
//   headwise E_i = E, F_i = F         parameters proj_e, proj_f [k, n]
//   kv       E_i = F_i = E            parameter  proj_e [k, n]
//   layerwise (one E for every layer) is refused: the host has no parameter sharing across
//            layers, and per-layer copies would not be the layerwise model.
// Inputs shorter than n (T < n): E and F are restricted to their first T columns, i.e. the
// sequence is treated as zero-padded to n (lucidrains/linformer slices the same way); slot c
// then mixes positions 0..T-1 only. T > n is refused (out of range).
// Bidirectional only (no PB_ATTENTION_CAP_CAUSAL): every slot mixes all positions, so a causal
// language model refuses it (lucidrains/linformer #4, tatp22 #16). No decoding state.
// Cross-attention (attention.h 1.3 + 1.6 PB_ATTENTION_CAP_CROSS_POSITIONAL,
// linformer_cross_attention.cpp): queries from the decoder's x, keys and values from the
// encoder's memory [B, Tk, C], Tk <= n (the host's max_seq_len for a cross layer covers the
// source context), projected once per memory:
//   K_m = K masked, V_m = V masked (rows of padded keys set to exactly 0), then
//   key slots E[:, :Tk] K_m, value slots F[:, :Tk] V_m [B, H, k, Dh]; per call
//   o = softmax(Q (E K_m)^T / sqrt(Dh)) (F V_m) -> output projection.
// A padded key thus stands where it is, as a zero row (what positions past T are in the
// self-attention case): it changes no output and gets no gradient, but the attended keys keep
// their positions, so the result is not invariant to key order (hence CROSS_POSITIONAL). The
// Long Range Arena Linformer (mlpen/Nystromformer, attention_linformer.py) masks the same way,
// E (K * mask); lucidrains/linformer's `context` is this cross-attention without a mask. A
// sequence with every key padded gets zero slots: its attention result is 0.
// Parameters: qkv/proj as "dense" (GPT-2 layout), then E (and F) ~ U(-1/sqrt(k), 1/sqrt(k))
// (lucidrains' init), all from one generator seeded with ctx.seed.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>
#include <string>

namespace patchbay_linformer {

class LinformerAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities =
      PB_ATTENTION_CAP_NONCAUSAL | PB_ATTENTION_CAP_CROSS | PB_ATTENTION_CAP_CROSS_POSITIONAL;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_NONE;
  static constexpr const char* kComplexity =
      "time O(T k C), memory O(T k H) (k projected slots); bidirectional only, no decoding "
      "cache; cross-attention: memory O(B H k Dh) per source, O(k C) per query";

  enum class Sharing { kNone, kHeadwise, kKeyValue };

  LinformerAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
  std::unique_ptr<patchbay::CrossMemory> create_cross_memory(const patchbay::Tensor& memory,
                                                             const patchbay::KeyPadding& padding,
                                                             bool training) override;
  patchbay::Tensor forward_cross(const patchbay::Tensor& x, const patchbay::CrossMemory& memory,
                                 bool training) override;

 private:
  // Projects [B, H, T, Dh] along T with P [k, n] or [H, k, n] restricted to T columns.
  patchbay::Tensor project_sequence(const patchbay::Tensor& heads, const patchbay::Tensor& p,
                                    int64_t t) const;
  // Rows [which * C, (which + 1) * C) of the qkv projection (0 q, 1 k, 2 v) applied to
  // x [B, T, C] -> heads [B, H, T, Dh].
  patchbay::Tensor project_heads(const patchbay::Tensor& x, int64_t which) const;
  // softmax(q k_slots^T / sqrt(Dh)) v_slots through the fused kernel, merged and projected:
  // q [B, H, T, Dh], slots [B, H, k, Dh] -> [B, T, C].
  patchbay::Tensor attend_slots(const patchbay::Tensor& q, const patchbay::Tensor& key_slots,
                                const patchbay::Tensor& value_slots) const;

  patchbay::Ops ops_;
  int64_t slots_;
  Sharing sharing_ = Sharing::kHeadwise;
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0;
  pb_dtype dtype_ = PB_DTYPE_F32;
  pb_device_type device_type_ = PB_DEVICE_CPU;
  int32_t device_index_ = 0;
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_, proj_e_, proj_f_;
};

inline constexpr pb_config_field kLinformerConfigFields[] = {
    patchbay::Field::integer("k", "64", "projected length k (slots); k <= max_seq_len")
        .range(1, 1048576),
    patchbay::Field::string("sharing", "\"headwise\"",
                            "E/F sharing: none (per head), headwise, kv (E = F); layerwise is "
                            "refused (no cross-layer sharing in the host)"),
};

inline constexpr pb_component_descriptor kLinformerAttention =
    patchbay::make_attention_component<LinformerAttention>(
        "linformer", "1.0.0",
        "Linformer low-rank attention (E/F sequence projections to k slots); bidirectional "
        "only; cross-attention with padded keys zeroed in place",
        kLinformerConfigFields);

}  // namespace patchbay_linformer
