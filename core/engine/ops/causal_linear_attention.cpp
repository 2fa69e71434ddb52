// causal_linear_attention (causal_linear_attention.hpp): argument checks, the fp32 compute
// convention and the autograd node around the fused kernels of patchbay_kernels_cpu. The
// backward is not itself recorded (no double backward through this op).
// Under a bf16 autocast policy (engine/autocast.hpp) on the CPU the kernels run with bf16
// operands and f32 accumulation, the fused dense kernel's recipe: q, k, v, the upstream gradient,
// the within-chunk products and the states a product reads are rounded to bf16, everything is
// accumulated in f32 and the output and gradients are f32 (returned in the inputs' dtype as
// before). The policy is read once, at the forward; its backward follows the forward's choice.
// On every CPU code path (AVX-512, AVX2, generic: bf16-exact f32 values through f32 FMAs), unlike
// dense attention, whose bf16 kernel needs AVX512-BF16. CUDA stays f32.
#include "engine/ops/causal_linear_attention.hpp"

#include <string>

#include "engine/autocast.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/causal_linear_attention.hpp"

namespace patchbay::engine {
namespace {

using LinearShape = kernel::LinearAttentionShape;
using LinearForwardKernel = kernel::LinearAttentionForwardKernel;
using LinearBackwardKernel = kernel::LinearAttentionBackwardKernel;

kernels::CausalLinearAttentionShape kernel_shape(const LinearShape& s) {
  kernels::CausalLinearAttentionShape shape{s.rows, s.length, s.key_dim, s.value_dim};
  shape.bf16 = s.bf16;
  return shape;
}
void linear_forward_cpu(const LinearShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                        Tensor& out) {
  kernels::causal_linear_attention_forward(kernel_shape(s), q.data<float>(), k.data<float>(),
                                           v.data<float>(), out.data<float>());
}
void linear_backward_cpu(const LinearShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  kernels::causal_linear_attention_backward(kernel_shape(s), q.data<float>(), k.data<float>(),
                                            v.data<float>(), dout.data<float>(), dq.data<float>(),
                                            dk.data<float>(), dv.data<float>());
}
PATCHBAY_REGISTER_KERNEL(LinearForwardKernel, "causal_linear_attention", DeviceType::kCpu,
                         linear_forward_cpu);
PATCHBAY_REGISTER_KERNEL(LinearBackwardKernel, "causal_linear_attention_backward", DeviceType::kCpu,
                         linear_backward_cpu);

}  // namespace

Tensor causal_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "causal_linear_attention";
  detail::check_same(q, k, op);
  detail::check_same(q, v, op);
  bool ok = q.dim() >= 2 && q.shape() == k.shape() && v.dim() == q.dim();
  for (int64_t d = 0; ok && d + 1 < q.dim(); ++d) ok = q.size(d) == v.size(d);
  if (!ok)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) +
                    ": expected q and k [..., T, E] of one shape and v [..., T, M] with the same "
                    "leading dims, found " +
                    q.str() + ", " + k.str() + ", " + v.str());
  LinearShape s;
  s.length = q.size(-2);
  s.key_dim = q.size(-1);
  s.value_dim = v.size(-1);
  s.rows = 1;
  for (int64_t d = 0; d + 2 < q.dim(); ++d) s.rows *= q.size(d);
  s.bf16 = autocast_dtype() == DType::kBF16 && q.device().type == DeviceType::kCpu;
  Tensor q32 = detail::as_f32_contiguous(q), k32 = detail::as_f32_contiguous(k),
         v32 = detail::as_f32_contiguous(v);
  Tensor out = zeros(v.shape(), DType::kF32, v.device());
  if (out.numel() > 0 && s.key_dim > 0)
    find_kernel<LinearForwardKernel>("causal_linear_attention", q.device().type)(s, q32, k32, v32,
                                                                                 out);
  Tensor result = detail::from_f32(out, q.dtype());
  record_op(
      op, {q, k, v}, {&result}, [s, q32, k32, v32, dt = q.dtype()](const std::vector<Tensor>& g) {
        Tensor dout = detail::as_f32_contiguous(g[0]);
        Tensor dq = zeros(q32.shape(), DType::kF32, q32.device());
        Tensor dk = zeros(k32.shape(), DType::kF32, q32.device());
        Tensor dv = zeros(v32.shape(), DType::kF32, q32.device());
        if (dout.numel() > 0 && s.key_dim > 0)
          find_kernel<LinearBackwardKernel>("causal_linear_attention_backward", q32.device().type)(
              s, q32, k32, v32, dout, dq, dk, dv);
        return std::vector<Tensor>{detail::from_f32(dq, dt), detail::from_f32(dk, dt),
                                   detail::from_f32(dv, dt)};
      });
  return result;
}

}  // namespace patchbay::engine
