// CPU twins of the random fills, dropout masks and row reductions.
#include "patchbay/kernels/cuda/random_reduce_rows_reference.hpp"

#include <cmath>

#include "patchbay/kernels/cuda/math/philox.hpp"

namespace patchbay::kernels::cuda {

void random_fill_f32_reference(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                               bool normal, double low, double high) {
  for (int64_t b = 0; b * 4 < count; ++b) {
    float values[4];
    math::engine_random_block(seed, first_block + uint64_t(b), normal, low, high, values);
    for (int64_t j = 0; j < 4 && b * 4 + j < count; ++j) out[b * 4 + j] = values[j];
  }
}

void dropout_mask_f32_reference(const float* u, double p, float* keep, int64_t count) {
  const auto threshold = static_cast<float>(p);
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < count; ++i) keep[i] = u[i] >= threshold ? scale : 0.0f;
}

void reduce_rows_f32_reference(RowReduction reduction, const float* in, float* out, int64_t* argmax,
                               int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    if (reduction == RowReduction::kMax) {  // the engine's reduce_cpu rule
      float best = row[0];
      int64_t best_index = 0;
      for (int64_t c = 1; c < cols && !std::isnan(best); ++c)
        if (row[c] > best || std::isnan(row[c])) {
          best = row[c];
          best_index = c;
        }
      out[r] = best;
      if (argmax != nullptr) argmax[r] = best_index;
      continue;
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += row[c];
    out[r] = static_cast<float>(reduction == RowReduction::kMean ? sum / double(cols) : sum);
  }
}

void max_rows_backward_f32_reference(const float* dy, const int64_t* argmax, float* dx,
                                     int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dx[r * cols + c] = c == argmax[r] ? dy[r] : 0.0f;
}

}  // namespace patchbay::kernels::cuda
