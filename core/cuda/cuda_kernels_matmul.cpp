// The CUDA dispatch entry of the engine's matmul (engine/kernel_signatures.hpp, MatmulProblem):
// cuBLASLt through kernels/cuda/gemm.hpp, one handle and a 32 MiB workspace per device, made
// on first use and kept for the process.
//   f32 x f32 -> f32: f32 products (no TF32: the CPU's numbers up to summation order);
//   bf16 x bf16 -> bf16 or f32: bf16 tensor cores, f32 accumulation (the CPU's mixed precision);
//   f32 x bf16 (decoding with bf16 weights): the bf16 operand widened (exactly) to f32 first.
// Transposes and broadcast batch operands are the GEMM's own arguments (no copies). A bf16 case
// cuBLASLt has no algorithm for (leading dimensions not multiples of 8) runs in f32 instead,
// from the same bf16 values (exact in f32), rounded once to bf16 where the output is bf16.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <initializer_list>
#include <map>
#include <mutex>
#include <string>

#include "common/error.hpp"
#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/cuda/gemm.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
using engine::kernel::MatmulProblem;
namespace kc = kernels::cuda;

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct GemmContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The handle and workspace of `device` (current), created once; never destroyed (they live
// as long as the process's CUDA context).
const GemmContext& gemm_context(int device) {
  static std::mutex mutex;
  static std::map<int, GemmContext> contexts;
  const std::lock_guard<std::mutex> lock(mutex);
  GemmContext& context = contexts[device];
  if (context.handle == nullptr) {
    if (const cublasStatus_t s = cublasLtCreate(&context.handle); s != CUBLAS_STATUS_SUCCESS)
      throw Error(ErrorKind::kInternal, "cublasLtCreate failed with status " + std::to_string(s));
    check(cudaMalloc(&context.workspace, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  }
  return context;
}

kc::GemmArguments arguments_for(const MatmulProblem& p, const Tensor& a, const Tensor& b,
                                Tensor& out) {
  kc::GemmArguments g;
  g.precision = a.dtype() == DType::kBF16 ? kc::GemmPrecision::kBf16 : kc::GemmPrecision::kF32;
  g.output = out.dtype() == DType::kBF16 ? kc::GemmOutput::kBf16 : kc::GemmOutput::kF32;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.transpose_a = p.transpose_a;
  g.transpose_b = p.transpose_b;
  g.a = a.data_ptr();
  g.b = b.data_ptr();
  g.d = out.data_ptr();
  g.batch_count = p.batch;
  g.stride_a = p.m * p.k;
  g.stride_b = p.k * p.n;
  g.stride_d = p.m * p.n;
  g.broadcast_a = p.broadcast_a;
  g.broadcast_b = p.broadcast_b;
  return g;
}

cublasStatus_t run_gemm(const MatmulProblem& p, const Tensor& a, const Tensor& b, Tensor& out,
                        cudaStream_t stream) {
  const GemmContext& context = gemm_context(out.device().index);
  return kc::gemm(context.handle, arguments_for(p, a, b, out), context.workspace, kWorkspaceBytes,
                  stream);
}

[[noreturn]] void gemm_failed(cublasStatus_t status, const Tensor& a, const Tensor& b) {
  throw Error(ErrorKind::kInternal, "matmul on cuda: cuBLASLt returned status " +
                                        std::to_string(status) + " for " + a.str() + " x " +
                                        b.str());
}

void matmul_cuda(const MatmulProblem& p, const Tensor& a, const Tensor& b_given, Tensor& out) {
  if (p.batch * p.m * p.n == 0) return;
  if (p.k == 0) {
    engine::fill_(out, 0.0);
    return;
  }
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a, &b_given, &out})
    if (!t->is_contiguous()) refuse_op("matmul", "expected contiguous operands", *t);
  const Tensor b = b_given.dtype() == a.dtype() ? b_given : b_given.to(a.dtype());
  const OnDeviceOf on(out);
  const cublasStatus_t status = run_gemm(p, a, b, out, on.stream);
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status != CUBLAS_STATUS_NOT_SUPPORTED || a.dtype() != DType::kBF16) gemm_failed(status, a, b);
  // No bf16 algorithm for this shape: the same values in f32, one rounding at the end.
  const Tensor a32 = a.to(DType::kF32), b32 = b.to(DType::kF32);
  Tensor out32 =
      out.dtype() == DType::kF32 ? out : Tensor::empty(out.shape(), DType::kF32, out.device());
  if (const cublasStatus_t s = run_gemm(p, a32, b32, out32, on.stream); s != CUBLAS_STATUS_SUCCESS)
    gemm_failed(s, a32, b32);
  if (out.dtype() != DType::kF32) engine::copy_(out, out32);
}

}  // namespace

void register_matmul_kernels() {
  engine::register_kernel<engine::kernel::MatmulKernel>("matmul", engine::DeviceType::kCuda,
                                                        matmul_cuda);
}

}  // namespace patchbay::cuda
