// Multi-head self-attention composed from differentiable engine ops, with T5's relative
// position bias and padding masks: the self-attention of both stacks of the encoder–decoder
// (encoder_decoder.hpp).
//
//   x [B, T, C] -> q, k, v = x·Wqᵀ, x·Wkᵀ, x·Wvᵀ (no biases, T5)  -> [B, H, T, D]
//   scores [B, H, Tq, Tk] = q·kᵀ · scale + bias[h, i, j] ; blocked -> -1e9 ; softmax over j
//   out = (softmax · v) -> [B, T, C] -> ·Woᵀ
//
// bias[h, i, j] = table[bucket(j - i), h] (t5_relative_position_bucket, sdk
// relative_position.hpp): bidirectional buckets in the encoder, causal ones in the decoder;
// one table [num_buckets, H] per stack, shared by its layers (T5 and its reference code).
// A blocked entry (a padded key, or a later key under the causal mask) gets -1e9 instead of
// its score: exp underflows to exactly 0 in f32 whenever the row has one attended key, so
// a padded key changes no output bit. A row with every key blocked (a fully padded
// sequence) attends uniformly (finite, ignored by the loss).
// The scores are materialised ([B, H, Tq, Tk]): correct first. A fused attention kernel
// taking the bias is left for speed work (docs/encoder_decoder.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/generator.hpp"
#include "engine/tensor.hpp"
#include "patchbay/relative_position.hpp"

namespace patchbay::model {

// One stack's learned relative position bias.
struct RelativePositionBias {
  engine::Tensor table;  // [num_buckets, H], leaf requiring grad; undefined = no bias
  T5RelativePositionOptions buckets;

  // [1, H, Tq, Tk]: queries at positions query_offset.., keys at 0..; differentiable in table.
  engine::Tensor bias(int64_t query_len, int64_t key_len, int64_t query_offset = 0) const;
};

// blocked[b, i, j] = 1 where query i of sequence b may not read key j: key j padded
// (key_padding[b, j] == 0; key_padding undefined = none padded) or, with causal, j > i +
// query_offset. Shape [B, 1, Tq, Tk] f32 (broadcast over heads).
engine::Tensor attention_blocked_mask(const engine::Tensor& key_padding, int64_t batch,
                                      int64_t query_len, int64_t key_len, bool causal,
                                      int64_t query_offset);

class RelativeSelfAttention {
 public:
  // Weights q, k, v ~ N(0, init_std), o ~ N(0, out_std), each [C, C], from `gen`.
  RelativeSelfAttention(int64_t d_model, int64_t n_heads, double init_std, double out_std,
                        engine::Generator& gen, engine::Device device);

  // x [B, T, C] (queries, keys and values all from x); bias [1, H, T, T] or undefined;
  // blocked [B or 1, 1, T, T] (attention_blocked_mask) or undefined. -> [B, T, C].
  engine::Tensor forward(const engine::Tensor& x, const engine::Tensor& bias,
                         const engine::Tensor& blocked) const;

  // Decoding: the keys and values of the positions seen so far, [B, H, L, D] each
  // (undefined before the first step).
  struct Cache {
    engine::Tensor k, v;
    int64_t length() const { return k.defined() ? k.size(2) : 0; }
  };
  // x [B, Tn, C] at positions cache.length() .. +Tn-1: appends their keys and values to the
  // cache and attends over all L + Tn of them. bias [1, H, Tn, L + Tn] (RelativePositionBias::
  // bias(Tn, L + Tn, L)) or undefined; blocked [B or 1, 1, Tn, L + Tn] or undefined. Equal to
  // the rows L.. of forward() on the whole sequence (up to rounding).
  engine::Tensor forward_cached(const engine::Tensor& x, Cache& cache, const engine::Tensor& bias,
                                const engine::Tensor& blocked) const;

  // ("q.weight", Wq), ("k.weight", Wk), ("v.weight", Wv), ("o.weight", Wo).
  std::vector<std::pair<std::string, engine::Tensor>> parameters() const;

 private:
  int64_t heads_;
  engine::Tensor wq_, wk_, wv_, wo_;
};

}  // namespace patchbay::model
