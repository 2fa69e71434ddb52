// The device-resident index-error record. Kernels that take indices (cross-entropy targets,
// embedding ids, gather / scatter-add indices) check them on the device and, instead of
// stopping, write the first bad entry into one record per device; the host reads the record at
// its next read from that device and raises the op's error (engine/device_index_errors.hpp).
// So a training step on a GPU reads nothing back to check its indices.
//
// First error wins: a writer claims `op` with a compare-and-swap from 0, and only the claimer
// writes the other words. The checks of one stream run in order, so the record holds the
// earliest checked op's error; within one check the entry is the first bad one in row-major
// order (the scan reduces to the lowest position, as the CPU's check reports it).
// Written once as PATCHBAY_HD functions: the CUDA check kernel (index_checks.hpp) and its CPU
// twin (index_checks_reference.hpp, which the host stand-in device runs) share them.
#pragma once

#include <cmath>
#include <cstdint>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

enum class IndexErrorOp : int64_t {
  kNone = 0,
  kCrossEntropyTarget = 1,
  kEmbeddingId = 2,
  kGatherIndex = 3,
  kScatterAddIndex = 4,
};

// 64 bytes of int64 words, all 0 when no error is recorded.
struct IndexErrorRecord {
  int64_t op = 0;        // IndexErrorOp; 0: no error
  int64_t value = 0;     // the bad entry
  int64_t position = 0;  // its flat (row-major) position in the index tensor
  int64_t bound = 0;     // valid entries lie in [0, bound)
  int64_t detail = 0;    // cross_entropy: ignore_index; gather / scatter_add: the dim
  int64_t count = 0;     // entries in the index tensor
  int64_t unused[2] = {0, 0};
};
static_assert(sizeof(IndexErrorRecord) == 64, "the record is read back as 64 bytes");

// What one check looks for: entries outside [0, bound), except `extra` when allow_extra (the
// cross-entropy's ignore_index).
struct IndexCheck {
  IndexErrorOp op = IndexErrorOp::kNone;
  int64_t bound = 0;
  bool allow_extra = false;
  int64_t extra = 0;
  int64_t detail = 0;  // stored with an error (ignore_index, or the dim)
};

PATCHBAY_HD bool index_is_bad(int64_t value, const IndexCheck& check) {
  if (check.allow_extra && value == check.extra) return false;
  return value < 0 || value >= check.bound;
}

// Counted by cross-entropy's mean: an entry that is not the extra (ignore_index).
PATCHBAY_HD bool index_is_counted(int64_t value, const IndexCheck& check) {
  return !(check.allow_extra && value == check.extra);
}

// Claims the record for `op` when it holds no error yet (true: the caller writes the rest).
PATCHBAY_HD bool claim_index_error(IndexErrorRecord* record, IndexErrorOp op) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(reinterpret_cast<unsigned long long*>(&record->op), 0ull,
                   static_cast<unsigned long long>(op)) == 0ull;
#else
  int64_t expected = 0;
  return __atomic_compare_exchange_n(&record->op, &expected, static_cast<int64_t>(op), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}

// Records the bad entry `value` at `position` of an index tensor of `count` entries.
PATCHBAY_HD void record_index_error(IndexErrorRecord* record, const IndexCheck& check,
                                    int64_t value, int64_t position, int64_t count) {
  if (!claim_index_error(record, check.op)) return;
  record->value = value;
  record->position = position;
  record->bound = check.bound;
  record->detail = check.detail;
  record->count = count;
}

// Cross-entropy's mean factors from the number of counted rows, as the CPU op computes them:
// [0] multiplies the summed row losses (1/count, NaN when nothing is counted: the mean of no
// rows), [1] the upstream gradient (1/count, 0 when nothing is counted). 1/count is taken in
// double and rounded once, as mul_scalar(x, 1.0 / count) rounds its scalar.
PATCHBAY_HD void mean_factors_of_count(int64_t counted, float* factors) {
  const float inverse = counted > 0 ? static_cast<float>(1.0 / static_cast<double>(counted)) : 0.f;
  factors[0] = counted > 0 ? inverse : NAN;
  factors[1] = inverse;
}

}  // namespace patchbay::kernels::cuda::math
