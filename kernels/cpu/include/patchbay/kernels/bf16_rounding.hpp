// f32 -> bf16 precision, kept in f32 storage (round to nearest, ties to even; NaN stays NaN):
// the value a bf16 operand has once widened back. For the drivers, references and tests of the
// kernels that run bf16 operands as bf16-exact f32 values (causal_linear_attention.hpp,
// sorted_chunk_attention.hpp); the ISA builds have their own copy (bf16_round.inc), since an
// inline function compiled with different -m flags must not be shared between them.
#pragma once

#include <cstdint>
#include <cstring>

namespace patchbay::kernels {

inline float round_to_bf16(float x) {
  if (x != x) return x;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace patchbay::kernels
