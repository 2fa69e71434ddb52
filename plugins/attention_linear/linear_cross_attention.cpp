// LinearAttention as cross-attention (attention.h 1.3): non-causal linear attention whose
// queries come from the decoder's x and whose keys and values come from the encoder's memory,
// summarised once per memory. See linear_attention.hpp.
//
//   memory [B, Tk, C] -> fk = phi(k), v [B, H, Tk, Dh] -> per sequence, over attended keys:
//                        S = fk^T v [B, H, Dh, Dh], z = sum_j fk_j [B, H, 1, Dh]
//   x [B, Tq, C]      -> fq = phi(q) [B, H, Tq, Dh] -> o = fq S / (fq . z + eps) -> proj
// A sequence whose keys are all padding has S = 0, z = 0: o = 0.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linear_attention.hpp"

namespace patchbay_linear {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

Tensor elu_plus_one(const Tensor& x) { return x.relu() + (-((-x).relu())).exp(); }

class LinearCrossMemory : public patchbay::CrossMemory {
 public:
  LinearCrossMemory(int64_t batch, int64_t length, Tensor s, Tensor z)
      : CrossMemory(batch, length), kv_sum(std::move(s)), key_sum(std::move(z)) {}
  Tensor kv_sum;   // S [B, H, Dh, Dh], fp32
  Tensor key_sum;  // z [B, H, 1, Dh], fp32
};

}  // namespace

Tensor LinearAttention::project_block(const Tensor& x, int64_t which) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'linear' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t lo = which * d_model_, hi = lo + d_model_;
  const Tensor part =
      x.to(dtype_).matmul(qkv_weight_.slice(0, lo, hi), false, true) + qkv_bias_.slice(0, lo, hi);
  return part.reshape({shape[0], shape[1], n_heads_, head_dim_})
      .permute({0, 2, 1, 3})
      .to(PB_DTYPE_F32)
      .contiguous();
}

std::unique_ptr<patchbay::CrossMemory> LinearAttention::create_cross_memory(
    const Tensor& memory, const patchbay::KeyPadding& padding, bool /*training*/) {
  const Tensor fk = elu_plus_one(project_block(memory, 1));  // [B, H, Tk, Dh]
  const Tensor v = project_block(memory, 2);
  const int64_t batch = memory.size(0), length = memory.size(1);
  if (!padding.any())
    return std::make_unique<LinearCrossMemory>(batch, length, fk.matmul(v, true, false),
                                               fk.sum({2}, true));
  // Each sequence's sums over its attended keys only: padded rows never enter them.
  std::vector<Tensor> kv_sums, key_sums;
  for (int64_t b = 0; b < batch; ++b) {
    const auto runs = padding.attended_runs(b);
    if (runs.empty()) {
      kv_sums.push_back(on_device(ops_.zeros({1, n_heads_, head_dim_, head_dim_}, PB_DTYPE_F32)));
      key_sums.push_back(on_device(ops_.zeros({1, n_heads_, 1, head_dim_}, PB_DTYPE_F32)));
      continue;
    }
    const Tensor fk_b = patchbay::gather_attended_rows(fk, b, runs),
                 v_b = patchbay::gather_attended_rows(v, b, runs);
    kv_sums.push_back(fk_b.matmul(v_b, true, false));
    key_sums.push_back(fk_b.sum({2}, true));
  }
  return std::make_unique<LinearCrossMemory>(batch, length, ops_.concat(kv_sums, 0),
                                             ops_.concat(key_sums, 0));
}

Tensor LinearAttention::forward_cross(const Tensor& x, const patchbay::CrossMemory& memory,
                                      bool /*training*/) {
  const auto& m = static_cast<const LinearCrossMemory&>(memory);
  const Tensor fq = elu_plus_one(project_block(x, 0));  // [B, H, Tq, Dh]
  const Tensor num = fq.matmul(m.kv_sum);               // [B, H, Tq, Dh]
  const Tensor den = (fq * m.key_sum).sum({3}, true) + eps_;
  return project_out(num / den);
}

}  // namespace patchbay_linear
