// cuBLASLt matrix products (gemm.hpp). Host code only (compiled by the host compiler). The
// descriptors are made per call (microseconds; they carry this call's bias and aux pointers);
// the algorithm cuBLASLt's heuristic picks is cached per handle and problem (shape, types,
// transposes, batch, epilogue, workspace), since the heuristic query costs tens of
// microseconds and a GPT-2 step makes about a hundred products. The cache is guarded by a
// mutex, so gemm() may be called from several threads (each with its own stream).
#include "patchbay/kernels/cuda/gemm.hpp"

#include <map>
#include <mutex>
#include <tuple>

namespace patchbay::kernels::cuda {
namespace {

#define RETURN_IF_FAILED(expression)                      \
  do {                                                    \
    const cublasStatus_t status_ = (expression);          \
    if (status_ != CUBLAS_STATUS_SUCCESS) return status_; \
  } while (false)

struct Descriptors {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (operation != nullptr) cublasLtMatmulDescDestroy(operation);
  }
};

bool epilogue_has_bias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasGelu ||
         e == GemmEpilogue::kBiasGeluAux;
}
bool epilogue_has_aux(GemmEpilogue e) {
  return e == GemmEpilogue::kBiasGeluAux || e == GemmEpilogue::kGeluBackward ||
         e == GemmEpilogue::kGeluBackwardBias;
}

cublasLtEpilogue_t to_cublas(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kGelu:
      return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kBiasGeluAux:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GemmEpilogue::kGeluBackward:
      return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::kGeluBackwardBias:
      return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

bool arguments_valid(const GemmArguments& g) {
  if (g.a == nullptr || g.b == nullptr || g.d == nullptr) return false;
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.batch_count < 1) return false;
  if (g.output == GemmOutput::kBf16 && g.precision != GemmPrecision::kBf16) return false;
  if (g.epilogue != GemmEpilogue::kNone && g.batch_count != 1) return false;
  if (epilogue_has_bias(g.epilogue) && g.bias == nullptr) return false;
  if (epilogue_has_aux(g.epilogue) && g.aux == nullptr) return false;
  if (g.epilogue == GemmEpilogue::kGeluBackwardBias && g.bias_gradient == nullptr) return false;
  return true;
}

template <class T>
cublasStatus_t set(cublasLtMatmulDesc_t operation, cublasLtMatmulDescAttributes_t attribute,
                   const T& value) {
  return cublasLtMatmulDescSetAttribute(operation, attribute, &value, sizeof value);
}

// A column-major layout of rows x cols with leading dimension ld, batched.
cublasStatus_t make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows,
                           int64_t cols, int64_t ld, int64_t batch_count, int64_t stride) {
  RETURN_IF_FAILED(cublasLtMatrixLayoutCreate(layout, type, uint64_t(rows), uint64_t(cols), ld));
  if (batch_count > 1) {
    const int32_t count = static_cast<int32_t>(batch_count);
    RETURN_IF_FAILED(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof count));
    RETURN_IF_FAILED(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t set_epilogue(cublasLtMatmulDesc_t operation, const GemmArguments& g, int64_t ld_d) {
  if (g.epilogue == GemmEpilogue::kNone) return CUBLAS_STATUS_SUCCESS;
  RETURN_IF_FAILED(set(operation, CUBLASLT_MATMUL_DESC_EPILOGUE, to_cublas(g.epilogue)));
  if (epilogue_has_bias(g.epilogue))
    RETURN_IF_FAILED(set(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias));
  if (g.epilogue == GemmEpilogue::kGeluBackwardBias)
    RETURN_IF_FAILED(set(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias_gradient));
  if (epilogue_has_aux(g.epilogue)) {
    RETURN_IF_FAILED(set(operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux));
    RETURN_IF_FAILED(set(operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld_d));
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Everything the heuristic's choice depends on (pointers aside).
using AlgorithmKey = std::tuple<cublasLtHandle_t, int, int, int64_t, int64_t, int64_t, bool, bool,
                                int64_t, int64_t, int64_t, int64_t, int, size_t>;

AlgorithmKey key_of(cublasLtHandle_t handle, const GemmArguments& g, int64_t stride_a,
                    int64_t stride_b, int64_t stride_d, size_t workspace_bytes) {
  return {handle,          int(g.precision), int(g.output), g.m,      g.n,      g.k,
          g.transpose_a,   g.transpose_b,    g.batch_count, stride_a, stride_b, stride_d,
          int(g.epilogue), workspace_bytes};
}

std::mutex& cache_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<AlgorithmKey, cublasLtMatmulAlgo_t>& algorithm_cache() {
  static std::map<AlgorithmKey, cublasLtMatmulAlgo_t> cache;
  return cache;
}

}  // namespace

cublasStatus_t gemm(cublasLtHandle_t handle, const GemmArguments& g, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream) {
  if (!arguments_valid(g)) return CUBLAS_STATUS_INVALID_VALUE;
  const cudaDataType_t input_type = g.precision == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t output_type = g.output == GemmOutput::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      g.precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major view: D^T [n x m] = op(B)^T [n x k] * op(A)^T [k x m]. The first operand is
  // B as stored: row-major [k x n] is column-major [n x k] (no transpose); row-major [n x k]
  // (transpose_b) is column-major [k x n], transposed. Likewise A for the second operand.
  const cublasOperation_t first_op = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t first_rows = g.transpose_b ? g.k : g.n, first_cols = g.transpose_b ? g.n : g.k;
  const int64_t second_rows = g.transpose_a ? g.m : g.k, second_cols = g.transpose_a ? g.k : g.m;
  const int64_t stride_b = g.broadcast_b ? 0 : g.stride_b != 0 ? g.stride_b : g.k * g.n;
  const int64_t stride_a = g.broadcast_a ? 0 : g.stride_a != 0 ? g.stride_a : g.m * g.k;
  const int64_t stride_d = g.stride_d != 0 ? g.stride_d : g.m * g.n;

  Descriptors s;
  RETURN_IF_FAILED(cublasLtMatmulDescCreate(&s.operation, compute, CUDA_R_32F));
  RETURN_IF_FAILED(set(s.operation, CUBLASLT_MATMUL_DESC_TRANSA, first_op));
  RETURN_IF_FAILED(set(s.operation, CUBLASLT_MATMUL_DESC_TRANSB, second_op));
  RETURN_IF_FAILED(set_epilogue(s.operation, g, g.n));
  RETURN_IF_FAILED(
      make_layout(&s.a, input_type, first_rows, first_cols, first_rows, g.batch_count, stride_b));
  RETURN_IF_FAILED(make_layout(&s.b, input_type, second_rows, second_cols, second_rows,
                               g.batch_count, stride_a));
  RETURN_IF_FAILED(make_layout(&s.d, output_type, g.n, g.m, g.n, g.batch_count, stride_d));

  RETURN_IF_FAILED(cublasLtMatmulPreferenceCreate(&s.preference));
  RETURN_IF_FAILED(cublasLtMatmulPreferenceSetAttribute(s.preference,
                                                        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  RETURN_IF_FAILED(cublasLtMatmulAlgoGetHeuristic(handle, s.operation, s.a, s.b, s.d, s.d,
                                                  s.preference, 1, &heuristic, &found));
  if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  return cublasLtMatmul(handle, s.operation, &g.alpha, g.b, s.a, g.a, s.b, &g.beta, g.d, s.d, g.d,
                        s.d, &heuristic.algo, workspace, workspace_bytes, stream);
}

}  // namespace patchbay::kernels::cuda
