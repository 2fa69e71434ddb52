// CPU twin of the cuBLASLt products (gemm_reference.hpp): triple loop in double.
#include "patchbay/kernels/cuda/gemm_reference.hpp"

#include <vector>

#include "patchbay/kernels/cuda/math/gelu.hpp"

namespace patchbay::kernels::cuda {

void gemm_reference(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                    const float* a, const float* b, float* d, float alpha, float beta,
                    GemmEpilogue epilogue, const float* bias, float* aux, float* bias_gradient) {
  std::vector<double> column_sums(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double a_ip = transpose_a ? a[p * m + i] : a[i * k + p];
        const double b_pj = transpose_b ? b[j * k + p] : b[p * n + j];
        sum += a_ip * b_pj;
      }
      double value = double(alpha) * sum + (beta != 0.0f ? double(beta) * d[i * n + j] : 0.0);
      switch (epilogue) {
        case GemmEpilogue::kBias:
          value += bias[j];
          break;
        case GemmEpilogue::kGelu:
          value = math::gelu_tanh(value);
          break;
        case GemmEpilogue::kBiasGelu:
          value = math::gelu_tanh(value + bias[j]);
          break;
        case GemmEpilogue::kBiasGeluAux:
          aux[i * n + j] = static_cast<float>(value + bias[j]);
          value = math::gelu_tanh(value + bias[j]);
          break;
        case GemmEpilogue::kGeluBackward:
        case GemmEpilogue::kGeluBackwardBias:
          value *= math::gelu_tanh_derivative(double(aux[i * n + j]));
          column_sums[size_t(j)] += value;
          break;
        default:
          break;
      }
      d[i * n + j] = static_cast<float>(value);
    }
  if (epilogue == GemmEpilogue::kGeluBackwardBias)
    for (int64_t j = 0; j < n; ++j) bias_gradient[j] = static_cast<float>(column_sums[size_t(j)]);
}

}  // namespace patchbay::kernels::cuda
