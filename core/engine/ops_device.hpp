// Moving tensors between devices (Tensor::to(Device) forwards here). Kept out of ops.hpp so
// that the ops every file includes do not change when device plumbing does.
#pragma once

#include <cstddef>

#include "engine/tensor.hpp"

namespace patchbay::engine {

// A copy of x on `device` (x itself when already there): contiguous, same shape and dtype,
// bit-exact. Differentiable: the gradient travels back to x's device. Host -> device copies
// are queued on the device's stream without waiting; device -> host copies return with the
// data in place (the host is about to read it).
Tensor to_device(const Tensor& x, Device device);

// Copies `bytes` between two devices' memory through the backend that owns the non-CPU side
// (the destination's when both are devices). Both pointers are raw storage addresses.
void transfer_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace patchbay::engine
