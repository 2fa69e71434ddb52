// PerformerAttention as cross-attention (attention.h 1.3): bidirectional FAVOR+ whose queries
// come from the decoder's x and whose keys and values come from the encoder's memory,
// summarised once per memory. See performer_attention.hpp.
//
//   memory [B, Tk, C] -> phi(k) [B, H, Tk, m], v [B, H, Tk, Dh] -> per sequence, over its
//                        attended keys: S = phi(k)^T v [B, H, m, Dh], z = sum_j phi(k_j)
//   x [B, Tq, C]      -> phi(q) [B, H, Tq, m] (the memory's omega) -> o = phi(q) S /
//                        (phi(q) . z + floor) -> output projection
// A sequence whose keys are all padding has S = 0, z = 0: o = 0.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "performer_attention.hpp"

namespace patchbay_performer {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

class PerformerCrossMemory : public patchbay::CrossMemory {
 public:
  PerformerCrossMemory(int64_t batch, int64_t length, Tensor features, Tensor s, Tensor z)
      : CrossMemory(batch, length),
        omega(std::move(features)),
        kv_sum(std::move(s)),
        key_sum(std::move(z)) {}
  Tensor omega;    // [m, Dh], the draw the sums were computed with (a copy: a redraw in a
                   // later training forward writes omega_ in place)
  Tensor kv_sum;   // S [B, H, m, Dh], fp32
  Tensor key_sum;  // z [B, H, 1, m], fp32
};

}  // namespace

Tensor PerformerAttention::project_block(const Tensor& x, int64_t which) const {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'performer' expects x [B, T, " + std::to_string(d_model_) +
                          "], found a tensor of rank " + std::to_string(shape.size()));
  const int64_t lo = which * d_model_, hi = lo + d_model_;
  const Tensor part =
      x.to(dtype_).matmul(qkv_weight_.slice(0, lo, hi), false, true) + qkv_bias_.slice(0, lo, hi);
  return part.reshape({shape[0], shape[1], n_heads_, head_dim_})
      .permute({0, 2, 1, 3})
      .to(PB_DTYPE_F32)
      .contiguous();
}

std::unique_ptr<patchbay::CrossMemory> PerformerAttention::create_cross_memory(
    const Tensor& memory, const patchbay::KeyPadding& padding, bool training) {
  if (training) count_training_forward();      // one training forward per memory: the redraw
  const Tensor omega = omega_.detach() * 1.0;  // a copy (fresh output), not a view of omega_
  const Tensor fk = key_features(project_block(memory, 1), omega);  // [B, H, Tk, m]
  const Tensor v = project_block(memory, 2);
  const int64_t batch = memory.size(0), length = memory.size(1);
  if (!padding.any())
    return std::make_unique<PerformerCrossMemory>(batch, length, omega, fk.matmul(v, true, false),
                                                  fk.sum({2}, true));
  // Each sequence's sums over its attended keys only: padded rows never enter them.
  std::vector<Tensor> kv_sums, key_sums;
  for (int64_t b = 0; b < batch; ++b) {
    const auto runs = padding.attended_runs(b);
    if (runs.empty()) {
      kv_sums.push_back(filled({1, n_heads_, features_, head_dim_}, 0.0));
      key_sums.push_back(filled({1, n_heads_, 1, features_}, 0.0));
      continue;
    }
    const Tensor fk_b = patchbay::gather_attended_rows(fk, b, runs),
                 v_b = patchbay::gather_attended_rows(v, b, runs);
    kv_sums.push_back(fk_b.matmul(v_b, true, false));
    key_sums.push_back(fk_b.sum({2}, true));
  }
  return std::make_unique<PerformerCrossMemory>(batch, length, omega, ops_.concat(kv_sums, 0),
                                                ops_.concat(key_sums, 0));
}

Tensor PerformerAttention::forward_cross(const Tensor& x, const patchbay::CrossMemory& memory,
                                         bool /*training*/) {
  const auto& m = static_cast<const PerformerCrossMemory&>(memory);
  const Tensor fq = query_features(project_block(x, 0), m.omega);  // [B, H, Tq, m]
  const Tensor num = fq.matmul(m.kv_sum);                          // [B, H, Tq, Dh]
  const Tensor den = (fq * m.key_sum).sum({3}, true) + kDenominatorFloor;
  return project_out(num / den);
}

}  // namespace patchbay_performer
