// scaled_dot_product_attention: the fused flash kernel of patchbay_kernels_cpu behind an
// engine op. The forward saves the per-row log-sum-exp [B,H,Tq] and its output; the backward
// recomputes probabilities in the kernel (attention_flash_backward), so memory stays
// O(T * D), never O(Tq * Tk). Inputs are made contiguous f32; other float dtypes are
// widened and the result rounded back. k/v may have fewer heads than q (grouped-query
// attention) as long as they divide H.
#include <cmath>

#include "engine/dispatch.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::engine {
namespace {

struct AttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  float scale = 0.f;
  bool causal = false;
};
// out [B,H,Tq,D], lse [B,H,Tq] (out); all contiguous f32.
using AttentionKernel = void(const AttentionShape& s, const Tensor& q, const Tensor& k,
                             const Tensor& v, Tensor& out, Tensor& lse);
// dq, dk, dv (out, overwritten) from the forward's tensors and dout.
using AttentionBackwardKernel = void(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv);

kernels::AttentionParams make_params(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse) {
  kernels::AttentionParams p;
  p.batch = s.batch;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.q_len = s.q_len;
  p.kv_len = s.kv_len;
  p.head_dim = s.head_dim;
  auto q_strides = kernels::contiguous_attention_strides(s.heads, s.q_len, s.head_dim);
  auto kv_strides = kernels::contiguous_attention_strides(s.kv_heads, s.kv_len, s.head_dim);
  p.q = q.data<float>();
  p.q_strides = q_strides;
  p.k = k.data<float>();
  p.k_strides = kv_strides;
  p.v = v.data<float>();
  p.v_strides = kv_strides;
  p.out = out.data<float>();
  p.out_strides = q_strides;
  p.lse = lse.data<float>();
  p.scale = s.scale;
  p.causal = s.causal;
  p.dout_strides = q_strides;
  p.dq_strides = q_strides;
  p.dk_strides = kv_strides;
  p.dv_strides = kv_strides;
  return p;
}

void attention_cpu(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   Tensor& out, Tensor& lse) {
  std::string err = kernels::attention_flash_forward(make_params(s, q, k, v, out, lse));
  if (!err.empty())
    throw Error(ErrorKind::kInvalidArgument, "scaled_dot_product_attention: " + err);
}

void attention_backward_cpu(const AttentionShape& s, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  kernels::AttentionParams p = make_params(s, q, k, v, out, lse);
  p.dout = dout.data<float>();
  p.dq = dq.data<float>();
  p.dk = dk.data<float>();
  p.dv = dv.data<float>();
  std::string err = kernels::attention_flash_backward(p);
  if (!err.empty())
    throw Error(ErrorKind::kInvalidArgument, "scaled_dot_product_attention backward: " + err);
}
PATCHBAY_REGISTER_KERNEL(AttentionKernel, "attention", DeviceType::kCpu, attention_cpu);
PATCHBAY_REGISTER_KERNEL(AttentionBackwardKernel, "attention_backward", DeviceType::kCpu,
                         attention_backward_cpu);

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  detail::check_same(q, k, op);
  detail::check_same(q, v, op);
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.shape() != v.shape() ||
      q.size(0) != k.size(0) || q.size(3) != k.size(3) || k.size(1) == 0 ||
      q.size(1) % k.size(1) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) +
                    ": expected q [B,H,Tq,D], k and v [B,Hkv,Tk,D] with "
                    "H a multiple of Hkv, found " +
                    q.str() + ", " + k.str() + ", " + v.str());
  AttentionShape s;
  s.batch = q.size(0);
  s.heads = q.size(1);
  s.kv_heads = k.size(1);
  s.q_len = q.size(2);
  s.kv_len = k.size(2);
  s.head_dim = q.size(3);
  s.causal = causal;
  s.scale = static_cast<float>(
      scale.value_or(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.head_dim, 1)))));
  Tensor q32 = detail::as_f32_contiguous(q), k32 = detail::as_f32_contiguous(k),
         v32 = detail::as_f32_contiguous(v);
  Tensor out = Tensor::empty(q.shape(), DType::kF32, q.device());
  Tensor lse = Tensor::empty({s.batch, s.heads, s.q_len}, DType::kF32, q.device());
  if (out.numel() > 0) {
    if (s.kv_len == 0) {
      fill_(out, 0.0);
    } else {
      find_kernel<AttentionKernel>("attention", q.device().type)(s, q32, k32, v32, out, lse);
    }
  }
  Tensor result = detail::from_f32(out, q.dtype());
  record_op(op, {q, k, v}, {&result},
            [s, q32, k32, v32, out_saved = out.detach(), lse,
             dt = q.dtype()](const std::vector<Tensor>& g) {
              Tensor dout = detail::as_f32_contiguous(g[0]);
              Tensor dq = zeros(q32.shape(), DType::kF32, q32.device());
              Tensor dk = zeros(k32.shape(), DType::kF32, q32.device());
              Tensor dv = zeros(v32.shape(), DType::kF32, q32.device());
              if (out_saved.numel() > 0 && s.kv_len > 0)
                find_kernel<AttentionBackwardKernel>("attention_backward", q32.device().type)(
                    s, q32, k32, v32, out_saved, lse, dout, dq, dk, dv);
              return std::vector<Tensor>{detail::from_f32(dq, dt), detail::from_f32(dk, dt),
                                         detail::from_f32(dv, dt)};
            });
  return result;
}

}  // namespace patchbay::engine
