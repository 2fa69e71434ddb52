// Element types of engine tensors and the conversions between them. bf16 and f16 are stored
// as uint16_t bit patterns. Every pair of dtypes converts by one rule (PyTorch's, with the
// cases PyTorch leaves undefined pinned down):
//   float -> float  widening is exact; narrowing rounds to nearest, ties to even, keeps NaN a
//                   (quiet) NaN and overflows to +-inf the way IEEE-754 does.
//   int -> int      exact when the value fits; i64 -> i32 keeps the low 32 bits (two's
//                   complement wrap, as PyTorch and C++20 static_cast do).
//   int -> float    round to nearest, ties to even, straight from the integer: never through a
//                   wider float, whose first rounding could move a value onto a tie (double
//                   rounding), and never through double, which is inexact above 2^53.
//   float -> int    truncation toward zero; NaN gives 0 and values beyond the target's range
//                   saturate at its min/max (PyTorch leaves those undefined).
// Kernels compute bf16/f16 in f32 and round once on store.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

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
constexpr bool is_floating(DType t) {
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
// Branch-free (a select, not a jump), so conversion loops vectorise.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
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

// ---- element conversions (the rules above) ----

// C++ type each dtype is stored as.
template <DType T>
struct DTypeStorage;
template <>
struct DTypeStorage<DType::kF32> {
  using type = float;
};
template <>
struct DTypeStorage<DType::kBF16> {
  using type = uint16_t;
};
template <>
struct DTypeStorage<DType::kF16> {
  using type = uint16_t;
};
template <>
struct DTypeStorage<DType::kI32> {
  using type = int32_t;
};
template <>
struct DTypeStorage<DType::kI64> {
  using type = int64_t;
};
template <DType T>
using storage_t = typename DTypeStorage<T>::type;

// Significand bits (the implicit one included) of each float dtype.
constexpr int significand_bits(DType t) {
  return t == DType::kF32 ? 24 : t == DType::kBF16 ? 8 : 11;
}

// `magnitude` rounded to `bits` significant bits, to nearest, ties to even. The result has
// at most `bits` significant bits, so it converts exactly to a float that has as many.
// magnitude <= 2^63 (any |i64|), so the rounded value still fits.
inline uint64_t round_to_significant_bits(uint64_t magnitude, int bits) {
  const int width = std::bit_width(magnitude);
  if (width <= bits) return magnitude;
  const int dropped = width - bits;
  const uint64_t kept = magnitude >> dropped;
  const uint64_t rest = magnitude & ((uint64_t{1} << dropped) - 1);
  const uint64_t half = uint64_t{1} << (dropped - 1);
  const bool up = rest > half || (rest == half && (kept & 1u) != 0);
  return (kept + (up ? 1u : 0u)) << dropped;
}

// An integer rounded once to the float dtype To (nearest, ties to even).
template <DType To>
storage_t<To> int_to_float(int64_t v) {
  static_assert(is_floating(To));
  const bool negative = v < 0;
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  // Exact: at most 24 significant bits and below 2^64.
  float f = static_cast<float>(round_to_significant_bits(magnitude, significand_bits(To)));
  if (negative) f = -f;
  if constexpr (To == DType::kF32) return f;
  if constexpr (To == DType::kBF16) return f32_to_bf16(f);  // exact: 8 significant bits
  if constexpr (To == DType::kF16) return f32_to_f16(f);    // exact, or >= 2^16: inf
}

// A float truncated toward zero into the integer type Int; NaN -> 0, out of range saturates.
template <class Int, class Float>
Int float_to_int(Float v) {
  if (std::isnan(v)) return 0;
  // -2^31 and -2^63 are exact in every float type; the range is [lowest, -lowest).
  constexpr auto lowest = static_cast<Float>(std::numeric_limits<Int>::min());
  if (v <= lowest) return std::numeric_limits<Int>::min();
  if (v >= -lowest) return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

// A float value of any float dtype, widened exactly to f32.
template <DType From>
float widen_to_f32(storage_t<From> x) {
  if constexpr (From == DType::kF32) return x;
  if constexpr (From == DType::kBF16) return bf16_to_f32(x);
  if constexpr (From == DType::kF16) return f16_to_f32(x);
}
// An f32 value rounded once to the float dtype To.
template <DType To>
storage_t<To> narrow_from_f32(float f) {
  if constexpr (To == DType::kF32) return f;
  if constexpr (To == DType::kBF16) return f32_to_bf16(f);
  if constexpr (To == DType::kF16) return f32_to_f16(f);
}

// One element of dtype From as dtype To, by the rules at the top of this file.
template <DType From, DType To>
storage_t<To> convert_element(storage_t<From> x) {
  if constexpr (From == To) {
    return x;
  } else if constexpr (is_floating(From)) {
    const float f = widen_to_f32<From>(x);
    if constexpr (is_floating(To))
      return narrow_from_f32<To>(f);
    else
      return float_to_int<storage_t<To>>(f);
  } else {
    const auto v = static_cast<int64_t>(x);
    if constexpr (is_floating(To))
      return int_to_float<To>(v);
    else
      return static_cast<storage_t<To>>(v);  // i64 -> i32 wraps; i32 -> i64 exact
  }
}

// Calls fn.template operator()<T>() with T the DType value of `t` (one switch, so loops over
// elements run with the dtype known at compile time).
template <class Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32:
      return fn.template operator()<DType::kF32>();
    case DType::kBF16:
      return fn.template operator()<DType::kBF16>();
    case DType::kF16:
      return fn.template operator()<DType::kF16>();
    case DType::kI32:
      return fn.template operator()<DType::kI32>();
    case DType::kI64:
      break;
  }
  return fn.template operator()<DType::kI64>();
}

// A double rounded to f32 by "round to odd": truncated toward zero, then the last bit set
// when anything was dropped. Rounding that result to nearest at bf16 or f16 precision (both
// at least 2 bits narrower than f32) gives the same answer as rounding the double directly,
// which rounding to nearest twice does not (1 + 2^-8 + 2^-30 would become 1, not 1 + 2^-7,
// in bf16).
inline float f64_to_f32_round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return f32_from_bits(f32_bits(f) | 1u);
}

// ---- element load/store for the generic (non-hot) paths ----

inline float load_as_f32(const void* base, int64_t index, DType t) {
  return visit_dtype(t, [&]<DType T>() {
    const storage_t<T> x = static_cast<const storage_t<T>*>(base)[index];
    if constexpr (is_floating(T))
      return widen_to_f32<T>(x);
    else
      return static_cast<float>(x);  // one rounding, to nearest
  });
}
// Exact for every float and for integers up to 2^53 (larger ones round to nearest).
inline double load_as_f64(const void* base, int64_t index, DType t) {
  return visit_dtype(t, [&]<DType T>() {
    const storage_t<T> x = static_cast<const storage_t<T>*>(base)[index];
    if constexpr (is_floating(T))
      return static_cast<double>(widen_to_f32<T>(x));
    else
      return static_cast<double>(x);
  });
}
// Stores a double (a fill value, an arange step) by the same rules: rounded once to a float
// dtype, truncated toward zero (NaN 0, saturating) to an integer one.
inline void store_from_f64(void* base, int64_t index, DType t, double v) {
  visit_dtype(t, [&]<DType T>() {
    auto* p = static_cast<storage_t<T>*>(base);
    if constexpr (T == DType::kF32)
      p[index] = static_cast<float>(v);
    else if constexpr (is_floating(T))
      p[index] = narrow_from_f32<T>(f64_to_f32_round_to_odd(v));
    else
      p[index] = float_to_int<storage_t<T>>(v);
  });
}

}  // namespace patchbay::engine
