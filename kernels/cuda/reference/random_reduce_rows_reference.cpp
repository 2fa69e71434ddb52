// CPU twins of the Philox fills, dropout masks and row reductions.
#include "patchbay/kernels/cuda/random_reduce_rows_reference.hpp"

#include <cmath>
#include <limits>

#include "patchbay/kernels/cuda/math/philox.hpp"

namespace patchbay::kernels::cuda {

void random_uniform_f32_reference(float* out, int64_t count, uint64_t seed, uint64_t offset,
                                  float low, float high) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = low + (high - low) * math::uniform_from_bits(
                                      math::philox_draw(seed, offset, uint64_t(i)).word[0]);
}

void random_normal_f32_reference(float* out, int64_t count, uint64_t seed, uint64_t offset,
                                 float mean, float stddev) {
  for (int64_t i = 0; i < count; ++i) {
    const math::PhiloxBlock draw = math::philox_draw(seed, offset, uint64_t(i));
    out[i] = mean + stddev * math::normal_from_bits(draw.word[0], draw.word[1]);
  }
}

void dropout_mask_f32_reference(float* mask, int64_t count, float p, uint64_t seed,
                                uint64_t offset) {
  for (int64_t i = 0; i < count; ++i) {
    const float u = math::uniform_from_bits(math::philox_draw(seed, offset, uint64_t(i)).word[2]);
    mask[i] = u >= p ? 1.0f / (1.0f - p) : 0.0f;
  }
}

void reduce_rows_f32_reference(RowReduction reduction, const float* in, float* out, int64_t rows,
                               int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    if (reduction == RowReduction::kMax) {
      float value = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < cols; ++c)
        value = std::isnan(row[c]) || std::isnan(value) ? std::numeric_limits<float>::quiet_NaN()
                                                        : std::fmax(value, row[c]);
      out[r] = value;
      continue;
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += row[c];
    out[r] = static_cast<float>(reduction == RowReduction::kMean ? sum / double(cols) : sum);
  }
}

}  // namespace patchbay::kernels::cuda
