// The answer of a build without the CUDA toolkit (CMake found no nvcc / CUDAToolkit when it
// configured): CUDA is never usable, and the reason says how to get a build that has it.
#include "cuda/cuda_device.hpp"

namespace patchbay::cuda {

bool built_with_cuda() { return false; }

const CudaProbe& initialise_cuda() {
  static const CudaProbe probe{
      false,
      "this build has no CUDA support: CMake found no CUDA toolkit when it was configured; "
      "install the CUDA toolkit (nvcc, e.g. under /usr/local/cuda) and build again",
      0, ""};
  return probe;
}

}  // namespace patchbay::cuda
