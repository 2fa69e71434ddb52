// scaled_dot_product_attention: the fused flash kernel of patchbay_kernels_cpu behind an
// engine op. The forward saves the per-row log-sum-exp [B,H,Tq] and its output; the backward
// recomputes probabilities in the kernel (attention_flash_backward), so memory stays
// O(T * D), never O(Tq * Tk). Options (ops-table version 3): a sliding window (tiles outside
// it are skipped) and ALiBi slopes (a bias inside the online softmax). f32 inputs whose last
// dim is contiguous are handed to the kernel as strided views, without a copy (a KV-cache
// buffer sliced to its filled prefix is read in place); other inputs are packed to
// contiguous f32 and the result rounded back to q's dtype. k/v may have fewer heads than q
// (grouped-query attention) as long as they divide H. Packed sequences (ops table version 13):
// segment ids [B, Tk] restrict each query to its own segment's keys inside the kernel (tiles
// outside the segments skipped), forward and backward; always f32 (CPU and CUDA kernels).
// Under a bf16 autocast policy (engine/autocast.hpp) on a CPU with AVX512-BF16, with an even
// head dim, the op runs the kernel's bf16 variant instead: q, k, v are rounded to bf16 (or read
// in place when they are bf16 already), saved in bf16 for the backward (half the memory), and
// the upstream gradient is rounded to bf16 there; every product takes bf16 inputs with f32
// accumulation, while the softmax, lse, the output and the gradients stay f32 (the output and
// gradients are then returned in the inputs' dtype as before). On CUDA the same holds for
// plain causal self-attention with head dim 64 or 128, packed segments included (CUDA's bf16
// tensor-core kernel, kernels/cuda/attention_bf16.hpp). Elsewhere bf16 autocast leaves
// attention in f32, as before.
// Layouts: the output and the gradients dq/dk/dv follow their operand's layout. An operand
// that is a permuted view of a [B, T, heads, D] buffer (heads split out of a [B, T, C]
// activation, head stride < seq stride) gets a token-major result ([B, T, heads, D] memory
// seen as [B, heads, T, D]); so the caller merges heads back, or the gradient reaches the
// [B, T, C] activation, through a reshape that is a view instead of a copy (5 [B, T, C]
// copies per layer in training). A strided upstream gradient is read in place too.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::engine {
namespace {

using kernel::AttentionBackwardKernel;
using kernel::AttentionKernel;
using kernel::AttentionShape;
using kernel::OperandStrides;

// Whether the kernel can read x's layout in place: a contiguous last dim, non-negative batch
// and head strides, a positive seq stride (any, for a length-1 seq dim).
bool kernel_readable_layout(const Tensor& x) {
  const Shape& st = x.strides();
  return (st[3] == 1 || x.size(3) == 1) && st[0] >= 0 && st[1] >= 0 &&
         (st[2] > 0 || x.size(2) == 1);
}

// The {batch, head, seq} strides of a kernel operand. A length-1 seq dim is never stepped
// over; any positive stride describes it.
OperandStrides operand_strides(const Tensor& operand) {
  const Shape& os = operand.strides();
  return OperandStrides{os[0], os[1], operand.size(2) == 1 ? std::max<int64_t>(os[2], 1) : os[2]};
}

// x as an f32 operand the kernel can read: x itself (no copy) when it is f32 with a
// readable layout, else a packed f32 copy. Never records autograd.
Tensor kernel_operand(const Tensor& x, OperandStrides& strides) {
  const bool in_place = x.dtype() == DType::kF32 && kernel_readable_layout(x);
  Tensor operand = in_place ? x.detach() : detail::as_f32_contiguous(x);
  strides = operand_strides(operand);
  return operand;
}

// The shapes CUDA's bf16 tensor-core kernel serves (kernels/cuda/attention_bf16.hpp, through
// core/cuda/cuda_kernels_attention.cpp): plain causal self-attention (Tq == Tk, as many KV
// heads as query heads, no window, no ALiBi), head dim 64 or 128, packed segments allowed.
bool cuda_bf16_kernel_serves(const AttentionShape& s) {
  return s.causal && s.q_len == s.kv_len && s.kv_heads == s.heads && s.window == 0 &&
         s.slopes.empty() && (s.head_dim == 64 || s.head_dim == 128);
}

// Whether this call runs a bf16 kernel, under a bf16 autocast policy: on the CPU, with an even
// head dim on a CPU with AVX512-BF16 (see the top of the file), never with packed segments (the
// CPU's bf16 kernel has no segment mask); on CUDA, the shapes of cuda_bf16_kernel_serves (the
// rest keep the f32 kernels there).
bool use_bf16_kernel(const Tensor& q, const AttentionShape& s) {
  if (autocast_dtype() != DType::kBF16) return false;
  if (q.device().type == DeviceType::kCuda) return cuda_bf16_kernel_serves(s);
  return s.segments.empty() && q.device().type == DeviceType::kCpu && q.size(3) % 2 == 0 &&
         kernels::attention_flash_bf16_supported();
}

kernels::AttentionStrides to_kernel(const OperandStrides& s) {
  return kernels::AttentionStrides{s.batch, s.head, s.seq};
}

// Strides of a [B, heads, T, D] f32 tensor whose last dim is contiguous (attention_buffer's,
// or an upstream gradient accepted by kernel_operand).
// A length-1 seq dim is never stepped over; any positive stride describes it.
kernels::AttentionStrides strides_of(const Tensor& x) { return to_kernel(operand_strides(x)); }

// Whether an operand with these strides is token-major: heads interleaved within each
// position (a permuted view of [B, T, heads, D]). Only meaningful with > 1 head and position.
bool token_major(const OperandStrides& s, int64_t heads, int64_t len) {
  return heads > 1 && len > 1 && s.head < s.seq;
}

// An uninitialised [B, heads, T, D] = `shape` buffer: token-major ([B, T, heads, D] in
// memory, returned as the permuted view) when `token_major_layout`, else contiguous.
Tensor attention_buffer(const Shape& shape, bool token_major_layout, Device device,
                        DType dtype = DType::kF32) {
  if (!token_major_layout) return Tensor::empty(shape, dtype, device);
  return Tensor::empty({shape[0], shape[2], shape[1], shape[3]}, dtype, device)
      .permute({0, 2, 1, 3});
}

// x as a bf16 operand of the bf16 kernel: x itself when it is bf16 with a contiguous last
// dim, else x rounded to bf16 (round to nearest even) into a buffer of x's layout, token-major
// or contiguous, so the rounding streams x's rows. Never records autograd.
Tensor bf16_kernel_operand(const Tensor& x, OperandStrides& strides) {
  const Shape& st = x.strides();
  const bool usable = kernel_readable_layout(x);
  Tensor operand = x.detach();
  if (x.dtype() != DType::kBF16 || !usable) {
    OperandStrides layout{st[0], st[1], st[2]};
    // Token-major for the CPU kernel, which reads strides; CUDA's bf16 kernel reads packed
    // [B, H, T, D] operands, so a contiguous buffer there saves it a second copy.
    const bool by_token =
        usable && x.device().type == DeviceType::kCpu && token_major(layout, x.size(1), x.size(2));
    operand = attention_buffer(x.shape(), by_token, x.device(), DType::kBF16);
    NoGradGuard no_grad;
    if (by_token) {
      // Copy in memory order ([B, T, heads, D]): heads and D merge into one row per token
      // (rows of heads*D elements instead of D; the copy's per-row cost dominated at D = 64).
      Tensor dst = operand.permute({0, 2, 1, 3});
      copy_(dst, x.detach().permute({0, 2, 1, 3}));
    } else {
      copy_(operand, x.detach());
    }
  }
  strides = operand_strides(operand);
  return operand;
}

// PATCHBAY_BATCH_INVARIANT_DECODE=1: one-query calls (KV-cache decoding) run the query-tile
// path, so a decoded token's attention equals its row of the full forward bit for bit
// (kernels' AttentionParams::row_invariant_decode; slower, docs/reliability.md). Read at every
// call (a getenv, against microseconds of attention), so a test or a host may set it late.
bool row_invariant_decode_requested() {
  const char* value = std::getenv("PATCHBAY_BATCH_INVARIANT_DECODE");
  return value != nullptr && value[0] == '1' && value[1] == '\0';
}

kernels::AttentionParams make_params(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse) {
  kernels::AttentionParams p;
  p.row_invariant_decode = s.q_len == 1 && row_invariant_decode_requested();
  p.batch = s.batch;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.q_len = s.q_len;
  p.kv_len = s.kv_len;
  p.head_dim = s.head_dim;
  if (q.dtype() == DType::kBF16) {
    p.q_bf16 = q.data<std::uint16_t>();
    p.k_bf16 = k.data<std::uint16_t>();
    p.v_bf16 = v.data<std::uint16_t>();
  } else {
    p.q = q.data<float>();
    p.k = k.data<float>();
    p.v = v.data<float>();
  }
  p.q_strides = to_kernel(s.q);
  p.k_strides = to_kernel(s.k);
  p.v_strides = to_kernel(s.v);
  p.out = out.data<float>();
  p.out_strides = strides_of(out);
  p.lse = lse.data<float>();
  p.scale = s.scale;
  p.causal = s.causal;
  p.window = s.window;
  p.alibi_slopes = s.slopes.empty() ? nullptr : s.slopes.data();
  p.segment_ids = s.segments.empty() ? nullptr : s.segments.data();
  return p;
}

// The kernel's scratch from the engine's caching allocator (a block reused call after call,
// instead of the kernel's own allocation, which touched fresh pages every call). Held by the
// caller until the kernel returns.
Tensor workspace_for(kernels::AttentionParams& p, kernels::AttentionPass pass, Device device) {
  const size_t bytes = kernels::attention_flash_workspace_bytes(p, pass);
  Tensor block = Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)}, DType::kF32, device);
  p.workspace = block.data_ptr();
  return block;
}

// bf16 operands the CPU's bf16 kernel cannot take (no AVX512-BF16, or packed segments): the
// engine never sends them to a CPU tensor, but a device whose kernels alias the CPU's (the
// host stand-in of CUDA, engine/host_standin_device.hpp) gets CUDA's bf16 operands; they are
// widened to f32 (exact) for the f32 kernel, with the strides of the packed copies.
bool cpu_bf16_kernel_refuses(const AttentionShape& s, const Tensor& q) {
  return q.dtype() == DType::kBF16 &&
         (!s.segments.empty() || !kernels::attention_flash_bf16_supported());
}
Tensor widened(const Tensor& x, OperandStrides& strides) {
  Tensor wide = detail::as_f32_contiguous(x);
  strides = operand_strides(wide);
  return wide;
}

void attention_cpu(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   Tensor& out, Tensor& lse);
void attention_cpu_widened(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                           const Tensor& v, Tensor& out, Tensor& lse) {
  AttentionShape s = shape;
  attention_cpu(s, widened(q, s.q), widened(k, s.k), widened(v, s.v), out, lse);
}

void attention_cpu(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   Tensor& out, Tensor& lse) {
  if (cpu_bf16_kernel_refuses(s, q)) return attention_cpu_widened(s, q, k, v, out, lse);
  kernels::AttentionParams p = make_params(s, q, k, v, out, lse);
  const Tensor workspace = workspace_for(p, kernels::AttentionPass::forward, q.device());
  std::string err = kernels::attention_flash_forward(p);
  if (!err.empty())
    throw Error(ErrorKind::kInvalidArgument, "scaled_dot_product_attention: " + err);
}

void attention_backward_cpu(const AttentionShape& s, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (cpu_bf16_kernel_refuses(s, q)) {
    AttentionShape wide = s;
    OperandStrides dout_strides;  // strides_of(dout) reads the tensor itself
    return attention_backward_cpu(wide, widened(q, wide.q), widened(k, wide.k), widened(v, wide.v),
                                  out, lse, widened(dout, dout_strides), dq, dk, dv);
  }
  kernels::AttentionParams p = make_params(s, q, k, v, out, lse);
  if (dout.dtype() == DType::kBF16) {
    p.dout_bf16 = dout.data<std::uint16_t>();
  } else {
    p.dout = dout.data<float>();
  }
  p.dout_strides = strides_of(dout);
  p.dq = dq.data<float>();
  p.dq_strides = strides_of(dq);
  p.dk = dk.data<float>();
  p.dk_strides = strides_of(dk);
  p.dv = dv.data<float>();
  p.dv_strides = strides_of(dv);
  const Tensor workspace = workspace_for(p, kernels::AttentionPass::backward, q.device());
  std::string err = kernels::attention_flash_backward(p);
  if (!err.empty())
    throw Error(ErrorKind::kInvalidArgument, "scaled_dot_product_attention backward: " + err);
}
PATCHBAY_REGISTER_KERNEL(AttentionKernel, "attention", DeviceType::kCpu, attention_cpu);
PATCHBAY_REGISTER_KERNEL(AttentionBackwardKernel, "attention_backward", DeviceType::kCpu,
                         attention_backward_cpu);

// Packed segments (AttentionOptions::segment_ids): an integer [B, Tk] tensor read once into
// the kernel's int32 row-major form (a device tensor is read back once: packed batches keep
// their ids on the host). Each device's kernel checks that rows are non-decreasing; here the
// shape, dtype and range.
std::vector<std::int32_t> segment_ids_of(const Tensor& ids, const AttentionShape& s) {
  const char* op = "scaled_dot_product_attention";
  if (ids.dim() != 2 || ids.size(0) != s.batch || ids.size(1) != s.kv_len ||
      (ids.dtype() != DType::kI32 && ids.dtype() != DType::kI64))
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": segment_ids must be an integer tensor [B, Tk] = [" +
                    std::to_string(s.batch) + ", " + std::to_string(s.kv_len) +
                    "] (one segment id per key position), found " + ids.str());
  const Tensor host = ids.device().type == DeviceType::kCpu ? ids : ids.to(cpu());
  std::vector<std::int32_t> out(static_cast<size_t>(host.numel()));
  const Tensor packed = host.contiguous();
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t value = packed.dtype() == DType::kI32 ? packed.data<std::int32_t>()[i]
                                                        : packed.data<std::int64_t>()[i];
    if (value < INT32_MIN || value > INT32_MAX)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) + ": segment_ids[" + std::to_string(i) +
                      "] = " + std::to_string(value) + " does not fit in int32");
    out[i] = static_cast<std::int32_t>(value);
  }
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
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
  if (options.window < 0)
    throw Error(ErrorKind::kInvalidArgument, std::string(op) +
                                                 ": window must be >= 0 (0 = unlimited), found " +
                                                 std::to_string(options.window));
  if (options.block_layout.defined()) {
    if (options.segment_ids.defined())
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) +
                      ": segment_ids (packed sequences) with a block layout are not implemented "
                      "(the block-sparse kernel has no segment mask); use one or the other");
    if (options.alibi_slopes.defined())
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) +
                      ": a block layout with ALiBi slopes is not implemented (the "
                      "block-sparse kernel has no bias); use one or the other");
    const double scale = options.scale.value_or(
        1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(3), 1))));
    return block_sparse_attention(q, k, v, options.causal, static_cast<float>(scale),
                                  options.window, options.block_layout, options.block_size);
  }
  AttentionShape s;
  s.batch = q.size(0);
  s.heads = q.size(1);
  s.kv_heads = k.size(1);
  s.q_len = q.size(2);
  s.kv_len = k.size(2);
  s.head_dim = q.size(3);
  s.causal = options.causal;
  s.window = options.window;
  s.scale = static_cast<float>(options.scale.value_or(
      1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.head_dim, 1)))));
  if (options.alibi_slopes.defined()) {
    const Tensor& slopes = options.alibi_slopes;
    if (slopes.dim() != 1 || slopes.size(0) != s.heads || !is_floating(slopes.dtype()))
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(op) + ": alibi_slopes must be a float tensor [H] = [" +
                      std::to_string(s.heads) + "] (one slope per query head), found " +
                      slopes.str());
    s.slopes = slopes.to_vector();
    for (size_t h = 0; h < s.slopes.size(); ++h)
      if (!std::isfinite(s.slopes[h]))
        throw Error(ErrorKind::kInvalidArgument,
                    std::string(op) + ": alibi_slopes[" + std::to_string(h) +
                        "] must be finite, found " + std::to_string(s.slopes[h]));
  }
  if (options.segment_ids.defined()) s.segments = segment_ids_of(options.segment_ids, s);
  const bool bf16 = use_bf16_kernel(q, s);
  auto operand = [bf16](const Tensor& x, OperandStrides& strides) {
    return bf16 ? bf16_kernel_operand(x, strides) : kernel_operand(x, strides);
  };
  // f32 operands, or bf16 ones for the bf16 kernel (the names say f32 for brevity).
  Tensor q32 = operand(q, s.q), k32 = operand(k, s.k), v32 = operand(v, s.v);
  Tensor out = attention_buffer(q.shape(), token_major(s.q, s.heads, s.q_len), q.device());
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
            [s, q32, k32, v32, out_saved = out.detach(), lse, dt = q.dtype(),
             bf16](const std::vector<Tensor>& g) {
              OperandStrides dout_strides;  // read in place when of the kernel's dtype
              Tensor dout = bf16 ? bf16_kernel_operand(g[0], dout_strides)
                                 : kernel_operand(g[0], dout_strides);
              // The kernel overwrites every element of dq, dk and dv (dq from zeroed per-thread
              // accumulators, dk/dv row by row from zeroed tile scratch), so they start empty;
              // only the no-work case needs the zeros.
              const bool run = out_saved.numel() > 0 && s.kv_len > 0;
              auto grad = [&](const Tensor& like, const OperandStrides& st) {  // f32
                if (!run) return zeros(like.shape(), DType::kF32, like.device());
                return attention_buffer(like.shape(), token_major(st, like.size(1), like.size(2)),
                                        like.device());
              };
              Tensor dq = grad(q32, s.q), dk = grad(k32, s.k), dv = grad(v32, s.v);
              if (run)
                find_kernel<AttentionBackwardKernel>("attention_backward", q32.device().type)(
                    s, q32, k32, v32, out_saved, lse, dout, dq, dk, dv);
              return std::vector<Tensor>{detail::from_f32(dq, dt), detail::from_f32(dk, dt),
                                         detail::from_f32(dv, dt)};
            });
  return result;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  AttentionOptions options;
  options.causal = causal;
  options.scale = scale;
  return scaled_dot_product_attention(q, k, v, options);
}

}  // namespace patchbay::engine
