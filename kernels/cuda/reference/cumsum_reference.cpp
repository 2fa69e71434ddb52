// CPU twin of the cumulative sum (cumsum_reference.hpp).
#include "patchbay/kernels/cuda/cumsum_reference.hpp"

namespace patchbay::kernels::cuda {

void cumsum_f32_reference(const float* x, float* out, int64_t outer, int64_t length, int64_t inner,
                          bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0.0;
      for (int64_t step = 0; step < length; ++step) {
        const int64_t l = reverse ? length - 1 - step : step;
        const int64_t at = (o * length + l) * inner + i;
        sum += x[at];
        out[at] = static_cast<float>(sum);
      }
    }
}

}  // namespace patchbay::kernels::cuda
