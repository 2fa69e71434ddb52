// The CUDA dispatch entries of the row-shaped ops (engine/kernel_signatures.hpp): embedding
// (forward, backward), rotary embedding, bias + activation (forward, backward), cumsum, row
// reductions (sum; max with its argmax and backward) and the leading-dims sum, through
// kernels/cuda/{embedding_rotary,bias_activation,cumsum,random_reduce_rows}.hpp.
// embedding: the ids are checked on the device (kernels/cuda/index_checks.hpp) into the
// device's error record, raised at the host's next read (the gather writes a NaN row for a bad
// id, the backward skips it). Host reads, each where the engine's contract puts a value there:
//   reduce max / max_backward: the engine keeps argmax in host memory, so it is copied back
//              (and forth): max is a sampling/analysis op, not a training-step one.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/device_index_errors.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/index_tensor.hpp"
#include "patchbay/kernels/cuda/bias_activation.hpp"
#include "patchbay/kernels/cuda/cumsum.hpp"
#include "patchbay/kernels/cuda/embedding_rotary.hpp"
#include "patchbay/kernels/cuda/index_checks.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
namespace kc = kernels::cuda;
namespace sig = engine::kernel;

// Checks the ids on the device: a bad id goes into the device's error record (raised at the
// host's next read, engine/device_index_errors.hpp); the gather writes a NaN row for it.
template <class Index>
void check_ids_on_device(const Tensor& ids, int64_t vocab, cudaStream_t stream) {
  const kc::math::IndexCheck check{.op = kc::math::IndexErrorOp::kEmbeddingId, .bound = vocab};
  check_launch(kc::check_indices(ids.data<Index>(), ids.numel(), check,
                                 engine::index_error_record_for(ids.device()), nullptr, stream),
               "embedding (id check)");
}

void embedding_forward_cuda(const Tensor& weights_given, const Tensor& ids, Tensor& out) {
  if (ids.numel() == 0) return;
  // A bf16/f16 table is widened whole here (the CPU widens the gathered rows only).
  const Tensor weights =
      weights_given.dtype() == DType::kF32 ? weights_given : weights_given.to(DType::kF32);
  const int64_t vocab = weights.size(0), dim = weights.size(1);
  const OnDeviceOf on(out);
  if (ids.dtype() == DType::kI32) {
    check_ids_on_device<int32_t>(ids, vocab, on.stream);
    check_launch(kc::embedding_forward(ids.data<int32_t>(), weights.data<float>(),
                                       out.data<float>(), ids.numel(), vocab, dim, on.stream),
                 "embedding");
  } else {
    check_ids_on_device<int64_t>(ids, vocab, on.stream);
    check_launch(kc::embedding_forward(ids.data<int64_t>(), weights.data<float>(),
                                       out.data<float>(), ids.numel(), vocab, dim, on.stream),
                 "embedding");
  }
}

// Accumulates into grad_weights (ids were checked by the forward).
void embedding_backward_cuda(const Tensor& grad_out, const Tensor& ids, Tensor& grad_weights) {
  if (ids.numel() == 0) return;
  const int64_t vocab = grad_weights.size(0), dim = grad_weights.size(1);
  const OnDeviceOf on(grad_weights);
  const cudaError_t status =
      ids.dtype() == DType::kI32
          ? kc::embedding_backward(ids.data<int32_t>(), grad_out.data<float>(),
                                   grad_weights.data<float>(), ids.numel(), vocab, dim, on.stream)
          : kc::embedding_backward(ids.data<int64_t>(), grad_out.data<float>(),
                                   grad_weights.data<float>(), ids.numel(), vocab, dim, on.stream);
  check_launch(status, "embedding_backward");
}

void rotary_cuda(const Tensor& x, int64_t position_offset, double theta, bool inverse,
                 Tensor& out) {
  const int64_t dim = x.size(-1), steps = x.size(-2);
  if (steps * dim == 0 || x.numel() == 0) return;
  const OnDeviceOf on(out);
  check_launch(kc::rotary_embedding(x.data<float>(), out.data<float>(), x.numel() / (steps * dim),
                                    steps, dim, position_offset, theta, inverse, on.stream),
               "rotary_embedding");
}

kc::Activation activation_of(engine::FusedActivation act) {
  return act == engine::FusedActivation::kRelu ? kc::Activation::kRelu : kc::Activation::kGeluTanh;
}

void bias_activation_cuda(engine::FusedActivation act, const Tensor& x32, const Tensor& b32,
                          Tensor& out, int64_t rows, int64_t cols) {
  if (rows * cols == 0) return;
  const OnDeviceOf on(out);
  check_launch(kc::bias_activation_forward(activation_of(act), x32.data<float>(), b32.data<float>(),
                                           out.data<float>(), rows, cols, on.stream),
               "bias_activation");
}

void bias_activation_backward_cuda(engine::FusedActivation act, const Tensor& x32,
                                   const Tensor& b32, const Tensor& g32, Tensor& dx, Tensor& dbias,
                                   int64_t rows, int64_t cols) {
  if (rows * cols == 0) {
    if (dbias.defined()) engine::fill_(dbias, 0.0);
    return;
  }
  const OnDeviceOf on(dx);
  check_launch(kc::bias_activation_backward(activation_of(act), x32.data<float>(),
                                            b32.data<float>(), g32.data<float>(), dx.data<float>(),
                                            dbias.defined() ? dbias.data<float>() : nullptr, rows,
                                            cols, on.stream),
               "bias_activation_backward");
}

void cumsum_cuda(const Tensor& x, int64_t dim, bool reverse, Tensor& out) {
  if (x.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const OnDeviceOf on(out);
  check_launch(kc::cumsum_f32(x.data<float>(), out.data<float>(), outer, x.size(dim), inner,
                              reverse, on.stream),
               "cumsum");
}

void reduce_cuda(sig::ReduceKind kind, const Tensor& x, int64_t outer, int64_t inner, Tensor& out,
                 int64_t* argmax) {
  if (outer == 0) return;
  if (inner == 0) {  // empty rows: the CPU's answers (sum 0; max 0 at index 0)
    engine::fill_(out, 0.0);
    if (argmax != nullptr) std::fill(argmax, argmax + outer, int64_t{0});
    return;
  }
  const OnDeviceOf on(out);
  if (kind == sig::ReduceKind::kSum) {
    check_launch(kc::reduce_rows_f32(kc::RowReduction::kSum, x.data<float>(), out.data<float>(),
                                     nullptr, outer, inner, on.stream),
                 "reduce (sum)");
    return;
  }
  Tensor device_argmax = Tensor::empty({outer}, DType::kI64, out.device());
  check_launch(kc::reduce_rows_f32(kc::RowReduction::kMax, x.data<float>(), out.data<float>(),
                                   device_argmax.data<int64_t>(), outer, inner, on.stream),
               "reduce (max)");
  if (argmax != nullptr) {
    const Tensor host = device_argmax.to(engine::cpu());
    std::copy(host.data<int64_t>(), host.data<int64_t>() + outer, argmax);
  }
}

void max_backward_cuda(const Tensor& grad, const int64_t* argmax, int64_t outer, int64_t inner,
                       Tensor& dx) {
  if (outer * inner == 0) return;
  const Tensor device_argmax = Tensor::from_data(argmax, {outer}, DType::kI64, dx.device());
  const OnDeviceOf on(dx);
  check_launch(kc::max_rows_backward_f32(grad.data<float>(), device_argmax.data<int64_t>(),
                                         dx.data<float>(), outer, inner, on.stream),
               "max_backward");
}

void reduce_leading_cuda(const Tensor& x, int64_t rows, int64_t cols, Tensor& out) {
  if (cols == 0) return;
  if (rows == 0) {
    engine::fill_(out, 0.0);
    return;
  }
  const OnDeviceOf on(out);
  check_launch(kc::column_sum_f32(x.data<float>(), out.data<float>(), rows, cols, on.stream),
               "reduce_leading");
}

}  // namespace

void register_row_kernels() {
  using engine::DeviceType;
  using engine::register_kernel;
  register_kernel<sig::EmbeddingForwardKernel>("embedding", DeviceType::kCuda,
                                               embedding_forward_cuda);
  register_kernel<sig::EmbeddingBackwardKernel>("embedding_backward", DeviceType::kCuda,
                                                embedding_backward_cuda);
  register_kernel<sig::RotaryKernel>("rotary_embedding", DeviceType::kCuda, rotary_cuda);
  register_kernel<sig::BiasActivationForwardKernel>("bias_activation", DeviceType::kCuda,
                                                    bias_activation_cuda);
  register_kernel<sig::BiasActivationBackwardKernel>("bias_activation_backward", DeviceType::kCuda,
                                                     bias_activation_backward_cuda);
  register_kernel<sig::CumsumKernel>("cumsum", DeviceType::kCuda, cumsum_cuda);
  register_kernel<sig::ReduceKernel>("reduce", DeviceType::kCuda, reduce_cuda);
  register_kernel<sig::MaxBackwardKernel>("max_backward", DeviceType::kCuda, max_backward_cuda);
  register_kernel<sig::ReduceLeadingKernel>("reduce_leading", DeviceType::kCuda,
                                            reduce_leading_cuda);
}

}  // namespace patchbay::cuda
