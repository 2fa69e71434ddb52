// The block-sparse path of the engine's attention (ops table version 4: a block layout in
// pb_attention_options; engine::AttentionOptions::block_layout): the kernel of
// patchbay_kernels_cpu (kernels/cpu/block_sparse_attention.cpp) computes only the tiles the
// layout marks, so work and memory are proportional to the active tiles. The forward saves
// out and the row log-sum-exp; the backward is the kernel's own, so no Tq x Tk tensor exists
// in either pass. scaled_dot_product_attention (ops/attention.cpp) routes here.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "common/error.hpp"
#include "engine/dispatch.hpp"
#include "engine/ops.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/block_sparse_attention.hpp"

namespace patchbay::engine {
namespace {

// q/out/dout/dq [B,H,Tq,D], k/v/dk/dv [B,Hkv,Tk,D], lse [B,H,Tq], layout int32 [H,nb,nb]:
// all contiguous (f32 apart from the layout).
kernels::BlockSparseParams block_sparse_params(const Tensor& q, const Tensor& k, const Tensor& v,
                                               const Tensor& out, const Tensor& lse,
                                               const Tensor& layout, bool causal, float scale,
                                               int64_t window, int64_t block_size) {
  kernels::BlockSparseParams p;
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.kv_heads = k.size(1);
  p.q_len = q.size(2);
  p.kv_len = k.size(2);
  p.head_dim = q.size(3);
  p.q = q.data<float>();
  p.k = k.data<float>();
  p.v = v.data<float>();
  p.out = out.data<float>();
  p.lse = lse.data<float>();
  p.scale = scale;
  p.causal = causal;
  p.window = window;
  p.layout = layout.data<int32_t>();
  p.block_size = block_size;
  return p;
}

}  // namespace

Tensor block_sparse_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                              float scale, int64_t window, const Tensor& layout_in,
                              int64_t block_size) {
  const char* op = "attention_with_options (block-sparse)";
  if (q.device().type != DeviceType::kCpu)
    throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": block-sparse attention runs on the CPU only");
  const int64_t heads = q.size(1), kv_len = k.size(2);
  const int64_t blocks = kernels::block_sparse_layout_blocks(kv_len, block_size);
  if (block_size < 1)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": block_size must be >= 1 with a block layout, found " +
                    std::to_string(block_size));
  const Shape want{heads, blocks, blocks};
  if (layout_in.shape() != want)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": block_layout must be [H, ceil(Tk/bs), ceil(Tk/bs)] = [" +
                    std::to_string(heads) + ", " + std::to_string(blocks) + ", " +
                    std::to_string(blocks) + "], found " + layout_in.str() +
                    "; build it for the key length");
  if (layout_in.dtype() != DType::kI32 && layout_in.dtype() != DType::kI64)
    throw Error(
        ErrorKind::kInvalidArgument,
        std::string(op) + ": block_layout must be int32 (or int64), found " + layout_in.str());
  if (q.size(2) > kv_len)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(op) + ": block layouts need Tq <= Tk, found Tq " +
                    std::to_string(q.size(2)) + " > Tk " + std::to_string(kv_len));
  Tensor layout = layout_in.detach().to(DType::kI32).contiguous();
  Tensor q32 = detail::as_f32_contiguous(q), k32 = detail::as_f32_contiguous(k),
         v32 = detail::as_f32_contiguous(v);
  Tensor out = Tensor::empty(q.shape(), DType::kF32, q.device());
  Tensor lse = Tensor::empty({q.size(0), heads, q.size(2)}, DType::kF32, q.device());
  if (out.numel() > 0) {
    kernels::BlockSparseParams p =
        block_sparse_params(q32, k32, v32, out, lse, layout, causal, scale, window, block_size);
    if (std::string err = kernels::block_sparse_attention_forward(p); !err.empty())
      throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": " + err);
  }
  Tensor result = detail::from_f32(out, q.dtype());
  record_op("block_sparse_attention", {q, k, v}, {&result},
            [q32, k32, v32, out_saved = out.detach(), lse, layout, causal, scale, window,
             block_size, dt = q.dtype()](const std::vector<Tensor>& g) {
              Tensor dout = detail::as_f32_contiguous(g[0]);
              Tensor dq = Tensor::empty(q32.shape(), DType::kF32, q32.device());
              Tensor dk = Tensor::empty(k32.shape(), DType::kF32, q32.device());
              Tensor dv = Tensor::empty(v32.shape(), DType::kF32, q32.device());
              if (out_saved.numel() > 0) {
                kernels::BlockSparseParams p = block_sparse_params(
                    q32, k32, v32, out_saved, lse, layout, causal, scale, window, block_size);
                p.dout = dout.data<float>();
                p.dq = dq.data<float>();
                p.dk = dk.data<float>();
                p.dv = dv.data<float>();
                if (std::string err = kernels::block_sparse_attention_backward(p); !err.empty())
                  throw Error(ErrorKind::kInvalidArgument,
                              "block_sparse_attention backward: " + err);
              } else {
                fill_(dk, 0.0);
                fill_(dv, 0.0);
              }
              return std::vector<Tensor>{detail::from_f32(dq, dt), detail::from_f32(dk, dt),
                                         detail::from_f32(dv, dt)};
            });
  return result;
}

}  // namespace patchbay::engine
