// GGML tensor types as GGUF files store them, and dequantisation of the ones Patchbay reads.
//
// Block layouts (ggml's ggml-common.h; a row of n elements is n / block consecutive blocks,
// little-endian, f16 = IEEE binary16):
//   F32   4 bytes per element             F16  2 bytes (binary16)    BF16 2 bytes (upper f32)
//   Q8_0  32 elements in 34 bytes: f16 d, int8 q[32];            x[i] = d * q[i]
//   Q4_0  32 elements in 18 bytes: f16 d, uint8 q[16];           x[i] = d * ((q[i] & 15) - 8),
//                                                                x[i + 16] = d * ((q[i] >> 4) - 8)
//   Q4_1  32 elements in 20 bytes: f16 d, f16 m, uint8 q[16];    x[i] = d * (q[i] & 15) + m,
//                                                                x[i + 16] = d * (q[i] >> 4) + m
// (the low nibbles hold the first half of the block, the high nibbles the second half).
// Every other type (the K-quants, IQ types, ...) is known by name so a refusal can say which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace patchbay::interop {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kBF16 = 30,
};

// ggml's name of any type id ("Q4_K", "IQ2_XS", ...), or "type N" for an id it never had.
std::string ggml_type_name(uint32_t type);

// Elements per block and bytes per block of a type Patchbay reads; nullopt for the others.
struct GgmlBlock {
  int64_t elements = 1;
  int64_t bytes = 4;
};
std::optional<GgmlBlock> ggml_block_of(uint32_t type);

// IEEE binary16 / bfloat16 bits -> f32 (exact).
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

// Dequantises `elements` values (a multiple of the block size) of a supported type from `src`
// (elements / block.elements * block.bytes bytes) into dst. Unsupported types throw Error.
void dequantize(uint32_t type, const uint8_t* src, int64_t elements, float* dst);

}  // namespace patchbay::interop
