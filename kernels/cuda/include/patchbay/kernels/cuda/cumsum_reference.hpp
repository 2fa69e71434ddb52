// CPU twin of cumsum.hpp.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void cumsum_f32_reference(const float* x, float* out, int64_t outer, int64_t length, int64_t inner,
                          bool reverse);

}  // namespace patchbay::kernels::cuda
