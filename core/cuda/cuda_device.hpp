// The CUDA device as the host sees it: whether this build has CUDA, whether a GPU is usable,
// and the one call that makes it usable (registers the CUDA backend with the engine).
// Everything else about CUDA (allocator, stream, copies, kernels) hides behind the engine's
// device seam (engine/device.hpp, engine/dispatch.hpp); callers hold engine::Device values.
#pragma once

#include <string>

namespace patchbay::cuda {

struct CudaProbe {
  bool usable = false;
  // Why not, when !usable: "this build has no CUDA ...", or "no GPU: <the runtime's error>".
  std::string reason;
  int device_count = 0;
  std::string description;  // "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB" for device 0
};

// True when this binary was built with the CUDA backend (CMake found the CUDA toolkit).
bool built_with_cuda();

// Initialises the CUDA runtime once per process and, when a GPU is usable, registers the
// CUDA backend for DeviceType::kCuda. Any initialisation error (no driver, a driver older
// than the runtime, no device, a context that cannot be created) makes `usable` false with
// the runtime's words in `reason`; it never throws. Thread-safe; later calls return the
// first answer.
const CudaProbe& initialise_cuda();

}  // namespace patchbay::cuda
