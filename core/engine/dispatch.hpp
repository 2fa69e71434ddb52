// Kernel dispatch table: op name x device type -> kernel function pointer. An op looks its
// kernel up with find_kernel<Signature>("op", device.type); a backend registers kernels
// with PATCHBAY_REGISTER_KERNEL in the same .cpp as the op (so a static link keeps them).
// Signatures are checked by the caller's template argument: register and look up with the
// same type alias (declared beside the op, e.g. `using AddKernel = void(...)`).
#pragma once

#include <string>
#include <string_view>

#include "engine/device.hpp"

namespace patchbay::engine {

using ErasedKernel = void (*)();

void register_kernel_erased(std::string_view op, DeviceType device, ErasedKernel kernel);
// Throws patchbay::Error naming the op and device when nothing is registered.
ErasedKernel find_kernel_erased(std::string_view op, DeviceType device);

template <class Signature>
Signature* find_kernel(std::string_view op, DeviceType device) {
  return reinterpret_cast<Signature*>(find_kernel_erased(op, device));
}

template <class Signature>
bool register_kernel(std::string_view op, DeviceType device, Signature* kernel) {
  register_kernel_erased(op, device, reinterpret_cast<ErasedKernel>(kernel));
  return true;
}

}  // namespace patchbay::engine

#define PATCHBAY_KERNEL_CONCAT2(a, b) a##b
#define PATCHBAY_KERNEL_CONCAT(a, b) PATCHBAY_KERNEL_CONCAT2(a, b)
// PATCHBAY_REGISTER_KERNEL(AddKernel, "add", DeviceType::kCpu, add_cpu);
#define PATCHBAY_REGISTER_KERNEL(Signature, op, device, fn)                               \
  [[maybe_unused]] static const bool PATCHBAY_KERNEL_CONCAT(patchbay_kernel_, __LINE__) = \
      ::patchbay::engine::register_kernel<Signature>(op, device, fn)
