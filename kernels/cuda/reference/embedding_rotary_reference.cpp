// CPU twins of the embedding and rotary kernels (embedding_rotary_reference.hpp).
#include "patchbay/kernels/cuda/embedding_rotary_reference.hpp"

#include <cmath>
#include <limits>

namespace patchbay::kernels::cuda {

template <class Index>
void embedding_forward_reference(const Index* ids, const float* weight, float* out, int64_t count,
                                 int64_t vocab, int64_t dim) {
  for (int64_t n = 0; n < count; ++n) {
    const bool valid = ids[n] >= 0 && int64_t(ids[n]) < vocab;
    for (int64_t c = 0; c < dim; ++c)
      out[n * dim + c] =
          valid ? weight[int64_t(ids[n]) * dim + c] : std::numeric_limits<float>::quiet_NaN();
  }
}

template <class Index>
void embedding_backward_reference(const Index* ids, const float* dout, float* dweight,
                                  int64_t count, int64_t vocab, int64_t dim) {
  for (int64_t n = 0; n < count; ++n) {
    if (ids[n] < 0 || int64_t(ids[n]) >= vocab) continue;
    for (int64_t c = 0; c < dim; ++c) dweight[int64_t(ids[n]) * dim + c] += dout[n * dim + c];
  }
}

template void embedding_forward_reference(const int32_t*, const float*, float*, int64_t, int64_t,
                                          int64_t);
template void embedding_forward_reference(const int64_t*, const float*, float*, int64_t, int64_t,
                                          int64_t);
template void embedding_backward_reference(const int32_t*, const float*, float*, int64_t, int64_t,
                                           int64_t);
template void embedding_backward_reference(const int64_t*, const float*, float*, int64_t, int64_t,
                                           int64_t);

void rotary_embedding_reference(const float* x, float* out, int64_t rows, int64_t steps,
                                int64_t dim, int64_t position_offset, double theta, bool inverse) {
  const int64_t half = dim / 2;
  for (int64_t r = 0; r < rows * steps; ++r) {
    const double position = double(position_offset + r % steps);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position * std::pow(theta, -2.0 * double(i) / double(dim));
      const double c = static_cast<float>(std::cos(angle));
      const double s = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
      const double x1 = x[r * dim + i], x2 = x[r * dim + i + half];
      out[r * dim + i] = static_cast<float>(x1 * c - x2 * s);
      out[r * dim + i + half] = static_cast<float>(x2 * c + x1 * s);
    }
  }
}

}  // namespace patchbay::kernels::cuda
