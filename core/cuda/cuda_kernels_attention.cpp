// The CUDA dispatch entries of scaled_dot_product_attention (engine/kernel_signatures.hpp,
// AttentionShape) through the fused causal kernels of kernels/cuda/attention.hpp: causal
// self-attention (q_len == kv_len), f32, head dim 32, 64 or 128, as many KV heads as query heads,
// no sliding window, no ALiBi. Anything else is refused naming what the kernel lacks (the CPU
// runs every variant). The kernels read packed [B*H, T, D] operands: strided operands (a
// permuted [B, T, H, D] projection) are packed first and strided outputs written through a
// packed buffer; lse is [B, H, T] contiguous on both devices.
#include <string>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/cuda/attention.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
using engine::kernel::AttentionShape;
namespace kc = kernels::cuda;

void require_supported(const char* op, const AttentionShape& s, const Tensor& q) {
  std::string missing;
  if (!s.causal)
    missing = "non-causal attention";
  else if (s.q_len != s.kv_len)
    missing = "a query length other than the key length (a KV cache)";
  else if (s.kv_heads != s.heads)
    missing = "grouped key/value heads";
  else if (s.window != 0)
    missing = "a sliding window";
  else if (!s.slopes.empty())
    missing = "ALiBi slopes";
  else if (s.head_dim != 32 && s.head_dim != 64 && s.head_dim != 128)
    missing = "a head dim other than 32, 64 or 128";
  else if (q.dtype() != DType::kF32)
    missing = "operands other than f32";
  if (!missing.empty())
    refuse_op(op,
              "the CUDA attention kernel is causal self-attention with head dim 32, 64 or 128; " +
                  missing + " needs a kernel not written yet",
              q);
}

// x itself when packed, else a packed copy (on x's device).
Tensor packed(const Tensor& x) { return x.is_contiguous() ? x : x.contiguous(); }
// `out` itself when packed, else a packed buffer of its shape, copied into `out` by finish().
Tensor packed_output(const Tensor& out) {
  return out.is_contiguous() ? out : Tensor::empty(out.shape(), DType::kF32, out.device());
}
void finish(Tensor& out, const Tensor& buffer) {
  if (buffer.data_ptr() != out.data_ptr()) engine::copy_(out, buffer);
}

void attention_cuda(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                    Tensor& out, Tensor& lse) {
  require_supported("attention", s, q);
  if (s.batch * s.heads * s.q_len == 0) return;
  const Tensor pq = packed(q), pk = packed(k), pv = packed(v);
  Tensor pout = packed_output(out);
  {
    const OnDeviceOf on(out);
    check_launch(kc::causal_attention_forward(
                     pq.data<float>(), pk.data<float>(), pv.data<float>(), pout.data<float>(),
                     lse.data<float>(), s.batch * s.heads, s.q_len, s.head_dim, s.scale, on.stream),
                 "attention");
  }
  finish(out, pout);
}

void attention_backward_cuda(const AttentionShape& s, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  require_supported("attention_backward", s, q);
  if (s.batch * s.heads * s.q_len == 0) return;
  if (dout.dtype() != DType::kF32)
    refuse_op("attention_backward", "expected an f32 upstream gradient", dout);
  const Tensor pq = packed(q), pk = packed(k), pv = packed(v), pout = packed(out),
               pdout = packed(dout);
  Tensor pdq = packed_output(dq), pdk = packed_output(dk), pdv = packed_output(dv);
  Tensor delta = Tensor::empty({s.batch * s.heads * s.q_len}, DType::kF32, q.device());
  {
    const OnDeviceOf on(dq);
    check_launch(kc::causal_attention_backward(
                     pq.data<float>(), pk.data<float>(), pv.data<float>(), pout.data<float>(),
                     pdout.data<float>(), lse.data<float>(), delta.data<float>(), pdq.data<float>(),
                     pdk.data<float>(), pdv.data<float>(), s.batch * s.heads, s.q_len, s.head_dim,
                     s.scale, on.stream),
                 "attention_backward");
  }
  finish(dq, pdq);
  finish(dk, pdk);
  finish(dv, pdv);
}

}  // namespace

void register_attention_kernels() {
  namespace sig = engine::kernel;
  engine::register_kernel<sig::AttentionKernel>("attention", engine::DeviceType::kCuda,
                                                attention_cuda);
  engine::register_kernel<sig::AttentionBackwardKernel>(
      "attention_backward", engine::DeviceType::kCuda, attention_backward_cuda);
}

}  // namespace patchbay::cuda
