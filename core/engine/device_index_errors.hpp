// Index errors found on a device, raised at the host's next read from it. On the CPU an op
// refuses a bad index (a cross-entropy target, an embedding id, a gather / scatter_add index)
// at once; on a device that would need the index values on the host, a wait per op. Instead
// a device's kernels check indices there and write the first bad entry into the device's
// error record (kernels/cuda/math/index_error.hpp); every device-to-host transfer
// (transfer_bytes: item(), to_vector(), to(cpu), a checkpoint's save) then raises it with the
// CPU's message. So an ordinary training step reads nothing back, and the error surfaces at the
// next logging / evaluation / checkpoint read, naming the op, the value and the valid range.
#pragma once

#include <string>

#include "engine/device.hpp"
#include "patchbay/kernels/cuda/math/index_error.hpp"

namespace patchbay::engine {

// The record of `device` (device memory, zeroed when first made) for a check about to be
// queued there; marks the device so that its next read looks at the record.
kernels::cuda::math::IndexErrorRecord* index_error_record_for(Device device);

// When a check was queued on `device` since the last look: copies its record to the host (one
// 64-byte read, after the read that triggered it) and, when it holds an error, clears it and
// throws kInvalidArgument with the op's message. Nothing to do (no transfer) otherwise.
void raise_index_errors(Device device);

// The message for a recorded error (what was expected, what was found, what to do).
std::string index_error_message(const kernels::cuda::math::IndexErrorRecord& record, Device device);

}  // namespace patchbay::engine
