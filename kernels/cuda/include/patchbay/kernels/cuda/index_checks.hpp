// The device-side index check (math/index_error.hpp): one block scans an index tensor and
// records its first bad entry in the device's error record, without stopping and without a
// read back to the host; for cross-entropy it also counts the rows not ignored and writes the
// mean factors (so the mean needs no host count). CPU twin: index_checks_reference.hpp.
// One block of 512 threads, each a strided slice, then a block reduction to the lowest bad
// position and the count: deterministic, and cheap beside the op it guards (B*T integers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/math/index_error.hpp"

namespace patchbay::kernels::cuda {

// values: count int32/int64 entries on the device; record: the device's error record;
// mean_factors: 2 floats on the device, or null.
template <class Index>
cudaError_t check_indices(const Index* values, int64_t count, const math::IndexCheck& check,
                          math::IndexErrorRecord* record, float* mean_factors, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
