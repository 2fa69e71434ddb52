// CPU twin of the index check kernel (index_checks.hpp): the same scan, the same record and
// the same cross-entropy mean factors, on host memory. The host stand-in device runs it in
// place of the CUDA kernel, so CI exercises the device's error-flag path.
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/math/index_error.hpp"

namespace patchbay::kernels::cuda::reference {

struct IndexScan {
  int64_t first_bad = -1;  // lowest position of a bad entry, -1 when none
  int64_t counted = 0;     // entries that are not the check's extra (cross-entropy's rows)
};

template <class Index>
IndexScan scan_indices(const Index* values, int64_t count, const math::IndexCheck& check) {
  IndexScan scan;
  for (int64_t i = 0; i < count; ++i) {
    const auto value = static_cast<int64_t>(values[i]);
    if (scan.first_bad < 0 && math::index_is_bad(value, check)) scan.first_bad = i;
    scan.counted += math::index_is_counted(value, check) ? 1 : 0;
  }
  return scan;
}

// Scans values[0, count): the first bad entry goes into *record (first error wins); when
// mean_factors is not null, the cross-entropy mean factors of the count are written there.
template <class Index>
IndexScan check_indices(const Index* values, int64_t count, const math::IndexCheck& check,
                        math::IndexErrorRecord* record, float* mean_factors) {
  const IndexScan scan = scan_indices(values, count, check);
  if (scan.first_bad >= 0)
    math::record_index_error(record, check, static_cast<int64_t>(values[scan.first_bad]),
                             scan.first_bad, count);
  if (mean_factors != nullptr) math::mean_factors_of_count(scan.counted, mean_factors);
  return scan;
}

}  // namespace patchbay::kernels::cuda::reference
