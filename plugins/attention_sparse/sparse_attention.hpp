// The "sparse" attention component: Sparse Transformer factorised attention (Child et al.
// 2019) over the engine's block-sparse kernel. Projections and parameters are the dense
// component's (GPT-2 layout: qkv.weight [3C, C], qkv.bias, proj.weight [C, C], proj.bias),
//   x [B, T, C] -> q, k, v [B, H, T, Dh] (rotary optional) -> block-sparse attention with the
//   layout of sparse_patterns.hpp, causal inside tiles -> [B, T, C] -> proj -> dropout
// The attention itself is ops->attention_with_options with a block layout (ops table
// version 4): only active tiles are computed, forward and backward (no T x T anywhere).
// KV cache: k, v [B, H, capacity, Dh]; a step attends over the cache through the layout
// built for the new length, so it reads only the allowed key blocks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <patchbay/attention.hpp>

#include "sparse_patterns.hpp"

namespace patchbay_sparse {

class SparseAttention : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_ROTARY;
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_KV;
  static constexpr const char* kComplexity =
      "time O(T * (T/l + l) * C) for strided/fixed (O(T sqrt(T) C) at l ~ sqrt T), memory "
      "O(T C + (T/bs)^2 H) (the layout); decode reads only the allowed key blocks";

  SparseAttention(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
  std::unique_ptr<patchbay::AttentionState> create_state(int64_t batch, int64_t capacity) override;
  patchbay::Tensor forward_step(patchbay::AttentionState& state,
                                const patchbay::Tensor& x) override;

  const PatternSpec& spec() const { return spec_; }

 private:
  struct Heads {
    patchbay::Tensor q, k, v;  // [B, H, T, Dh]
  };
  Heads project_heads(const patchbay::Tensor& x, int64_t position_offset) const;
  patchbay::Tensor project_out(const patchbay::Tensor& o) const;
  // Layout tensor int32 [H, nb, nb] for `length` keys (cached per block count).
  const patchbay::Tensor& layout_for(int64_t length);
  // Block-sparse attention of q over keys/values [0, Tk) (q holds the last Tq positions).
  patchbay::Tensor sparse_attention(const patchbay::Tensor& q, const patchbay::Tensor& k,
                                    const patchbay::Tensor& v);

  patchbay::Host host_;
  patchbay::Ops ops_;
  PatternSpec spec_;
  double dropout_;
  int64_t d_model_ = 0, n_heads_ = 0, head_dim_ = 0, max_seq_len_ = 0, layer_index_ = 0;
  bool rotary_ = false;
  double rope_theta_ = 10000.0;
  pb_dtype dtype_ = PB_DTYPE_F32;
  std::unique_ptr<patchbay::Generator> dropout_generator_;
  patchbay::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;
  std::map<int64_t, patchbay::Tensor> layouts_;  // by block count
};

inline constexpr pb_config_field kSparseConfigFields[] = {
    patchbay::Field::string("mode", "\"fixed\"",
                            "\"strided\", \"fixed\" or \"local\" (sparse_patterns.hpp)"),
    patchbay::Field::string("combine", "\"union\"",
                            "how A1 and A2 combine: \"union\" (one head sees both), \"heads\" "
                            "(even heads A1, odd heads A2) or \"alternate\" (by layer)"),
    patchbay::Field::integer("block_size", "32", "tile size bs in positions").range(1, 4096),
    patchbay::Field::integer("stride", "0",
                             "stride l in positions (a multiple of block_size); 0: about "
                             "sqrt(max_seq_len * block_size), a power-of-two number of blocks")
        .range(0, 1 << 20),
    patchbay::Field::integer("summary", "0",
                             "summary width c of the fixed pattern (a multiple of block_size); "
                             "0: one block")
        .range(0, 1 << 20),
    patchbay::Field::real("dropout", "0.0", "dropout on the attention output, training only")
        .range(0.0, 0.99),
};

inline constexpr pb_component_descriptor kSparseAttention =
    patchbay::make_attention_component<SparseAttention>(
        "sparse", "1.0.0",
        "Sparse Transformer attention (strided/fixed/local, block-sparse kernel) with a KV cache",
        kSparseConfigFields);

}  // namespace patchbay_sparse
