// The CUDA dispatch entries of causal_linear_attention and its backward
// (engine/kernel_signatures.hpp) through kernels/cuda/linear_attention.hpp: the chunked causal
// product, f32, deterministic; the backward is three such products (dq forward, dv and dk as
// reverse sweeps). A key or value dim past the kernel's shared memory is refused naming it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "patchbay/kernels/cuda/linear_attention.hpp"

namespace patchbay::cuda {
namespace {

using engine::Tensor;
namespace kc = kernels::cuda;
namespace sig = engine::kernel;

// The forward reads E-wide rows into shared memory, the backward also M-wide ones (dq = P(dout,
// v, k) and dk = Prev(v, dout, q) contract over M).
void check_dims(const char* op, const sig::LinearAttentionShape& s, bool backward,
                const Tensor& operand) {
  const int64_t limit = kc::linear_attention_max_key_dim();
  const int64_t widest = backward ? std::max(s.key_dim, s.value_dim) : s.key_dim;
  if (widest > limit)
    refuse_op(op,
              "the GPU kernel takes key and value dims up to " + std::to_string(limit) +
                  " (shared memory per block), found " + std::to_string(widest),
              operand);
}

void linear_forward_cuda(const sig::LinearAttentionShape& s, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor& out) {
  check_dims("causal_linear_attention", s, false, q);
  const OnDeviceOf on(out);
  check_launch(kc::causal_linear_attention_forward_f32(q.data<float>(), k.data<float>(),
                                                       v.data<float>(), out.data<float>(), s.rows,
                                                       s.length, s.key_dim, s.value_dim, on.stream),
               "causal_linear_attention");
}

void linear_backward_cuda(const sig::LinearAttentionShape& s, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  check_dims("causal_linear_attention_backward", s, true, q);
  const OnDeviceOf on(dq);
  check_launch(
      kc::causal_linear_attention_backward_f32(
          q.data<float>(), k.data<float>(), v.data<float>(), dout.data<float>(), dq.data<float>(),
          dk.data<float>(), dv.data<float>(), s.rows, s.length, s.key_dim, s.value_dim, on.stream),
      "causal_linear_attention_backward");
}

}  // namespace

void register_linear_attention_kernels() {
  using engine::DeviceType;
  using engine::register_kernel;
  register_kernel<sig::LinearAttentionForwardKernel>("causal_linear_attention", DeviceType::kCuda,
                                                     linear_forward_cuda);
  register_kernel<sig::LinearAttentionBackwardKernel>("causal_linear_attention_backward",
                                                      DeviceType::kCuda, linear_backward_cuda);
}

}  // namespace patchbay::cuda
