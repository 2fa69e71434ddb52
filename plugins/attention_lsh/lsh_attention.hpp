// The "lsh" attention component: Reformer LSH self-attention (Kitaev et al. 2020) composed of
// engine ops, with the hashing plan computed on the host (lsh_buckets.hpp).
//
//   x [B, T, C] -> qk, v = x W^T + b ([B, T, 2C], shared query-key) -> [B, H, T, Dh]
//   per (b, h): n_hashes rounds of buckets (every round in one pass, hash_rounds), slots sorted
//   by (round, bucket, position), chunked per bucket (plan_slots)
//   fused (default, ops table 14): ops->sorted_chunk_attention(qk, unit(qk), v, plan): the
//     gathers, masks and biases inside the kernel, the rounds combined by log-sum-exp there
//   composed (`fused = false`, or an older host): gathered rows qk_s, v_s [B, H, S, Dh],
//     scores [B, H, S/c, c, 2c] = qk_s . unit(keys of previous + own chunk) + bias,
//     o_s = softmax(scores) v, lse_s = logsumexp(scores); back to positions by a gather,
//     o = sum_r softmax_r(lse_r) o_r  (rounds combined by their log-sum-exp weights)
//   (temperature: queries unscaled, keys unit-normalised, no 1/sqrt(Dh); trax's convention)
//   -> [B, T, C] -> proj -> dropout
// Parameters: qk.weight [2C, C] (rows: shared qk, then v), qk.bias [2C], proj.weight [C, C],
// proj.bias [C]. The random rotations are fixed per layer (seeded from ctx.seed), not trained
// and not redrawn per call, so decoding hashes exactly as the forward did.
// Decoding: a cache of qk, v and each round's bucket members; a new token is hashed, appended
// to its bucket and attends to the members of its own and previous per-bucket chunk with
// position <= its own: exactly the forward's window (see lsh_buckets.hpp on why chunks are per
// bucket), O(n_hashes * c * Dh) per token and head.
#pragma once

#include <cstdint>
#include <memory>
#include <patchbay/attention.hpp>
#include <vector>

#include "lsh_buckets.hpp"

namespace patchbay_lsh {

class LshAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_KV;
  static constexpr const char* kComplexity =
      "time O(n_hashes T (c + n_buckets/2) C) plus an O(T) bucket sort, memory O(n_hashes T c H "
      "+ T C); decode O(n_hashes c C) per token";

  LshAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
  std::unique_ptr<patchbay::AttentionState> create_state(int64_t batch, int64_t capacity) override;
  patchbay::Tensor forward_step(patchbay::AttentionState& state,
                                const patchbay::Tensor& x) override;

  const LshSpec& spec() const { return spec_; }

 private:
  // qk, v [B, H, T, Dh] of x [B, T, C].
  void project(const patchbay::Tensor& x, patchbay::Tensor& qk, patchbay::Tensor& v) const;
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;  // [B, H, T, Dh] -> [B, T, C]
  patchbay::Tensor lsh_attention(const patchbay::Tensor& qk, const patchbay::Tensor& v) const;
  // The two ways of computing it from the slot plans of the B*H rows.
  patchbay::Tensor fused_attention(const patchbay::Tensor& qk, const patchbay::Tensor& v,
                                   const std::vector<SlotPlan>& plans) const;
  patchbay::Tensor composed_attention(const patchbay::Tensor& qk, const patchbay::Tensor& v,
                                      const std::vector<SlotPlan>& plans) const;

  patchbay::Host host_;
  patchbay::Ops ops_;
  LshSpec spec_;
  double dropout_;
  bool fused_ = true;
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0;
  pb_dtype dtype_ = PB_DTYPE_F32;
  std::vector<std::vector<float>> rotations_;  // [n_hashes][Dh * n_buckets/2]
  std::unique_ptr<patchbay::Generator> dropout_generator_;
  patchbay::Tensor qk_weight_, qk_bias_, proj_weight_, proj_bias_;
};

inline constexpr pb_config_field kLshConfigFields[] = {
    patchbay::Field::integer("n_buckets", "8", "hash buckets per round (1, or even)")
        .range(1, 1 << 16),
    patchbay::Field::integer("n_hashes", "2", "hashing rounds").range(1, 64),
    patchbay::Field::integer("chunk_len", "32", "positions per chunk (per bucket)")
        .range(1, 1 << 20),
    patchbay::Field::boolean("dedup", "true",
                             "subtract log(count) for pairs found in several rounds"),
    patchbay::Field::real("dropout", "0.0", "dropout on the attention output, training only")
        .range(0.0, 0.99),
    patchbay::Field::boolean("fused", "true",
                             "the engine's fused sorted-chunk kernel (ops table 14); false: "
                             "composed engine ops (the reference; same function)"),
};

inline constexpr pb_component_descriptor kLshAttention =
    patchbay::make_attention_component<LshAttention>(
        "lsh", "1.0.0", "Reformer LSH attention (shared QK, angular LSH, chunked) with a cache",
        kLshConfigFields);

}  // namespace patchbay_lsh
