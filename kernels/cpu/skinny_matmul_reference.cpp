// Plain reference of the skinny matmul (see patchbay/kernels/skinny_matmul.hpp): the sums in
// double, one thread, in index order; bf16 weights widened the same exact way; the epilogue
// in double with std::tanh.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "patchbay/kernels/skinny_matmul.hpp"

namespace patchbay::kernels {

std::string skinny_matmul_reference(const SkinnyMatmulParams& p) {
  std::string error = skinny_matmul_error(p);
  if (!error.empty()) return error;
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double sum = 0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        const std::int64_t at = j * p.w_row_stride + q;
        float w;
        if (p.w_type == SkinnyWeightType::kF32) {
          w = static_cast<const float*>(p.w)[at];
        } else {
          const std::uint32_t bits =
              static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(p.w)[at]) << 16;
          std::memcpy(&w, &bits, sizeof w);
        }
        sum += static_cast<double>(p.x[i * p.x_row_stride + q]) * static_cast<double>(w);
      }
      if (p.bias != nullptr) sum += static_cast<double>(p.bias[j]);
      if (p.activation == SkinnyActivation::kRelu) sum = std::max(sum, 0.0);
      if (p.activation == SkinnyActivation::kGeluTanh) {
        const double u = std::sqrt(2.0 / M_PI) * (sum + 0.044715 * sum * sum * sum);
        sum = 0.5 * sum * (1.0 + std::tanh(u));
      }
      p.y[i * p.y_row_stride + j] = static_cast<float>(sum);
    }
  }
  return {};
}

}  // namespace patchbay::kernels
