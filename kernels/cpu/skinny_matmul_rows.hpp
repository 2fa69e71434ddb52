// Private seam between the skinny-matmul driver (skinny_matmul.cpp: validation, OpenMP split,
// ISA choice) and its per-ISA row loops. Only plain data crosses it: the AVX-512 file is
// built with its own -m flags, so no inline function may be shared with it.
#pragma once

#include <cstdint>

#include "patchbay/kernels/skinny_matmul.hpp"

namespace patchbay::kernels::skinny_rows {

// y[i][j] for every row i of x and the rows j in [j_begin, j_end) of W (validated params).
void rows_generic(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end);
void rows_avx2(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end);
void rows_avx512(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end);

}  // namespace patchbay::kernels::skinny_rows
