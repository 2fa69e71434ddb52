// bf16 <-> f32 conversions shared by the CUDA kernels and their CPU twins, with the engine's
// meaning (core/engine/dtype.hpp): bf16 is the top half of an f32; narrowing rounds the dropped
// 16 bits to nearest, ties to even; a NaN stays a NaN (quietened), never rounds to infinity.
// Values are raw 16-bit patterns (uint16_t) so these headers need no cuda_bf16.h.
#pragma once

#include <cstdint>
#include <cstring>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

PATCHBAY_HD uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

PATCHBAY_HD float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// f32 -> bf16, round to nearest, ties to even; NaN -> quiet NaN with the same sign and top bits.
PATCHBAY_HD uint16_t bf16_from_float(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// bf16 -> f32 (exact).
PATCHBAY_HD float float_from_bf16(uint16_t bits) {
  return float_from_bits(static_cast<uint32_t>(bits) << 16);
}

// The f32 value a bf16 store then load gives back.
PATCHBAY_HD float round_through_bf16(float value) {
  return float_from_bf16(bf16_from_float(value));
}

}  // namespace patchbay::kernels::cuda::math
