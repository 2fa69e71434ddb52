// copy_ between every pair of dtypes (f32, bf16, f16, i32, i64 each way), table-driven with
// known answers: integers exact (2^53 + 1 included, where a detour through double loses the
// last bit), int -> float rounded once to nearest even (cases where rounding first to double
// or f32 and then again would land elsewhere), float -> int truncated toward zero with NaN 0
// and saturation, float -> float rounded to nearest even. Inputs and expected outputs are
// written as plain numbers and encoded/decoded here without the engine's converters, so the
// test does not grade the engine with its own code. Also fill_ of a double (rounded once) and
// the same 2^53 + 1 round trip through the C ops table.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "engine/ops_table.hpp"

namespace patchbay::engine {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t p2(int e) { return int64_t{1} << e; }  // 2^e as an integer
double f2(int e) { return std::ldexp(1.0, e); }          // 2^e as a float value
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A number as written in the table: an integer (for i32/i64 tensors) or a float value (for
// f32/bf16/f16 tensors, which must hold it exactly).
struct Value {
  bool is_int;
  int64_t i;
  double f;
};
Value I(int64_t v) { return {true, v, 0.0}; }
Value F(double v) { return {false, 0, v}; }

std::string show(const Value& v) {
  if (v.is_int) return std::to_string(v.i);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v.f);
  return buf;
}

// IEEE binary16 bits -> value, straight from the definition (1 sign, 5 exponent bits with
// bias 15, 10 mantissa bits; exponent 0 subnormal, 31 inf/NaN).
double f16_value(uint16_t h) {
  const double sign = (h & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 31) return mantissa != 0 ? kNaN : sign * kInf;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}
// bf16 bits -> value: the top half of an f32.
double bf16_value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The bit pattern of a float dtype that holds `v` exactly (NaN: any NaN pattern).
uint16_t exact_16bit_pattern(double v, DType dtype) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const double x = dtype == DType::kF16 ? f16_value(bits) : bf16_value(bits);
    if ((std::isnan(v) && std::isnan(x)) || (x == v && std::signbit(x) == std::signbit(v)))
      return bits;
  }
  FAIL("test table error: " << v << " is not exact in " << dtype_name(dtype));
  return 0;
}

Tensor make_tensor(const std::vector<Value>& values, DType dtype) {
  const auto n = static_cast<int64_t>(values.size());
  Tensor t = Tensor::empty({n}, dtype);
  for (size_t k = 0; k < values.size(); ++k) {
    const Value& v = values[k];
    REQUIRE_MESSAGE(v.is_int == !is_floating(dtype), "test table error at " << show(v));
    switch (dtype) {
      case DType::kI64:
        t.data<int64_t>()[k] = v.i;
        break;
      case DType::kI32:
        REQUIRE(v.i >= kI32Min);
        REQUIRE(v.i <= kI32Max);
        t.data<int32_t>()[k] = static_cast<int32_t>(v.i);
        break;
      case DType::kF32: {
        const auto f = static_cast<float>(v.f);
        REQUIRE_MESSAGE((std::isnan(v.f) || static_cast<double>(f) == v.f),
                        "test table error: " << show(v) << " is not exact in f32");
        t.data<float>()[k] = f;
        break;
      }
      case DType::kBF16:
      case DType::kF16:
        t.data<uint16_t>()[k] = exact_16bit_pattern(v.f, dtype);
        break;
    }
  }
  return t;
}

Value element(const Tensor& t, size_t k) {
  switch (t.dtype()) {
    case DType::kI64:
      return I(t.data<int64_t>()[k]);
    case DType::kI32:
      return I(t.data<int32_t>()[k]);
    case DType::kF32:
      return F(t.data<float>()[k]);
    case DType::kBF16:
      return F(bf16_value(t.data<uint16_t>()[k]));
    case DType::kF16:
      return F(f16_value(t.data<uint16_t>()[k]));
  }
  return F(kNaN);
}

bool same(const Value& a, const Value& b) {
  if (a.is_int != b.is_int) return false;
  if (a.is_int) return a.i == b.i;
  if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
  return a.f == b.f && std::signbit(a.f) == std::signbit(b.f);
}

struct PairCase {
  DType from;
  DType to;
  std::vector<std::array<Value, 2>> cases;  // {input, expected}
};

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16, kI32 = DType::kI32,
                kI64 = DType::kI64;

std::vector<PairCase> conversion_table() {
  return {
      // ---- integer -> integer: exact; i64 -> i32 keeps the low 32 bits ----
      {kI64,
       kI64,
       {{I(p2(53) + 1), I(p2(53) + 1)},
        {I(-p2(53) - 1), I(-p2(53) - 1)},
        {I(kI64Max), I(kI64Max)},
        {I(kI64Min), I(kI64Min)}}},
      {kI64,
       kI32,
       {{I(kI32Max), I(kI32Max)},
        {I(kI32Min), I(kI32Min)},
        {I(-1), I(-1)},
        {I(p2(32) + 5), I(5)},
        {I(p2(31)), I(kI32Min)}}},
      {kI32, kI32, {{I(kI32Max), I(kI32Max)}, {I(kI32Min), I(kI32Min)}, {I(0), I(0)}}},
      {kI32, kI64, {{I(kI32Max), I(kI32Max)}, {I(kI32Min), I(kI32Min)}, {I(-1), I(-1)}}},
      // ---- integer -> float: one rounding to nearest, ties to even ----
      {kI64,
       kF32,
       {{I(p2(53) + 1), F(f2(53))},
        {I(p2(24) + 1), F(f2(24))},      // tie, down to even
        {I(p2(24) + 3), F(f2(24) + 4)},  // tie, up to even
        {I(p2(60) + p2(36) + 1),
         F(f2(60) + f2(37))},  // via double: 2^60 + 2^36, then a tie -> 2^60
        {I(-p2(24) - 3), F(-f2(24) - 4)},
        {I(kI64Max), F(f2(63))},
        {I(kI64Min), F(-f2(63))}}},
      {kI64,
       kBF16,
       {{I(257), F(256)},
        {I(259), F(260)},
        {I(p2(24) + p2(16) + 1), F(f2(24) + f2(17))},  // via f32: 2^24 + 2^16, then a tie -> 2^24
        {I(p2(53) + 1), F(f2(53))},
        {I(-p2(40) - p2(32) - 1), F(-f2(40) - f2(33))},
        {I(kI64Max), F(f2(63))}}},
      {kI64,
       kF16,
       {{I(2049), F(2048)},
        {I(2051), F(2052)},
        {I(65504), F(65504)},
        {I(65519), F(65504)},
        {I(65520), F(kInf)},  // the f16 overflow threshold
        {I(-70000), F(-kInf)},
        {I(p2(53) + 1), F(kInf)}}},
      {kI32,
       kF32,
       {{I(p2(24) + 1), F(f2(24))},
        {I(p2(24) + 3), F(f2(24) + 4)},
        {I(kI32Max), F(f2(31))},
        {I(kI32Min), F(-f2(31))},
        {I(-7), F(-7)}}},
      {kI32,
       kBF16,
       {{I(p2(24) + p2(16) + 1), F(f2(24) + f2(17))}, {I(257), F(256)}, {I(-259), F(-260)}}},
      {kI32, kF16, {{I(2049), F(2048)}, {I(65520), F(kInf)}, {I(-65519), F(-65504)}}},
      // ---- float -> integer: truncation toward zero, NaN 0, saturation ----
      {kF32,
       kI32,
       {{F(2.75), I(2)},
        {F(-2.75), I(-2)},
        {F(-0.5), I(0)},
        {F(f2(31) - 128), I(p2(31) - 128)},  // the largest f32 below 2^31
        {F(f2(31)), I(kI32Max)},
        {F(3e9), I(kI32Max)},
        {F(-3e9), I(kI32Min)},
        {F(kInf), I(kI32Max)},
        {F(kNaN), I(0)}}},
      {kF32,
       kI64,
       {{F(f2(60) + f2(37)), I(p2(60) + p2(37))},
        {F(f2(62)), I(p2(62))},
        {F(-f2(63)), I(kI64Min)},
        {F(f2(63)), I(kI64Max)},
        {F(f2(100)), I(kI64Max)},
        {F(-f2(100)), I(kI64Min)},
        {F(-2.5), I(-2)},
        {F(kNaN), I(0)}}},
      {kBF16,
       kI32,
       {{F(-2.5), I(-2)},
        {F(f2(30) + f2(23)), I(p2(30) + p2(23))},
        {F(f2(31)), I(kI32Max)},
        {F(-f2(31)), I(kI32Min)},
        {F(kNaN), I(0)}}},
      {kBF16,
       kI64,
       {{F(f2(62) + f2(55)), I(p2(62) + p2(55))},
        {F(-f2(63)), I(kI64Min)},
        {F(f2(63)), I(kI64Max)},
        {F(1.5), I(1)}}},
      {kF16,
       kI32,
       {{F(65504), I(65504)}, {F(-1.5), I(-1)}, {F(kInf), I(kI32Max)}, {F(kNaN), I(0)}}},
      {kF16, kI64, {{F(-65504), I(-65504)}, {F(1 - f2(-11)), I(0)}, {F(-kInf), I(kI64Min)}}},
      // ---- float -> float: widening exact, narrowing to nearest even ----
      {kF32,
       kF32,
       {{F(1.5), F(1.5)}, {F(-0.0), F(-0.0)}, {F(f2(-149)), F(f2(-149))}, {F(kNaN), F(kNaN)}}},
      {kF32,
       kBF16,
       {{F(1 + f2(-8)), F(1)},                     // tie, down to even
        {F(1 + 3 * f2(-8)), F(1 + f2(-6))},        // tie, up to even
        {F(1 + f2(-8) + f2(-20)), F(1 + f2(-7))},  // just above the tie
        {F(static_cast<double>(std::numeric_limits<float>::max())), F(kInf)},
        {F(kNaN), F(kNaN)}}},
      {kF32,
       kF16,
       {{F(65519), F(65504)},
        {F(65520), F(kInf)},
        {F(f2(-25)), F(0)},  // tie between 0 and the smallest subnormal
        {F(3 * f2(-26)), F(f2(-24))},
        {F(1 + f2(-11)), F(1)},
        {F(-kInf), F(-kInf)},
        {F(kNaN), F(kNaN)}}},
      {kBF16,
       kBF16,
       {{F(1 + f2(-7)), F(1 + f2(-7))}, {F(f2(-133)), F(f2(-133))}, {F(kNaN), F(kNaN)}}},
      {kBF16,
       kF32,
       {{F(1 + f2(-7)), F(1 + f2(-7))}, {F(f2(-133)), F(f2(-133))}, {F(-kInf), F(-kInf)}}},
      {kBF16,
       kF16,
       {{F(1 + f2(-7)), F(1 + f2(-7))},
        {F(f2(16)), F(kInf)},
        {F(f2(-30)), F(0)},
        {F(3 * f2(-26)), F(f2(-24))},
        {F(65280), F(65280)}}},
      {kF16,
       kF16,
       {{F(65504), F(65504)}, {F(f2(-24)), F(f2(-24))}, {F(-0.0), F(-0.0)}, {F(kNaN), F(kNaN)}}},
      {kF16,
       kF32,
       {{F(65504), F(65504)}, {F(f2(-24)), F(f2(-24))}, {F(1 + f2(-10)), F(1 + f2(-10))}}},
      {kF16,
       kBF16,
       {{F(1 + f2(-10)), F(1)},
        {F(1 + 3 * f2(-8)), F(1 + f2(-6))},
        {F(65504), F(65536)},
        {F(f2(-24)), F(f2(-24))}}},
  };
}

TEST_CASE("copy_ converts every dtype pair by its rule (table of known answers)") {
  const std::vector<PairCase> table = conversion_table();
  // Every ordered pair of the five dtypes appears exactly once.
  std::array<int, 25> seen{};
  for (const PairCase& pair : table)
    ++seen[static_cast<size_t>(pair.from) * 5 + static_cast<size_t>(pair.to)];
  for (int count : seen) CHECK(count == 1);

  for (const PairCase& pair : table) {
    std::vector<Value> inputs;
    for (const auto& c : pair.cases) inputs.push_back(c[0]);
    const Tensor src = make_tensor(inputs, pair.from);
    Tensor dst = Tensor::empty(src.shape(), pair.to);
    copy_(dst, src);
    // The same values through a strided (non-contiguous) source: every other element of a
    // tensor twice as long.
    std::vector<Value> spread;
    for (const Value& v : inputs) {
      spread.push_back(v);
      spread.push_back(v);
    }
    const Tensor strided = make_tensor(spread, pair.from).slice(0, 0, 2 * src.numel(), 2);
    Tensor dst_strided = Tensor::empty(src.shape(), pair.to);
    copy_(dst_strided, strided);
    for (size_t k = 0; k < pair.cases.size(); ++k) {
      const Value& expected = pair.cases[k][1];
      const std::string what = std::string(dtype_name(pair.from)) + " -> " + dtype_name(pair.to) +
                               ": " + show(pair.cases[k][0]) + " should give " + show(expected);
      INFO(what);
      CHECK_MESSAGE(same(element(dst, k), expected), "got " << show(element(dst, k)));
      CHECK_MESSAGE(same(element(dst_strided, k), expected),
                    "strided source got " << show(element(dst_strided, k)));
    }
  }
}

TEST_CASE("i64 values above 2^53 survive copies, views and broadcasts exactly") {
  const int64_t big = p2(53) + 1;
  const std::vector<int64_t> values = {big, -big, kI64Max - 1, kI64Min + 1};
  const Tensor x = Tensor::from_data(values.data(), {4}, DType::kI64);
  // transpose + contiguous twice: two strided copies.
  const Tensor round_trip =
      x.reshape({2, 2}).transpose(0, 1).contiguous().transpose(0, 1).contiguous().reshape({4});
  Tensor broadcast = Tensor::empty({3}, DType::kI64);
  copy_(broadcast, x.narrow(0, 0, 1));  // [1] expanded to [3]
  for (size_t k = 0; k < 4; ++k) CHECK(round_trip.data<int64_t>()[k] == values[k]);
  for (size_t k = 0; k < 3; ++k) CHECK(broadcast.data<int64_t>()[k] == big);
}

TEST_CASE("i64 2^53 + 1 through the C ops table: to_dtype, contiguous, copy_to_host") {
  const pb_ops_table* t = host_ops_table();
  const int64_t big = p2(53) + 1;
  const int64_t data[3] = {big, 0, big + 2};
  const int64_t shape[1] = {3};
  pb_tensor* x = nullptr;
  REQUIRE(t->from_data(data, shape, 1, PB_DTYPE_I64, &x) == nullptr);
  pb_tensor* every_other = nullptr;  // [big, big + 2], stride 2
  REQUIRE(t->slice(x, 0, 0, 3, 2, &every_other) == nullptr);
  pb_tensor* packed = nullptr;
  REQUIRE(t->contiguous(every_other, &packed) == nullptr);
  int64_t out[2] = {0, 0};
  REQUIRE(t->copy_to_host(packed, out, sizeof(out)) == nullptr);
  CHECK(out[0] == big);
  CHECK(out[1] == big + 2);
  pb_tensor* as_f32 = nullptr;
  REQUIRE(t->to_dtype(every_other, PB_DTYPE_F32, &as_f32) == nullptr);
  float f[2] = {0, 0};
  REQUIRE(t->copy_to_host(as_f32, f, sizeof(f)) == nullptr);
  CHECK(f[0] == 9007199254740992.0f);  // 2^53 + 1 -> 2^53 (tie to even)
  CHECK(f[1] == 9007199254740992.0f);  // 2^53 + 3 -> 2^53 (f32 ulp there is 2^30)
  for (pb_tensor* h : {x, every_other, packed, as_f32}) t->release(h);
}

TEST_CASE("fill_ rounds its double once into each dtype") {
  auto filled = [](DType dtype, double value) {
    Tensor t = Tensor::empty({3}, dtype);
    fill_(t, value);
    return t;
  };
  // 1 + 2^-8 + 2^-30: through f32 first it becomes the tie 1 + 2^-8 and then 1 in bf16.
  CHECK(bf16_value(filled(DType::kBF16, 1 + f2(-8) + f2(-30)).data<uint16_t>()[2]) == 1 + f2(-7));
  CHECK(f16_value(filled(DType::kF16, 1 + f2(-11) + f2(-40)).data<uint16_t>()[1]) == 1 + f2(-10));
  CHECK(f16_value(filled(DType::kF16, 65519.99).data<uint16_t>()[0]) == 65504);
  CHECK(std::isinf(f16_value(filled(DType::kF16, 65520.0).data<uint16_t>()[0])));
  CHECK(filled(DType::kI32, 3e9).data<int32_t>()[0] == kI32Max);
  CHECK(filled(DType::kI32, -2.7).data<int32_t>()[1] == -2);
  CHECK(filled(DType::kI64, kNaN).data<int64_t>()[2] == 0);
  CHECK(filled(DType::kI64, 1e19).data<int64_t>()[0] == kI64Max);
  // A strided destination takes the element path rather than the contiguous pattern fill.
  Tensor wide = Tensor::empty({2, 4}, DType::kBF16);
  fill_(wide, 0.0);
  Tensor column = wide.slice(1, 1, 2, 1);
  fill_(column, 1 + f2(-8) + f2(-30));
  CHECK(bf16_value(wide.data<uint16_t>()[1]) == 1 + f2(-7));
  CHECK(bf16_value(wide.data<uint16_t>()[5]) == 1 + f2(-7));
  CHECK(bf16_value(wide.data<uint16_t>()[0]) == 0);
}


// The dense f32 -> bf16 path (both contiguous: the rounding of every operand in a bf16
// autocast scope, vectorised and split over threads) gives the bits of the strided path and
// of round-to-nearest-even written out here, on every special case, across chunk borders and
// in a tail that fills no vector.
TEST_CASE("f32 -> bf16 of contiguous tensors: nearest-even bits, NaN quieted, same as strided") {
  const std::vector<uint32_t> specials = {
      0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u /* tie, even: down */,
      0x3f818000u /* tie, odd: up */, 0x3f808001u /* above the tie: up */,
      0x7f7fffffu /* max float: rounds to inf */, 0x7f800000u, 0xff800000u,
      0x7f800001u /* signalling NaN: quieted */, 0xffc00001u, 0x00000001u /* denormals kept */,
      0x807fffffu, 0x00400000u};
  const int64_t rows = 3 * 32768 / 64 + 1, cols = 64;  // 98368 = 3 chunks of 2^15 + 64
  const int64_t n = rows * cols;
  std::vector<float> values(static_cast<size_t>(n));
  uint32_t state = 12345u;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    uint32_t bits = i % 97 < static_cast<int64_t>(specials.size()) ? specials[size_t(i % 97)] : state;
    std::memcpy(&values[size_t(i)], &bits, 4);
  }
  const Tensor x = Tensor::from_vector(values, {rows, cols});
  const Tensor dense = x.to(DType::kBF16);                       // contiguous -> contiguous
  const Tensor strided = x.transpose(0, 1).to(DType::kBF16);     // strided source
  const auto* d = static_cast<const uint16_t*>(dense.data_ptr());
  const Tensor strided_c = strided.transpose(0, 1).contiguous();
  const auto* s = static_cast<const uint16_t*>(strided_c.data_ptr());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = 0;
    std::memcpy(&u, &values[size_t(i)], 4);
    uint16_t expected;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      expected = static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet, sign and payload top kept
    } else {
      const uint32_t lower = u & 0xffffu, upper = u >> 16;
      const bool up = lower > 0x8000u || (lower == 0x8000u && (upper & 1u) != 0);
      expected = static_cast<uint16_t>(upper + (up ? 1u : 0u));
    }
    mismatches += d[i] != expected || s[i] != expected;
  }
  CHECK(mismatches == 0);
  // Contiguous with a storage offset (rows 1.. of x): the dense path starts at the offset.
  const Tensor rest = x.narrow(0, 1, rows - 1);
  REQUIRE(rest.is_contiguous());
  const Tensor rest_bf16 = rest.to(DType::kBF16);
  const auto* r = static_cast<const uint16_t*>(rest_bf16.data_ptr());
  int64_t offset_mismatches = 0;
  for (int64_t i = 0; i < (rows - 1) * cols; ++i) offset_mismatches += r[i] != d[cols + i];
  CHECK(offset_mismatches == 0);
  // A tail shorter than any vector, on its own.
  const Tensor small = Tensor::from_vector({1.0f, 1.00390625f /* 1 + 2^-8: tie, down */, -3.0f}, {3});
  const Tensor small_bf16 = small.to(DType::kBF16);
  const auto* b = static_cast<const uint16_t*>(small_bf16.data_ptr());
  CHECK(b[0] == 0x3f80u);
  CHECK(b[1] == 0x3f80u);
  CHECK(b[2] == 0xc040u);
}

}  // namespace
}  // namespace patchbay::engine
