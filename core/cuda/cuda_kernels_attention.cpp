// The CUDA dispatch entries of scaled_dot_product_attention (engine/kernel_signatures.hpp,
// AttentionShape). Plain causal self-attention (q_len == kv_len, as many KV heads as query
// heads, no window, no ALiBi, head dim 32, 64 or 128) takes the tiled flash kernels of
// kernels/cuda/attention.hpp, the training path; every other shape the op allows (a KV cache:
// decode and chunked prefill, grouped KV heads, bidirectional, a sliding window, ALiBi, head
// dims up to 256) takes the warp-per-row kernels of attention_general.hpp, with the CPU
// kernel's semantics. Those are f32. bf16 operands (the engine sends them under a bf16
// autocast for plain causal self-attention with head dim 64 or 128, engine/ops/attention.cpp)
// take the bf16 tensor-core kernels of kernels/cuda/attention_bf16.hpp, packed segments
// included; bf16 operands of any other shape are refused. The kernels read packed operands:
// strided operands (a permuted [B, T, H, D] projection, a KV-cache buffer sliced to its filled
// prefix) are packed first and strided outputs written through a packed buffer; lse is
// [B, H, Tq] contiguous on both devices. Packed segment ids (the shape's host vector [B, Tk])
// are checked as the CPU kernel checks them and copied to the device (queued, no wait); both
// kernel families narrow each query's keys to its segment.
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/cuda/attention.hpp"
#include "patchbay/kernels/cuda/attention_bf16.hpp"
#include "patchbay/kernels/cuda/attention_general.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
using engine::kernel::AttentionShape;
namespace kc = kernels::cuda;

// The tiled kernel's case: plain causal self-attention with a head dim it is compiled for.
bool tiled_kernel_serves(const AttentionShape& s) {
  return s.causal && s.q_len == s.kv_len && s.kv_heads == s.heads && s.window == 0 &&
         s.slopes.empty() && (s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 128);
}

// The bf16 tensor-core kernel's case: the tiled kernel's shapes at head dim 64 or 128.
bool bf16_kernel_serves(const AttentionShape& s) {
  return tiled_kernel_serves(s) && kc::causal_attention_bf16_serves_head_dim(s.head_dim);
}

void require_supported(const char* op, const AttentionShape& s, const Tensor& q) {
  if (q.dtype() == DType::kBF16 && !bf16_kernel_serves(s))
    refuse_op(op,
              "bf16 attention on CUDA runs plain causal self-attention (q_len == kv_len, as many "
              "KV heads as heads, no window or ALiBi) at head dim 64 or 128; other shapes take "
              "f32 operands",
              q);
  if (q.dtype() != DType::kF32 && q.dtype() != DType::kBF16)
    refuse_op(op, "the CUDA attention kernels take f32 or bf16 operands", q);
  if (s.head_dim > kc::kGeneralAttentionMaxHeadDim || s.heads > kc::kGeneralAttentionMaxHeads)
    refuse_op(op,
              "the CUDA attention kernels take head dims up to " +
                  std::to_string(kc::kGeneralAttentionMaxHeadDim) + " and up to " +
                  std::to_string(kc::kGeneralAttentionMaxHeads) + " heads; found head dim " +
                  std::to_string(s.head_dim) + ", " + std::to_string(s.heads) + " heads",
              q);
}

// The CPU kernel's conditions on packed segment ids, in its words: Tq <= Tk and every row
// non-decreasing (each segment one contiguous run).
void check_segments(const char* op, const AttentionShape& s, const Tensor& q) {
  if (s.segments.empty()) return;
  if (s.q_len > s.kv_len)
    refuse_op(op,
              "segment_ids need q_len <= kv_len (queries at the last q_len key positions); found "
              "q_len " +
                  std::to_string(s.q_len) + ", kv_len " + std::to_string(s.kv_len),
              q);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t j = 1; j < s.kv_len; ++j) {
      const std::int32_t before = s.segments[size_t(b * s.kv_len + j - 1)];
      const std::int32_t now = s.segments[size_t(b * s.kv_len + j)];
      if (now < before)
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("scaled_dot_product_attention: segment_ids must be non-decreasing "
                                "along each row (each segment one contiguous run); row ") +
                        std::to_string(b) + " has " + std::to_string(before) + " at position " +
                        std::to_string(j - 1) + " then " + std::to_string(now));
    }
}

// The segment ids on q's device (an undefined tensor when there are none).
Tensor device_segments(const AttentionShape& s, const Tensor& q) {
  if (s.segments.empty()) return Tensor();
  return Tensor::from_data(s.segments.data(), {static_cast<int64_t>(s.segments.size())},
                           DType::kI32, q.device());
}
const std::int32_t* segments_pointer(const Tensor& segments) {
  return segments.defined() ? segments.data<std::int32_t>() : nullptr;
}

kc::GeneralAttentionShape general_shape(const AttentionShape& s, const Tensor& segments) {
  kc::GeneralAttentionShape g;
  g.batch = s.batch;
  g.heads = s.heads;
  g.kv_heads = s.kv_heads;
  g.q_len = s.q_len;
  g.kv_len = s.kv_len;
  g.head_dim = s.head_dim;
  g.scale = s.scale;
  g.causal = s.causal;
  g.window = s.window;
  g.has_slopes = !s.slopes.empty();
  for (size_t h = 0; h < s.slopes.size(); ++h) g.slopes[h] = s.slopes[h];
  g.segments = segments_pointer(segments);
  return g;
}

// x itself when packed (and, for bf16, 16-byte aligned: the bf16 kernel's vector loads; a view
// with an odd storage offset is not), else a packed copy (on x's device).
Tensor packed(const Tensor& x) {
  const bool aligned =
      x.dtype() != DType::kBF16 || reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0;
  if (x.is_contiguous()) return aligned ? x : x.clone();  // a fresh, aligned block
  return x.contiguous();
}
const std::uint16_t* bf16_pointer(const Tensor& x) { return x.data<std::uint16_t>(); }
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
  check_segments("attention", s, q);
  if (s.batch * s.heads * s.q_len == 0) return;
  const Tensor segments = device_segments(s, q);
  const Tensor pq = packed(q), pk = packed(k), pv = packed(v);
  Tensor pout = packed_output(out);
  {
    const OnDeviceOf on(out);
    if (pq.dtype() == DType::kBF16) {
      check_launch(kc::causal_attention_bf16_forward(
                       bf16_pointer(pq), bf16_pointer(pk), bf16_pointer(pv), pout.data<float>(),
                       lse.data<float>(), s.batch * s.heads, s.q_len, s.head_dim, s.scale,
                       on.stream, segments_pointer(segments), s.heads),
                   "attention");
    } else if (tiled_kernel_serves(s)) {
      check_launch(kc::causal_attention_forward(
                       pq.data<float>(), pk.data<float>(), pv.data<float>(), pout.data<float>(),
                       lse.data<float>(), s.batch * s.heads, s.q_len, s.head_dim, s.scale,
                       on.stream, segments_pointer(segments), s.heads),
                   "attention");
    } else {
      check_launch(kc::general_attention_forward(general_shape(s, segments), pq.data<float>(),
                                                 pk.data<float>(), pv.data<float>(),
                                                 pout.data<float>(), lse.data<float>(), on.stream),
                   "attention");
    }
  }
  finish(out, pout);
}

void attention_backward_cuda(const AttentionShape& s, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  require_supported("attention_backward", s, q);
  check_segments("attention_backward", s, q);
  if (s.batch * s.heads * s.q_len == 0 && s.batch * s.kv_heads * s.kv_len == 0) return;
  const Tensor segments = device_segments(s, q);
  if (dout.dtype() != q.dtype())
    refuse_op("attention_backward",
              std::string("expected an upstream gradient of the operands' dtype (") +
                  (q.dtype() == DType::kBF16 ? "bf16" : "f32") + ")",
              dout);
  const Tensor pq = packed(q), pk = packed(k), pv = packed(v), pout = packed(out),
               pdout = packed(dout);
  Tensor pdq = packed_output(dq), pdk = packed_output(dk), pdv = packed_output(dv);
  Tensor delta = Tensor::empty({s.batch * s.heads * s.q_len}, DType::kF32, q.device());
  {
    const OnDeviceOf on(dq);
    if (pq.dtype() == DType::kBF16) {
      check_launch(
          kc::causal_attention_bf16_backward(
              bf16_pointer(pq), bf16_pointer(pk), bf16_pointer(pv), pout.data<float>(),
              bf16_pointer(pdout), lse.data<float>(), delta.data<float>(), pdq.data<float>(),
              pdk.data<float>(), pdv.data<float>(), s.batch * s.heads, s.q_len, s.head_dim, s.scale,
              on.stream, segments_pointer(segments), s.heads),
          "attention_backward");
    } else if (tiled_kernel_serves(s)) {
      check_launch(
          kc::causal_attention_backward(pq.data<float>(), pk.data<float>(), pv.data<float>(),
                                        pout.data<float>(), pdout.data<float>(), lse.data<float>(),
                                        delta.data<float>(), pdq.data<float>(), pdk.data<float>(),
                                        pdv.data<float>(), s.batch * s.heads, s.q_len, s.head_dim,
                                        s.scale, on.stream, segments_pointer(segments), s.heads),
          "attention_backward");
    } else {
      check_launch(
          kc::general_attention_backward(
              general_shape(s, segments), pq.data<float>(), pk.data<float>(), pv.data<float>(),
              pout.data<float>(), pdout.data<float>(), lse.data<float>(), delta.data<float>(),
              pdq.data<float>(), pdk.data<float>(), pdv.data<float>(), on.stream),
          "attention_backward");
    }
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
