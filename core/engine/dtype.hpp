// Element types of engine tensors and the exact conversions between the 16-bit float
// formats and f32. bf16 and f16 are stored as uint16_t bit patterns; every conversion from
// f32 rounds to nearest, ties to even, keeps NaN a (quiet) NaN and saturates to ±inf the
// way IEEE-754 does. Kernels compute bf16/f16 in f32 and round once on store.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace patchbay::engine {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kI32 = 3, kI64 = 4 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}
inline bool is_floating(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 is the top half of an f32: round the dropped 16 bits to nearest even.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals below 2^-14.
inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: f16 subnormal (or zero)
    // value = abs_float; f16 subnormal unit is 2^-24. Add a magic number so the FPU rounds
    // to nearest even at that unit.
    float a = f32_from_bits(abs);
    float magic = f32_from_bits(0x3f000000u);  // 0.5: ulp 2^-24 at exponent -1
    uint32_t r = f32_bits(a + magic) - f32_bits(magic);
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent 127 -> 15, round the 13 dropped mantissa bits to nearest even.
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // -(112 << 23) + 0xfff + odd
  return static_cast<uint16_t>(sign | (abs >> 13));
}
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * f32_from_bits(0x33800000u);
    return f32_from_bits(f32_bits(v) | sign);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Element load/store through f32, for the (non-hot) generic paths.
inline float load_as_f32(const void* base, int64_t index, DType t) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(base)[index];
    case DType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case DType::kI32:
      return static_cast<float>(static_cast<const int32_t*>(base)[index]);
    case DType::kI64:
      return static_cast<float>(static_cast<const int64_t*>(base)[index]);
  }
  return 0.f;
}
inline double load_as_f64(const void* base, int64_t index, DType t) {
  if (t == DType::kI64) return static_cast<double>(static_cast<const int64_t*>(base)[index]);
  if (t == DType::kI32) return static_cast<double>(static_cast<const int32_t*>(base)[index]);
  return static_cast<double>(load_as_f32(base, index, t));
}
inline void store_from_f64(void* base, int64_t index, DType t, double v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(base)[index] = static_cast<float>(v);
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(base)[index] = f32_to_bf16(static_cast<float>(v));
      break;
    case DType::kF16:
      static_cast<uint16_t*>(base)[index] = f32_to_f16(static_cast<float>(v));
      break;
    case DType::kI32:
      static_cast<int32_t*>(base)[index] = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(base)[index] = static_cast<int64_t>(v);
      break;
  }
}

}  // namespace patchbay::engine
