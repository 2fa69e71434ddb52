// sorted_chunk_attention (sorted_chunk_attention.hpp): argument checks, the fp32 compute
// convention and the autograd node around the fused kernels of patchbay_kernels_cpu
// (kernels/cpu/sorted_chunk_attention.cpp). The forward keeps out and the per-position
// (max, log-sum) statistics for the backward; the backward is not itself recorded (no double
// backward through this op).
// Under a bf16 autocast policy (engine/autocast.hpp) on the CPU the kernels run with bf16
// operands and f32 accumulation, the fused dense kernel's recipe (q, k, v, dout, P and dS rounded
// where a product reads them; scores, softmax statistics, out and gradients f32), on every CPU
// code path (kernels/cpu/sorted_chunk_attention.hpp). The policy is read once, at the forward;
// its backward follows the forward's choice.
#include "engine/ops/sorted_chunk_attention.hpp"

#include <stdexcept>
#include <string>

#include "engine/autocast.hpp"
#include "engine/dispatch.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/sorted_chunk_attention.hpp"

namespace patchbay::engine {
namespace {

using ChunkForwardKernel = void(const kernels::SortedChunkAttentionShape& s, const Tensor& q,
                                const Tensor& k, const Tensor& v, const Tensor& position,
                                const Tensor& group, Tensor& out, Tensor& stat);
using ChunkBackwardKernel = void(const kernels::SortedChunkAttentionShape& s, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& position,
                                 const Tensor& group, const Tensor& out, const Tensor& stat,
                                 const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv);

void chunk_forward_cpu(const kernels::SortedChunkAttentionShape& s, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& position,
                       const Tensor& group, Tensor& out, Tensor& stat) {
  kernels::sorted_chunk_attention_forward(s, q.data<float>(), k.data<float>(), v.data<float>(),
                                          position.data<int32_t>(), group.data<int32_t>(),
                                          out.data<float>(), stat.data<float>());
}
void chunk_backward_cpu(const kernels::SortedChunkAttentionShape& s, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& position,
                        const Tensor& group, const Tensor& out, const Tensor& stat,
                        const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  kernels::sorted_chunk_attention_backward(
      s, q.data<float>(), k.data<float>(), v.data<float>(), position.data<int32_t>(),
      group.data<int32_t>(), out.data<float>(), stat.data<float>(), dout.data<float>(),
      dq.data<float>(), dk.data<float>(), dv.data<float>());
}
PATCHBAY_REGISTER_KERNEL(ChunkForwardKernel, "sorted_chunk_attention", DeviceType::kCpu,
                         chunk_forward_cpu);
PATCHBAY_REGISTER_KERNEL(ChunkBackwardKernel, "sorted_chunk_attention_backward", DeviceType::kCpu,
                         chunk_backward_cpu);

constexpr const char* kOp = "sorted_chunk_attention";

// The kernel shape of the call; refuses mismatched shapes and dtypes with what was found.
kernels::SortedChunkAttentionShape shape_of(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& position, const Tensor& group,
                                            const SortedChunkOptions& o) {
  detail::check_same(q, k, kOp);
  detail::check_same(q, v, kOp);
  bool ok = q.dim() >= 2 && q.shape() == k.shape() && q.shape() == v.shape() &&
            position.dim() == q.dim() - 1 && position.shape() == group.shape();
  for (int64_t d = 0; ok && d + 2 < q.dim(); ++d) ok = q.size(d) == position.size(d);
  if (!ok)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kOp) +
                    ": expected q, k, v [..., T, D] of one shape and slot_position, slot_group "
                    "[..., S] with the same leading dims, found " +
                    q.str() + ", " + k.str() + ", " + v.str() + ", " + position.str() + ", " +
                    group.str());
  if (position.dtype() != DType::kI32 || group.dtype() != DType::kI32 ||
      position.device() != q.device() || group.device() != q.device())
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kOp) +
                    ": slot_position and slot_group must be int32 on q's device, "
                    "found " +
                    position.str() + " and " + group.str());
  kernels::SortedChunkAttentionShape s;
  s.length = q.size(-2);
  s.head_dim = q.size(-1);
  s.slots = position.size(-1);
  s.rows = 1;
  for (int64_t d = 0; d + 2 < q.dim(); ++d) s.rows *= q.size(d);
  s.chunk_len = o.chunk_len;
  s.scale = static_cast<float>(o.scale);
  s.self_bias = static_cast<float>(o.self_bias);
  s.causal = o.causal;
  s.dedup = o.dedup;
  s.bf16 = autocast_dtype() == DType::kBF16 && q.device().type == DeviceType::kCpu;
  return s;
}

}  // namespace

Tensor sorted_chunk_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& slot_position, const Tensor& slot_group,
                              const SortedChunkOptions& options) {
  const kernels::SortedChunkAttentionShape s =
      shape_of(q, k, v, slot_position, slot_group, options);
  Tensor position = slot_position.detach().contiguous(), group = slot_group.detach().contiguous();
  // Plan and options are checked before any work, so a bad plan is an error, not a crash.
  const std::string error = kernels::sorted_chunk_attention_error(
      s, position.numel() > 0 ? position.data<int32_t>() : nullptr,
      group.numel() > 0 ? group.data<int32_t>() : nullptr);
  if (!error.empty()) throw Error(ErrorKind::kInvalidArgument, std::string(kOp) + ": " + error);
  Tensor q32 = detail::as_f32_contiguous(q), k32 = detail::as_f32_contiguous(k),
         v32 = detail::as_f32_contiguous(v);
  Shape stat_shape = q.shape();
  stat_shape.back() = 2;
  Tensor out = zeros(q.shape(), DType::kF32, q.device());
  Tensor stat = zeros(stat_shape, DType::kF32, q.device());
  if (out.numel() > 0)
    find_kernel<ChunkForwardKernel>(kOp, q.device().type)(s, q32, k32, v32, position, group, out,
                                                          stat);
  Tensor result = detail::from_f32(out, q.dtype());
  record_op(
      kOp, {q, k, v}, {&result},
      [s, q32, k32, v32, position, group, out, stat, dt = q.dtype()](const std::vector<Tensor>& g) {
        Tensor dout = detail::as_f32_contiguous(g[0]);
        Tensor dq = zeros(q32.shape(), DType::kF32, q32.device());
        Tensor dk = zeros(q32.shape(), DType::kF32, q32.device());
        Tensor dv = zeros(q32.shape(), DType::kF32, q32.device());
        if (dout.numel() > 0)
          find_kernel<ChunkBackwardKernel>("sorted_chunk_attention_backward", q32.device().type)(
              s, q32, k32, v32, position, group, out, stat, dout, dq, dk, dv);
        return std::vector<Tensor>{detail::from_f32(dq, dt), detail::from_f32(dk, dt),
                                   detail::from_f32(dv, dt)};
      });
  return result;
}

}  // namespace patchbay::engine
