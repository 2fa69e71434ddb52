// The option enums of gemm.hpp, apart so the CPU twin (gemm_reference.hpp) needs no CUDA
// headers: precision, output type and fused epilogue of a matrix product.
#pragma once

namespace patchbay::kernels::cuda {

enum class GemmPrecision { kF32, kTf32, kBf16 };
enum class GemmOutput { kF32, kBf16 };  // kBf16 only with GemmPrecision::kBf16
enum class GemmEpilogue {
  kNone,
  kBias,             // D = AB + bias
  kGelu,             // D = gelu(AB)
  kBiasGelu,         // D = gelu(AB + bias)
  kBiasGeluAux,      // D = gelu(AB + bias), aux = AB + bias (for the backward)
  kGeluBackward,     // D = (AB) * gelu'(aux)
  kGeluBackwardBias  // D = (AB) * gelu'(aux), bias_gradient = column sums of D
};

}  // namespace patchbay::kernels::cuda
