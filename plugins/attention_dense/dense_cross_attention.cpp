// DenseAttention as cross-attention (attention.h 1.3): queries from the decoder's x, keys and
// values from the encoder's memory, padded keys never read. See dense_attention.hpp.
//
//   memory [B, Tk, C] -> k, v [B, Hkv, Tk, Dh] (rows C.. of qkv.weight; once per memory)
//   x [B, Tq, C]      -> q [B, H, Tq, Dh]      (rows 0..C of qkv.weight; every call)
//   o = softmax(q k^T / sqrt(Dh)) v over the attended keys of each sequence -> proj -> dropout
// No causal mask, no window, no rotary or ALiBi: the two sequences share no positions.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dense_attention.hpp"

namespace patchbay_dense {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

// Keys and values of one memory, and per sequence the runs [start, end) of attended keys
// (empty when nothing is padded: one fused call serves the whole batch).
class DenseCrossMemory : public patchbay::CrossMemory {
 public:
  DenseCrossMemory(int64_t batch, int64_t length, Tensor keys, Tensor values,
                   std::vector<std::vector<std::pair<int64_t, int64_t>>> runs)
      : CrossMemory(batch, length),
        k(std::move(keys)),
        v(std::move(values)),
        attended_runs(std::move(runs)) {}
  Tensor k, v;                                                          // [B, Hkv, Tk, Dh]
  std::vector<std::vector<std::pair<int64_t, int64_t>>> attended_runs;  // [B] when padded
};

}  // namespace

std::unique_ptr<patchbay::CrossMemory> DenseAttention::create_cross_memory(
    const Tensor& memory, const patchbay::KeyPadding& padding, bool /*training*/) {
  if (window_ > 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "attention 'dense' with window = " + std::to_string(window_) +
                          " cannot serve as cross-attention: a sliding window is defined over "
                          "the positions of one sequence, and the decoder's queries and the "
                          "encoder's keys share none; set window = 0 for the cross-attention "
                          "layer");
  const Tensor input = prepare_input(memory);
  Tensor k = project_part(input, local_width_, local_kv_heads_);
  Tensor v = project_part(input, local_width_ + local_kv_width_, local_kv_heads_);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> runs;
  if (padding.any()) {
    for (int64_t b = 0; b < padding.batch; ++b) runs.push_back(padding.attended_runs(b));
  }
  return std::make_unique<DenseCrossMemory>(memory.size(0), memory.size(1), std::move(k),
                                            std::move(v), std::move(runs));
}

Tensor DenseAttention::forward_cross(const Tensor& x, const patchbay::CrossMemory& memory,
                                     bool training) {
  const auto& m = static_cast<const DenseCrossMemory&>(memory);
  const Tensor q = project_part(prepare_input(x), 0, local_heads_);  // [B, Hl, Tq, Dh]
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  Tensor o;
  if (m.attended_runs.empty()) {
    o = ops_.attention(q, m.k, m.v, /*causal=*/false, scale);
  } else {
    // Each sequence over its attended keys only: padded rows never enter the fused op, so
    // changing them changes nothing, bit for bit, and they receive no gradient.
    std::vector<Tensor> per_sequence;
    per_sequence.reserve(m.attended_runs.size());
    for (int64_t b = 0; b < m.batch(); ++b) {
      const auto& runs = m.attended_runs[static_cast<size_t>(b)];
      const Tensor q_b = q.slice(0, b, b + 1);
      if (runs.empty()) {  // every key padded: attends to nothing, result 0
        per_sequence.push_back(
            on_device(ops_.zeros({1, local_heads_, q.size(2), head_dim_}, q.dtype())));
        continue;
      }
      per_sequence.push_back(ops_.attention(q_b, patchbay::gather_attended_rows(m.k, b, runs),
                                            patchbay::gather_attended_rows(m.v, b, runs), false,
                                            scale));
    }
    o = ops_.concat(per_sequence, 0);
  }
  Tensor y = project_out(o);
  if (training && dropout_ > 0.0) y = y.dropout(dropout_, *dropout_generator_, true);
  return y;
}

}  // namespace patchbay_dense
