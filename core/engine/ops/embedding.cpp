// embedding(weights, ids): the engine op around the raw-pointer kernels in
// kernels/indexing (patchbay/kernels/embedding.hpp). Forward copies one weight row per id;
// backward scatter-adds the output gradient into a fresh dW (deterministic, see the
// kernel). The CPU kernel checks the ids before touching memory, so an id outside the
// vocabulary is an error naming the id, where it sits and V.
#include "patchbay/kernels/embedding.hpp"

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/index_tensor.hpp"
#include "engine/ops/low_rank_adapter_internal.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/index_check.hpp"

namespace patchbay::engine {
namespace {

using kernel::EmbeddingBackwardKernel;
using kernel::EmbeddingForwardKernel;

void embedding_forward_cpu(const Tensor& weights, const Tensor& ids, Tensor& out) {
  const int64_t vocab = weights.size(0), dim = weights.size(1);
  detail::visit_index_type(ids, [&](auto index_type) {
    using Index = decltype(index_type);
    const Index* id_data = ids.data<Index>();
    const int64_t bad = kernels::first_index_out_of_range(id_data, ids.numel(), vocab);
    detail::throw_if_out_of_range(bad, id_data, ids, "embedding", "id",
                                  "0 <= id < " + std::to_string(vocab) + " (the " +
                                      std::to_string(vocab) + " rows of weights " + weights.str() +
                                      ")",
                                  "Check that the tokenizer's vocabulary size matches the model's");
    if (weights.dtype() == DType::kF32) {
      kernels::embedding_forward(weights.data<float>(), vocab, dim, id_data, ids.numel(),
                                 out.data<float>());
      return;
    }
    const void* table = weights.data_ptr();
    float* rows = out.data<float>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      const int64_t first = static_cast<int64_t>(id_data[i]) * dim;
      for (int64_t d = 0; d < dim; ++d)
        rows[i * dim + d] = load_as_f32(table, first + d, weights.dtype());
    }
  });
}
PATCHBAY_REGISTER_KERNEL(EmbeddingForwardKernel, "embedding", DeviceType::kCpu,
                         embedding_forward_cpu);

void embedding_backward_cpu(const Tensor& grad_out, const Tensor& ids, Tensor& grad_weights) {
  detail::visit_index_type(ids, [&](auto index_type) {
    using Index = decltype(index_type);
    kernels::embedding_backward(grad_out.data<float>(), ids.data<Index>(), ids.numel(),
                                grad_weights.size(0), grad_weights.size(1),
                                grad_weights.data<float>());
  });
}
PATCHBAY_REGISTER_KERNEL(EmbeddingBackwardKernel, "embedding_backward", DeviceType::kCpu,
                         embedding_backward_cpu);

}  // namespace

Tensor embedding(const Tensor& weights, const Tensor& ids) {
  detail::check_float(weights, "embedding");
  detail::check_index_tensor(ids, "embedding", "ids");
  if (weights.dim() != 2)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message("embedding", "weights of shape [V, D]", weights));
  if (weights.device() != ids.device())
    throw Error(ErrorKind::kInvalidArgument, "embedding: weights " + weights.str() + " and ids " +
                                                 ids.str() + " are on different devices");
  detail::refuse_adapted_operand(weights, "an embedding lookup");
  const Device device = weights.device();
  const Shape weights_shape = weights.shape();
  Tensor table = weights.detach().contiguous();  // any float dtype: widened per gathered row
  Tensor ids_contiguous = ids.detach().contiguous();
  Shape out_shape = ids.shape();
  out_shape.push_back(weights_shape[1]);
  Tensor out = Tensor::empty(out_shape, DType::kF32, device);
  find_kernel<EmbeddingForwardKernel>("embedding", device.type)(table, ids_contiguous, out);
  out = detail::from_f32(out, weights.dtype());

  record_op("embedding", {weights}, {&out},
            [ids_contiguous, weights_shape, device](const std::vector<Tensor>& g) {
              Tensor grad_out = detail::as_f32_contiguous(g[0]);
              Tensor grad_weights = zeros(weights_shape, DType::kF32, device);
              find_kernel<EmbeddingBackwardKernel>("embedding_backward", device.type)(
                  grad_out, ids_contiguous, grad_weights);
              return std::vector<Tensor>{grad_weights};
            });
  // The gradient touches n rows of [V, D]: when the table's running gradient already exists (a
  // tied head's, an earlier micro-batch's), backward adds the rows into it in place instead of
  // building a zero-filled [V, D] gradient and adding that (autograd.hpp, AddIntoFn).
  if (out.grad_fn()) {
    out.grad_fn()->set_add_into(
        [ids_contiguous, device](const std::vector<Tensor>& g, Tensor& grad_weights) {
          Tensor grad_out = detail::as_f32_contiguous(g[0]);
          find_kernel<EmbeddingBackwardKernel>("embedding_backward", device.type)(
              grad_out, ids_contiguous, grad_weights);
        });
  }
  return out;
}

}  // namespace patchbay::engine
