// LinformerAttention as cross-attention (attention.h 1.3, positional in the keys: 1.6): the
// encoder's memory projected along its positions to k key and value slots once per memory,
// every call's queries attending to the slots. See linformer_attention.hpp.
//
//   memory [B, Tk, C] -> K, V [B, H, Tk, Dh] -> padded rows set to 0 -> key slots E[:, :Tk] K,
//                        value slots F[:, :Tk] V [B, H, k, Dh]          (create_cross_memory)
//   x [B, Tq, C]      -> Q [B, H, Tq, Dh] -> softmax(Q slots_k^T / sqrt(Dh)) slots_v
//                        -> output projection [B, Tq, C]                (forward_cross)
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linformer_attention.hpp"

namespace patchbay_linformer {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

class LinformerCrossMemory : public patchbay::CrossMemory {
 public:
  LinformerCrossMemory(int64_t batch, int64_t length, Tensor keys, Tensor values)
      : CrossMemory(batch, length), key_slots(std::move(keys)), value_slots(std::move(values)) {}
  Tensor key_slots;    // E[:, :Tk] K_masked [B, H, k, Dh]
  Tensor value_slots;  // F[:, :Tk] V_masked [B, H, k, Dh]
};

}  // namespace

Tensor LinformerAttention::project_heads(const Tensor& x, int64_t which) const {
  const int64_t lo = which * d_model_, hi = lo + d_model_;
  const Tensor part =
      x.to(dtype_).matmul(qkv_weight_.slice(0, lo, hi), false, true) + qkv_bias_.slice(0, lo, hi);
  return part.reshape({x.size(0), x.size(1), n_heads_, head_dim_})
      .permute({0, 2, 1, 3})
      .contiguous();  // [B, H, T, Dh]
}

std::unique_ptr<patchbay::CrossMemory> LinformerAttention::create_cross_memory(
    const Tensor& memory, const patchbay::KeyPadding& padding, bool /*training*/) {
  const int64_t batch = memory.size(0), length = memory.size(1);
  if (length > max_seq_len_)
    throw PluginError(PB_STATUS_OUT_OF_RANGE,
                      "attention 'linformer' as cross-attention: a memory of " +
                          std::to_string(length) +
                          " positions exceeds the projection length n = max_seq_len = " +
                          std::to_string(max_seq_len_) +
                          " (an encoder-decoder gives its cross-attention max(context_length, "
                          "source_context_length)); shorten the source or raise "
                          "model.source_context_length");
  Tensor keys = project_heads(memory, 1), values = project_heads(memory, 2);  // [B, H, Tk, Dh]
  if (padding.any()) {
    // 1 where the key is padding: its key and value rows become exactly 0 before the
    // projections, so the padded content reaches neither the slots nor the gradient.
    std::vector<int64_t> padded(padding.valid.size());
    for (size_t i = 0; i < padded.size(); ++i) padded[i] = padding.valid[i] == 0 ? 1 : 0;
    const Tensor fill = patchbay::to_device(ops_.from_vector(padded, {batch, 1, length, 1}),
                                            device_type_, device_index_);
    keys = keys.masked_fill(fill, 0.0);
    values = values.masked_fill(fill, 0.0);
  }
  return std::make_unique<LinformerCrossMemory>(batch, length,
                                                project_sequence(keys, proj_e_, length),
                                                project_sequence(values, proj_f_, length));
}

Tensor LinformerAttention::forward_cross(const Tensor& x, const patchbay::CrossMemory& memory,
                                         bool /*training*/) {
  const auto& m = static_cast<const LinformerCrossMemory&>(memory);
  return attend_slots(project_heads(x, 0), m.key_slots, m.value_slots);
}

}  // namespace patchbay_linformer
