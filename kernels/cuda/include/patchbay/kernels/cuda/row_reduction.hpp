// The reductions of reduce_rows_f32 (random_reduce_rows.hpp), apart so the CPU twin needs no
// CUDA headers.
#pragma once

namespace patchbay::kernels::cuda {

enum class RowReduction : int { kSum, kMean, kMax };

}  // namespace patchbay::kernels::cuda
