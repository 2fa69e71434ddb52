// ops->attention_with_options (pb_ops_table versions 3 and 4): one attention entry whose options
// pick the computation. No block layout and no window: the fused dense kernel
// (scaled_dot_product_attention). A block layout (version 4) or a window: the block-sparse
// kernel of patchbay_kernels_cpu (kernels/cpu/block_sparse_attention.cpp), whose work and
// memory are proportional to the active tiles; a window without a layout uses an all-ones
// layout (tiles fully outside the window are skipped by the kernel's range test). The forward
// saves out and the row log-sum-exp; the backward is the kernel's own, so no Tq x Tk tensor
// exists in either pass. ALiBi slopes are not implemented by this file (the version-3 change
// that defines them owns that path): a clear UNSUPPORTED status.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "engine/dispatch.hpp"
#include "engine/ops.hpp"
#include "engine/ops/op_helpers.hpp"
#include "engine/ops_table.hpp"
#ifdef PATCHBAY_KERNELS_CPU_AVAILABLE
#include "patchbay/kernels/block_sparse_attention.hpp"
#endif

namespace patchbay::engine {

pb_status* ops_table_status(pb_status_code code, const std::string& message);

namespace {

// A request this build cannot serve (mapped to PB_STATUS_UNSUPPORTED).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#ifdef PATCHBAY_KERNELS_CPU_AVAILABLE
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

Tensor block_sparse_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                              float scale, int64_t window, const Tensor& layout_in,
                              int64_t block_size) {
  const char* op = "attention_with_options (block-sparse)";
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
#endif

Tensor attention_with_options(const Tensor& q, const Tensor& k, const Tensor& v,
                              const pb_attention_options& o_in) {
  // Fields the caller's (older, shorter) struct lacks read as zero.
  pb_attention_options o{};
  std::memcpy(&o, &o_in, std::min(o_in.struct_size, sizeof(o)));
  if (o.alibi_slopes != nullptr)
    throw Unsupported(
        "attention_with_options: alibi_slopes are not implemented in this engine build; "
        "pass NULL or use a build with the ALiBi path");
  const double scale =
      o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(3), 1)));
  if (o.window < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "attention_with_options: window must be >= 0 (0 = unlimited), found " +
                    std::to_string(o.window));
  if (o.block_layout == nullptr && o.window == 0)
    return scaled_dot_product_attention(q, k, v, o.causal != 0, scale);
  detail::check_same(q, k, "attention_with_options");
  detail::check_same(q, v, "attention_with_options");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.shape() != v.shape() ||
      q.size(0) != k.size(0) || q.size(3) != k.size(3) || k.size(1) == 0 ||
      q.size(1) % k.size(1) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "attention_with_options: expected q [B,H,Tq,D], k and v [B,Hkv,Tk,D] with H a "
                "multiple of Hkv, found " +
                    q.str() + ", " + k.str() + ", " + v.str());
#ifdef PATCHBAY_KERNELS_CPU_AVAILABLE
  if (q.device().type != DeviceType::kCpu)
    throw Unsupported(
        "attention_with_options: block-sparse and windowed attention run on the CPU only");
  if (o.block_layout != nullptr)
    return block_sparse_attention(q, k, v, o.causal != 0, static_cast<float>(scale), o.window,
                                  ops_table_tensor(o.block_layout), o.block_size);
  // A window alone: every tile allowed, the kernel's range test skips those outside it.
  const int64_t bs = 64, blocks = kernels::block_sparse_layout_blocks(k.size(2), bs);
  Tensor ones = full({q.size(1), blocks, blocks}, 1.0, DType::kI32, q.device());
  return block_sparse_attention(q, k, v, o.causal != 0, static_cast<float>(scale), o.window, ones,
                                bs);
#else
  throw Unsupported(
      "attention_with_options: block-sparse/windowed attention needs patchbay_kernels_cpu");
#endif
}

pb_status* attention_with_options_fn(const pb_tensor* q, const pb_tensor* k, const pb_tensor* v,
                                     const pb_attention_options* options, pb_tensor** out) {
  try {
    if (!q || !k || !v || !options || !out)
      return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                              "attention_with_options: q, k, v, options and out must not be NULL");
    if (options->struct_size < offsetof(pb_attention_options, block_layout))
      return ops_table_status(PB_STATUS_INVALID_ARGUMENT,
                              "attention_with_options: options.struct_size is " +
                                  std::to_string(options->struct_size) +
                                  "; set it to sizeof(pb_attention_options)");
    Tensor t = attention_with_options(ops_table_tensor(q), ops_table_tensor(k), ops_table_tensor(v),
                                      *options);
    *out = ops_table_wrap(std::move(t));
    return nullptr;
  } catch (const Unsupported& e) {
    return ops_table_status(PB_STATUS_UNSUPPORTED, e.what());
  } catch (const Error& e) {
    return ops_table_status(PB_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return ops_table_status(PB_STATUS_OUT_OF_MEMORY, "attention_with_options: out of memory");
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_INTERNAL, std::string("attention_with_options: ") + e.what());
  }
}

}  // namespace

void fill_attention_options_entries(pb_ops_table& t) {
  t.attention_with_options = attention_with_options_fn;
}

}  // namespace patchbay::engine
