// GGML type names, block sizes and dequantisation (F32, F16, BF16, Q8_0, Q4_0, Q4_1); see
// gguf_types.hpp for the layouts.
#include "interop/gguf_types.hpp"

#include <array>
#include <bit>
#include <cstring>

#include "common/error.hpp"

namespace patchbay::interop {

namespace {

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

}  // namespace

std::string ggml_type_name(uint32_t type) {
  // ggml.h's enum ggml_type (ids 4, 5 and 31-33 were removed or never used in files).
  static const std::array<const char*, 40> names = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (type < names.size()) return names[type];
  return "type " + std::to_string(type);
}

std::optional<GgmlBlock> ggml_block_of(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      return GgmlBlock{1, 4};
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return GgmlBlock{1, 2};
    case GgmlType::kQ8_0:
      return GgmlBlock{32, 34};
    case GgmlType::kQ4_0:
      return GgmlBlock{32, 18};
    case GgmlType::kQ4_1:
      return GgmlBlock{32, 20};
  }
  return std::nullopt;
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  uint32_t out = 0;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;  // +-0
    } else {       // subnormal: normalise
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3FFu;
      out = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1F) {
    out = sign | 0x7F800000u | (mantissa << 13);  // inf / nan
  } else {
    out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

void dequantize(uint32_t type, const uint8_t* src, int64_t elements, float* dst) {
  const std::optional<GgmlBlock> block = ggml_block_of(type);
  if (!block || elements % block->elements != 0)
    throw Error(ErrorKind::kInvalidArgument, "cannot dequantise " + std::to_string(elements) +
                                                 " elements of GGML type " + ggml_type_name(type));
  const int64_t blocks = elements / block->elements;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(elements) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < elements; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < elements; ++i) dst[i] = bf16_to_f32(load_u16(src + 2 * i));
      return;
    case GgmlType::kQ8_0:
      for (int64_t b = 0; b < blocks; ++b, src += 34, dst += 32) {
        const float d = f16_to_f32(load_u16(src));
        for (int i = 0; i < 32; ++i)
          dst[i] = d * static_cast<float>(static_cast<int8_t>(src[2 + i]));
      }
      return;
    case GgmlType::kQ4_0:
      for (int64_t b = 0; b < blocks; ++b, src += 18, dst += 32) {
        const float d = f16_to_f32(load_u16(src));
        for (int i = 0; i < 16; ++i) {
          dst[i] = d * static_cast<float>((src[2 + i] & 0x0F) - 8);
          dst[i + 16] = d * static_cast<float>((src[2 + i] >> 4) - 8);
        }
      }
      return;
    case GgmlType::kQ4_1:
      for (int64_t b = 0; b < blocks; ++b, src += 20, dst += 32) {
        const float d = f16_to_f32(load_u16(src)), m = f16_to_f32(load_u16(src + 2));
        for (int i = 0; i < 16; ++i) {
          dst[i] = d * static_cast<float>(src[4 + i] & 0x0F) + m;
          dst[i + 16] = d * static_cast<float>(src[4 + i] >> 4) + m;
        }
      }
      return;
  }
}

}  // namespace patchbay::interop
