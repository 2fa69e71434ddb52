// Plain reference of the skinny matmul (see patchbay/kernels/skinny_matmul.hpp): the sums in
// double, one thread, in index order; bf16 weights widened the same exact way.
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
      p.y[i * p.y_row_stride + j] = static_cast<float>(sum);
    }
  }
  return {};
}

}  // namespace patchbay::kernels
