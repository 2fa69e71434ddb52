// matmul / batched matmul with transposes and broadcast batch dims. CPU kernel: oneDNN
// (transposes and broadcast operands expressed through strides, no copies), with an OpenMP
// loop fallback in builds without patchbay_onednn. bf16 x bf16 -> bf16 with f32
// accumulation (AMX where present); f16 is widened to f32.
// f32 x bf16 (either order; decoding with bf16 weights) -> f32: the bf16 operand's values
// are exact in f32, so this is the f32 product of the same numbers, accumulated in f32.
// f32 x [rows, k] @ W^T with W stored [n, k] (a linear layer's weight; f32 or bf16) runs the
// skinny matmul kernel (kernels/cpu; bandwidth-bound at decoding's few rows, reads bf16 W as
// it is) whenever the product is to be row-invariant, whatever the number of rows: its sums
// have one order per machine, so a row's result never depends on the rows beside it (batch
// invariance: a token decoded alone equals its row of a full forward; an MoE expert's rows do
// not depend on how many tokens the router sent it). oneDNN's f32 GEMM is not row-invariant
// (docs/reliability.md, "Batch-invariant numerics"), but it is faster at training shapes, so
// the policy of batch_invariance.hpp (PATCHBAY_BATCH_INVARIANCE) chooses: by default
// row-invariant unless the product records a gradient (eval, generate, decoding, no_grad
// forwards); products that record one (training) take the kernel up to 4 rows and oneDNN
// above (or a plain loop below 32k multiply-adds); "always" makes training products
// row-invariant too (bit-exact causality of an MoE while training; slower steps), "off"
// restores the former split everywhere.
// Other mixed shapes widen the bf16 operand first.
// Under a bf16 autocast policy (engine/autocast.hpp) f32 x f32 runs as bf16 x bf16 -> f32
// (weights' bf16 copies cached per scope) and so does its backward; the gradients stay f32.
//
// Backward, with op(X) = X or X^T as stored:  C = op(A) op(B)
//   d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC, transposed back when the operand was
//   stored transposed, then summed over broadcast batch dims.
#include <cstdlib>
#include <optional>
#include <string>

#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/batch_invariance.hpp"
#include "engine/ops/low_rank_adapter_internal.hpp"
#include "engine/ops/op_helpers.hpp"
#include "onednn/onednn_ops.hpp"
#include "patchbay/kernels/skinny_matmul.hpp"

namespace patchbay::engine {
namespace {

using kernel::MatmulKernel;
using kernel::MatmulProblem;

// x [rows, k] f32 @ W^T with W [n, k] f32 or bf16: any rows when p.row_invariant, else at
// most kSkinnyMaxRows (see the file comment). Rows of A stack densely when A is [1, m, k] or
// [batch, m, k] against one broadcast W.
bool run_skinny_matmul(const MatmulProblem& p, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t rows = p.broadcast_b ? p.batch * p.m : p.m;
  if (!p.transpose_b || p.transpose_a || (p.batch != 1 && !p.broadcast_b) || p.broadcast_a ||
      (!p.row_invariant && rows > kernels::kSkinnyMaxRows) || a.dtype() != DType::kF32 ||
      out.dtype() != DType::kF32 || (b.dtype() != DType::kF32 && b.dtype() != DType::kBF16)) {
    return false;
  }
  kernels::SkinnyMatmulParams params;
  params.x = a.data<float>();
  params.x_row_stride = p.k;
  params.w = b.data_ptr();
  params.w_type = b.dtype() == DType::kBF16 ? kernels::SkinnyWeightType::kBF16
                                            : kernels::SkinnyWeightType::kF32;
  params.w_row_stride = p.k;
  params.y = out.data<float>();
  params.y_row_stride = p.n;
  params.m = rows;
  params.n = p.n;
  params.k = p.k;
  const std::string error = kernels::skinny_matmul(params);
  if (!error.empty()) throw Error(ErrorKind::kInternal, "matmul: " + error);
  return true;
}

void matmul_cpu(const MatmulProblem& p, const Tensor& a, const Tensor& b_given, Tensor& out) {
  if (p.batch * p.m * p.n == 0) return;
  if (p.k == 0) {
    fill_(out, 0.0);
    return;
  }
  if (run_skinny_matmul(p, a, b_given, out)) return;
  // Mixed f32 x bf16 outside the skinny shapes: widen B (exact) and multiply in f32.
  const Tensor b = b_given.dtype() == a.dtype() ? b_given : b_given.to(a.dtype());
  // Strides of op(A) as [m, k] and op(B) as [k, n] over the stored row-major matrices.
  const int64_t a_row = p.transpose_a ? 1 : p.k, a_col = p.transpose_a ? p.m : 1;
  const int64_t b_row = p.transpose_b ? 1 : p.n, b_col = p.transpose_b ? p.k : 1;
  const int64_t a_batch = p.broadcast_a ? 0 : p.m * p.k, b_batch = p.broadcast_b ? 0 : p.k * p.n;
  // Tiny f32 products (below ~32k multiply-adds) run the loop: a oneDNN call costs more.
  if (a.dtype() != DType::kF32 || p.batch * p.m * p.n * p.k >= 32768) {
    onednn::MatmulArgs args;
    const onednn::DType dt = a.dtype() == DType::kBF16 ? onednn::DType::kBF16 : onednn::DType::kF32;
    args.batch = p.batch;
    args.m = p.m;
    args.n = p.n;
    args.k = p.k;
    args.a = {a.data_ptr(), dt, a_batch, a_row, a_col};
    args.b = {b.data_ptr(), dt, b_batch, b_row, b_col};
    const onednn::DType out_dt =
        out.dtype() == DType::kBF16 ? onednn::DType::kBF16 : onednn::DType::kF32;
    args.c = {out.data_ptr(), out_dt, p.m * p.n, p.n, 1};
    onednn::matmul(args);
    return;
  }
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
#pragma omp parallel for collapse(2) schedule(static) if (p.batch * p.m * p.n * p.k >= 32768)
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t i = 0; i < p.m; ++i) {
      float* crow = pc + (bi * p.m + i) * p.n;
      for (int64_t j = 0; j < p.n; ++j) crow[j] = 0.0f;
      for (int64_t q = 0; q < p.k; ++q) {
        float av = pa[bi * a_batch + i * a_row + q * a_col];
        const float* brow = pb + bi * b_batch + q * b_row;
        for (int64_t j = 0; j < p.n; ++j) crow[j] += av * brow[j * b_col];
      }
    }
}
PATCHBAY_REGISTER_KERNEL(MatmulKernel, "matmul", DeviceType::kCpu, matmul_cpu);

Shape batch_dims(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

// x expanded to batch + its matrix dims, as contiguous [batch or 1, rows, cols].
Tensor batched_operand(const Tensor& x, const Shape& batch, bool* broadcast) {
  Shape matrix(x.shape().end() - 2, x.shape().end());
  *broadcast = shape_numel(batch_dims(x)) == 1 && shape_numel(batch) != 1;
  if (*broadcast) return x.reshape({1, matrix[0], matrix[1]}).contiguous();
  Shape full = batch;
  full.insert(full.end(), matrix.begin(), matrix.end());
  return x.expand(full).contiguous().reshape({shape_numel(batch), matrix[0], matrix[1]});
}

// f32 with bf16 (either way round) is the one mix matmul takes (see the file comment).
bool is_f32_bf16_mix(const Tensor& a, const Tensor& b) {
  return (a.dtype() == DType::kF32 && b.dtype() == DType::kBF16) ||
         (a.dtype() == DType::kBF16 && b.dtype() == DType::kF32);
}

// Checks the operands and fills p's sizes and transposes (batch is set by the caller).
MatmulProblem matmul_problem(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  if (a.defined() && b.defined() && is_f32_bf16_mix(a, b)) {
    if (a.device() != b.device())
      throw Error(ErrorKind::kInvalidArgument,
                  "matmul: operands on different devices, found " + a.str() + " and " + b.str());
  } else {
    detail::check_same(a, b, "matmul");
  }
  if (a.dim() < 2 || b.dim() < 2)
    throw Error(ErrorKind::kInvalidArgument, "matmul: expected operands with >= 2 dims, found " +
                                                 a.str() + " and " + b.str() +
                                                 "; unsqueeze vectors first");
  MatmulProblem p;
  p.transpose_a = transpose_a;
  p.transpose_b = transpose_b;
  p.m = a.size(transpose_a ? -1 : -2);
  p.k = a.size(transpose_a ? -2 : -1);
  const int64_t kb = b.size(transpose_b ? -1 : -2);
  p.n = b.size(transpose_b ? -2 : -1);
  if (kb != p.k)
    throw Error(ErrorKind::kInvalidArgument, "matmul: inner dims differ (" + std::to_string(p.k) +
                                                 " vs " + std::to_string(kb) + ") for " + a.str() +
                                                 (transpose_a ? "^T" : "") + " @ " + b.str() +
                                                 (transpose_b ? "^T" : ""));
  return p;
}

// bf16 a x bf16 b -> f32 (f32 accumulation), detached operands, no autograd: the GEMM of the
// autocast path, forward and backward.
Tensor bf16_matmul_f32_out(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  MatmulProblem p = matmul_problem(a, b, transpose_a, transpose_b);
  if (!transpose_a && a.dim() > 2 && b.dim() == 2 && a.numel() > 0) {  // stacked rows: one GEMM
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(p.n);
    return bf16_matmul_f32_out(a.reshape({a.numel() / p.k, p.k}), b, false, transpose_b)
        .reshape(out_shape);
  }
  Shape batch = broadcast_shapes(batch_dims(a), batch_dims(b));
  p.batch = shape_numel(batch);
  NoGradGuard no_grad;
  Tensor a_c = batched_operand(a, batch, &p.broadcast_a);
  Tensor b_c = batched_operand(b, batch, &p.broadcast_b);
  Shape out_shape = batch;
  out_shape.push_back(p.m);
  out_shape.push_back(p.n);
  Tensor out = Tensor::empty(out_shape, DType::kF32, a.device());
  find_kernel<MatmulKernel>("matmul", a.device().type)(p, a_c, b_c, out);
  return out;
}

// matmul of two f32 operands under the bf16 autocast policy: bf16 copies in, f32 out; the
// backward rounds dC to bf16 and returns f32 gradients to a and b.
Tensor autocast_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const Tensor a16 = autocast_bf16_operand(a), b16 = autocast_bf16_operand(b);
  Tensor out = bf16_matmul_f32_out(a16, b16, transpose_a, transpose_b);
  record_op("matmul", {a, b}, {&out},
            [a16, b16, transpose_a, transpose_b, need_a = a.requires_grad(),
             need_b = b.requires_grad()](const std::vector<Tensor>& g) {
              const Tensor dc = autocast_bf16_operand(g[0]);  // a gradient: never a cached leaf
              Tensor da, db;  // only for operands that require grad (a frozen weight: no dW)
              if (need_a)
                da = sum_to_shape(transpose_a ? bf16_matmul_f32_out(b16, dc, transpose_b, true)
                                              : bf16_matmul_f32_out(dc, b16, false, !transpose_b),
                                  a16.shape());
              if (need_b)
                db = sum_to_shape(transpose_b ? bf16_matmul_f32_out(dc, a16, true, transpose_a)
                                              : bf16_matmul_f32_out(a16, dc, !transpose_a, false),
                                  b16.shape());
              return std::vector<Tensor>{da, db};
            });
  return out;
}

}  // namespace

// Low-rank adapters (engine/low_rank_adapter.hpp) on either operand's storage: the adapted
// product (ops/low_rank_adapter.cpp); otherwise the plain one.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  if (detail::low_rank_adapters_present())
    if (std::optional<Tensor> y = detail::adapted_matmul(a, b, transpose_a, transpose_b)) return *y;
  return detail::matmul_plain(a, b, transpose_a, transpose_b);
}

Tensor detail::matmul_plain(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  MatmulProblem p = matmul_problem(a, b, transpose_a, transpose_b);
  const bool mixed = is_f32_bf16_mix(a, b);
  // A stack of row-major matrices times one matrix ([..., m, k] x [k, n], e.g. a linear layer
  // on [B, T, C]) is one GEMM over the stacked rows: [rows, k] x [k, n]. Besides a bigger GEMM,
  // its backward then gives the weight's gradient as one [k, n] GEMM instead of a [batch, k, n]
  // stack reduced by sum_to_shape.
  if (!transpose_a && a.dim() > 2 && b.dim() == 2 && a.numel() > 0) {
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(p.n);
    return matmul_plain(a.reshape({a.numel() / p.k, p.k}), b, false, transpose_b)
        .reshape(out_shape);
  }
  if (autocast_dtype() == DType::kBF16 && a.dtype() == DType::kF32 && b.dtype() == DType::kF32 &&
      a.device().type == DeviceType::kCpu)
    return autocast_matmul(a, b, transpose_a, transpose_b);
  Shape batch = broadcast_shapes(batch_dims(a), batch_dims(b));
  p.batch = shape_numel(batch);
  // bf16 runs natively in oneDNN; f16 is computed in f32. A mix computes in f32, B keeping
  // its bf16 (the kernel reads or widens it).
  const DType compute = a.dtype() == DType::kBF16 && !mixed ? DType::kBF16 : DType::kF32;
  Tensor a_c, b_c;
  {
    NoGradGuard no_grad;
    a_c = batched_operand(a.detach().to(compute), batch, &p.broadcast_a);
    b_c = batched_operand(mixed ? b.detach() : b.detach().to(compute), batch, &p.broadcast_b);
  }
  Shape out_shape = batch;
  out_shape.push_back(p.m);
  out_shape.push_back(p.n);
  Tensor out = Tensor::empty(out_shape, compute, a.device());
  p.row_invariant = batch_invariance_wanted(grad_enabled() && any_requires_grad({a, b}));
  find_kernel<MatmulKernel>("matmul", a.device().type)(p, a_c, b_c, out);
  if (out.dtype() != a.dtype() && !mixed) {
    NoGradGuard no_grad;
    out = out.to(a.dtype());
  }
  // Backward: a gradient only for an operand that requires one (a frozen weight gets no dW).
  record_op("matmul", {a, b}, {&out},
            [a_s = a.detach(), b_s = b.detach(), transpose_a, transpose_b,
             need_a = a.requires_grad(), need_b = b.requires_grad()](const std::vector<Tensor>& g) {
              const Tensor& dc = g[0];
              Tensor da, db;
              // Each gradient in its operand's dtype (they differ for an f32 x bf16 mix).
              if (need_a)
                da = sum_to_shape(transpose_a ? matmul_plain(b_s, dc, transpose_b, true)
                                              : matmul_plain(dc, b_s, false, !transpose_b),
                                  a_s.shape())
                         .to(a_s.dtype());
              if (need_b)
                db = sum_to_shape(transpose_b ? matmul_plain(dc, a_s, true, transpose_a)
                                              : matmul_plain(a_s, dc, !transpose_a, false),
                                  b_s.shape())
                         .to(b_s.dtype());
              return std::vector<Tensor>{da, db};
            });
  return out;
}

bool batch_invariance_wanted(bool records_gradient) {
  const char* value = std::getenv("PATCHBAY_BATCH_INVARIANCE");
  const std::string mode = value != nullptr ? value : "";
  if (mode == "off") return false;
  if (mode == "always") return true;
  return !records_gradient;
}

}  // namespace patchbay::engine
