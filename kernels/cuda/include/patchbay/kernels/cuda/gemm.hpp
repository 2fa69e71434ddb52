// Matrix products through cuBLASLt, row-major like the engine's tensors:
//   D[m x n] = alpha * op(A) op(B) + beta * D, op(A) [m x k], op(B) [k x n],
// batched and strided (batch_count products, operands `stride_*` elements apart), with the
// epilogues a GPT block needs fused in: bias (per output column, i.e. per feature), GELU
// (tanh approximation, GPT-2's), GELU saving its input (aux) for the backward, and the GELU
// backward (D *= gelu'(aux)) optionally with the bias gradient (column sums of the result).
// Precisions: f32 (f32 everywhere), tf32 (f32 data, TF32 tensor-core products, f32
// accumulation), bf16 (bf16 A and B, f32 accumulation, D in f32 or bf16: the CPU's mixed
// precision). Row-major is mapped onto cuBLASLt's column-major by computing D^T = op(B)^T op(A)^T.
// The caller owns the handle (cublasLtCreate) and a device workspace (32 MiB suits Hopper).
// CPU twin: gemm_reference.hpp.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "patchbay/kernels/cuda/gemm_types.hpp"

namespace patchbay::kernels::cuda {

struct GemmArguments {
  GemmPrecision precision = GemmPrecision::kF32;
  GemmOutput output = GemmOutput::kF32;
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;  // A stored [k x m] instead of [m x k]
  bool transpose_b = false;  // B stored [n x k] instead of [k x n]
  const void* a = nullptr;   // f32 or bf16 (as precision says), device
  const void* b = nullptr;
  void* d = nullptr;  // f32 or bf16 (as output says), device; read when beta != 0
  float alpha = 1.0f, beta = 0.0f;
  int64_t batch_count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements between batch items; 0: packed
  bool broadcast_a = false, broadcast_b = false;     // one A (or B) for every batch item
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  const void* bias = nullptr;     // [n], the type of D (kBias, kBiasGelu, kBiasGeluAux)
  void* aux = nullptr;            // [m x n] like D: written by kBiasGeluAux, read by kGeluBackward*
  void* bias_gradient = nullptr;  // [n], the type of D (kGeluBackwardBias)
};

// Enqueues the product on `stream`. Returns CUBLAS_STATUS_INVALID_VALUE for inconsistent
// arguments (a null operand, k < 1, an epilogue without its pointer, bf16 output without bf16
// inputs, an epilogue with batch_count > 1), CUBLAS_STATUS_NOT_SUPPORTED when cuBLASLt has no
// algorithm for the case (e.g. bf16 leading dimensions not multiples of 8), or cuBLASLt's error.
cublasStatus_t gemm(cublasLtHandle_t handle, const GemmArguments& arguments, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
