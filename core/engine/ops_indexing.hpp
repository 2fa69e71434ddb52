// Indexing ops: embedding gather, cross-entropy, cumulative sum, gather / scatter-add,
// sort / argsort / top-k. Included from engine/ops.hpp; declarations only.
//
// Conventions (as in ops.hpp): PyTorch semantics; float data may be f32, bf16 or f16 and is
// computed in f32 (outputs keep the input's dtype unless said otherwise); index tensors are
// i32 or i64 of any layout; negative dims count from the end. Every out-of-range index is
// an Error(kInvalidArgument) naming the op, the offending value, its coordinates and the
// valid range. The CPU kernels are the raw-pointer ones in kernels/indexing/
// (patchbay/kernels/*.hpp); results are deterministic for any thread count.
#pragma once

#include <cstdint>

#include "engine/tensor.hpp"

namespace patchbay::engine {

// ---- embedding ----
// weights [V, D] float, ids integer of any shape S with every id in [0, V)
// -> [S..., D] in weights' dtype: out[s, :] = weights[ids[s], :].
// Backward: dW[id, :] += dout[s, :] over every s with ids[s] == id; ids get no gradient.
Tensor embedding(const Tensor& weights, const Tensor& ids);

// ---- cross-entropy ----
enum class LossReduction {
  kMean,  // Σ row losses / number of counted rows (NaN when none is counted, as in PyTorch)
  kSum,   // Σ row losses
  kNone   // the row losses themselves, shaped like targets (0 on ignored rows)
};
struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // rows whose target equals this contribute nothing
  double label_smoothing = 0.0;  // ε in [0, 1]: target q = (1-ε)·onehot + ε/V
  LossReduction reduction = LossReduction::kMean;
};
// logits [..., V] float, targets [...] integer (the leading shape of logits), each target
// in [0, V) or ignore_index. Row loss = Σ_j q_j·(logsumexp(z) − z_j), computed stably.
// Returns f32 whatever the logits dtype (a loss in bf16 would keep 3 digits): a scalar for
// kMean / kSum, targets' shape for kNone.
// Backward (logits only): row_grad · (softmax − q), 0 on ignored rows, where row_grad is
// upstream/count (kMean), upstream (kSum) or upstream[row] (kNone).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options = {});
// Number of targets not equal to ignore_index: the denominator of the kMean loss. With the
// kSum loss it gives token-weighted means across batches (validation loss, bits per byte).
int64_t count_targets(const Tensor& targets, int64_t ignore_index = -100);

// ---- cumulative sum ----
// out[..., j, ...] = Σ_{k ≤ j} x[..., k, ...] along dim (Σ_{k ≥ j} when reverse); same
// shape and dtype as x, summed in double. Backward: cumsum of the gradient the other way.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);

// ---- gather / scatter-add (torch.gather, torch.scatter_add) ----
// index has input's rank, index.size(d) ≤ input.size(d) for d ≠ dim, entries in
// [0, input.size(dim)). out has index's shape: out[..j..] = input[..index[..j..]..].
// Backward: grad_input = scatter_add(zeros, dim, index, grad_out).
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
// Out of place: returns self with src[..j..] added at [..index[..j..]..] along dim.
// index has self's rank, index.size(d) ≤ src.size(d) for all d and ≤ self.size(d) for
// d ≠ dim, entries in [0, self.size(dim)); src has self's dtype; only src's index-shaped
// corner is read. Backward: grad_self = grad_out; grad_src = gather(grad_out, dim, index)
// on that corner, 0 elsewhere.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// ---- sort / argsort / top-k ----
struct ValuesIndices {
  Tensor values;   // x's dtype, differentiable
  Tensor indices;  // i64 positions along dim, no gradient
};
// Stable sort along dim (default last): equal values keep their order in both directions;
// NaN counts as larger than +inf. values[..j..] = x[..indices[..j..]..].
// Backward: the values' gradient scattered back to the positions in indices.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (or smallest) along dim, sorted (descending for largest, ascending for
// smallest), ties to the lower position; 0 ≤ k ≤ x.size(dim). Output size k along dim.
// Backward: the values' gradient scattered into zeros at indices.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

}  // namespace patchbay::engine
