// BA16a64b packing of f32 weights (see packed_weights.hpp).
#include "onednn/packed_weights.hpp"

#include <algorithm>
#include <cstring>

namespace patchbay::onednn::detail {

void pack_f32_ba16a64b(const float* src, std::int64_t ldb, std::int64_t k, std::int64_t n,
                       float* dst) {
  constexpr std::int64_t kRows = 16, kCols = 64, kBlock = kRows * kCols;
  const std::int64_t row_blocks = (k + kRows - 1) / kRows;
  const std::int64_t col_blocks = (n + kCols - 1) / kCols;
  // One task per row block, reading its 16 rows front to back: read column-block-first,
  // the 16 pieces of a block sit one row pitch apart, and with GPT-2's 12 KiB pitch they
  // all map onto the same cache sets.
#pragma omp parallel for schedule(static) if (k * n >= (1 << 16))
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::int64_t row = rb * kRows + r;
      for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
        float* out = dst + (cb * row_blocks + rb) * kBlock + r * kCols;
        const std::int64_t c0 = cb * kCols;
        const std::int64_t cols = row < k ? std::min(kCols, n - c0) : 0;
        if (cols > 0)
          std::memcpy(out, src + row * ldb + c0, static_cast<std::size_t>(cols) * sizeof(float));
        if (cols < kCols)
          std::memset(out + cols, 0, static_cast<std::size_t>(kCols - cols) * sizeof(float));
      }
    }
  }
}

}  // namespace patchbay::onednn::detail
