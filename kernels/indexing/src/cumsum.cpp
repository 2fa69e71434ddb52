// Cumulative-sum kernels (see cumsum.hpp). For each outer slice the running sums of all
// `inner` lines advance together, one [inner] row per step, so memory is walked
// contiguously and the inner loop vectorises; threads split the outer slices, or blocks
// of inner lines when there is a single outer slice (cumsum along dim 0).
#include "patchbay/kernels/cumsum.hpp"

#include <algorithm>
#include <vector>

namespace patchbay::kernels {
namespace {

constexpr int64_t kInnerBlock = 256;  // running sums per block: 2 KiB of doubles, in L1

// Cumulative sum of the lines [inner_begin, inner_end) of one outer slice.
void cumsum_slice(const float* x, int64_t length, int64_t inner, int64_t inner_begin,
                  int64_t inner_end, bool reverse, float* out) {
  double running[kInnerBlock];
  for (int64_t block = inner_begin; block < inner_end; block += kInnerBlock) {
    const int64_t block_width = std::min(kInnerBlock, inner_end - block);
    std::fill(running, running + block_width, 0.0);
    for (int64_t step = 0; step < length; ++step) {
      const int64_t j = reverse ? length - 1 - step : step;
      const float* src = x + j * inner + block;
      float* dst = out + j * inner + block;
#pragma omp simd
      for (int64_t i = 0; i < block_width; ++i) {
        running[i] += src[i];
        dst[i] = static_cast<float>(running[i]);
      }
    }
  }
}

}  // namespace

void cumsum_forward(const float* x, int64_t outer, int64_t length, int64_t inner, bool reverse,
                    float* out) {
  const bool parallel = outer * length * inner > (1 << 15);
  if (outer > 1 || inner <= kInnerBlock) {
#pragma omp parallel for schedule(static) if (parallel && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t offset = o * length * inner;
      cumsum_slice(x + offset, length, inner, 0, inner, reverse, out + offset);
    }
    return;
  }
  // One outer slice with many lines: threads take blocks of lines.
  const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kInnerBlock;
    cumsum_slice(x, length, inner, begin, std::min(inner, begin + kInnerBlock), reverse, out);
  }
}

void cumsum_backward(const float* grad_out, int64_t outer, int64_t length, int64_t inner,
                     bool reverse, float* grad_x) {
  cumsum_forward(grad_out, outer, length, inner, !reverse, grad_x);
}

void cumsum_forward_reference(const float* x, int64_t outer, int64_t length, int64_t inner,
                              bool reverse, float* out) {
  std::vector<float> result(static_cast<size_t>(outer * length * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < length; ++j)
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0.0;
        const int64_t first = reverse ? j : 0;
        const int64_t last = reverse ? length - 1 : j;
        for (int64_t k = first; k <= last; ++k) sum += x[(o * length + k) * inner + i];
        result[static_cast<size_t>((o * length + j) * inner + i)] = static_cast<float>(sum);
      }
  std::copy(result.begin(), result.end(), out);
}

}  // namespace patchbay::kernels
