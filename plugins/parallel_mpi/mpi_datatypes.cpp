// MPI datatypes and user reduction ops for bf16 / f16 (see mpi_datatypes.hpp).
#include "mpi_datatypes.hpp"

#include <bit>
#include <cmath>
#include <patchbay/component.hpp>
#include <string>

namespace patchbay_parallel_mpi {
namespace {

MpiTypes g_types;
bool g_created = false;

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw patchbay::PluginError(PB_STATUS_INTERNAL,
                              std::string(what) + " failed: " + std::string(text, length));
}

// The user-op callbacks: inout[i] = inout[i] (+ or max) in[i], element by element.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), bool Max>
void reduce_halves(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]);
    const float y = ToFloat(b[i]);
    if constexpr (Max) {
      b[i] = (std::isnan(x) || x > y) ? a[i]
                                      : b[i];  // NaN wins, as MPI_MAX on floats gives no promise
    } else {
      b[i] = FromFloat(x + y);
    }
  }
}

}  // namespace

float bf16_to_float(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN stays NaN
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);                 // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_float(uint16_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x8000) << 16;
  const uint32_t exponent = (v >> 10) & 0x1F;
  const uint32_t mantissa = v & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float magnitude = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7E00);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {
    // Subnormal range: the value in units of 2^-24, rounded to nearest even by rint.
    const float units = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  const uint32_t m = bits & 0x7FFFFFFF;
  // Rebias the exponent (127 -> 15), then round the 23-bit mantissa to 10 bits, nearest even.
  const uint32_t rebiased = m - (112u << 23);
  const uint32_t rounded = rebiased + 0xFFF + ((rebiased >> 13) & 1);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

const MpiTypes& mpi_types() {
  if (g_created) return g_types;
  check(MPI_Type_contiguous(2, MPI_BYTE, &g_types.bf16), "MPI_Type_contiguous (bf16)");
  check(MPI_Type_commit(&g_types.bf16), "MPI_Type_commit (bf16)");
  check(MPI_Type_contiguous(2, MPI_BYTE, &g_types.f16), "MPI_Type_contiguous (f16)");
  check(MPI_Type_commit(&g_types.f16), "MPI_Type_commit (f16)");
  check(MPI_Op_create(&reduce_halves<bf16_to_float, float_to_bf16, false>, 1, &g_types.bf16_sum),
        "MPI_Op_create");
  check(MPI_Op_create(&reduce_halves<bf16_to_float, float_to_bf16, true>, 1, &g_types.bf16_max),
        "MPI_Op_create");
  check(MPI_Op_create(&reduce_halves<f16_to_float, float_to_f16, false>, 1, &g_types.f16_sum),
        "MPI_Op_create");
  check(MPI_Op_create(&reduce_halves<f16_to_float, float_to_f16, true>, 1, &g_types.f16_max),
        "MPI_Op_create");
  g_created = true;
  return g_types;
}

void free_mpi_types() {
  if (!g_created) return;
  MPI_Op_free(&g_types.bf16_sum);
  MPI_Op_free(&g_types.bf16_max);
  MPI_Op_free(&g_types.f16_sum);
  MPI_Op_free(&g_types.f16_max);
  MPI_Type_free(&g_types.bf16);
  MPI_Type_free(&g_types.f16);
  g_types = MpiTypes{};
  g_created = false;
}

MPI_Datatype mpi_datatype(pb_dtype dtype) {
  switch (dtype) {
    case PB_DTYPE_F32:
      return MPI_FLOAT;
    case PB_DTYPE_BF16:
      return mpi_types().bf16;
    case PB_DTYPE_F16:
      return mpi_types().f16;
    case PB_DTYPE_I32:
      return MPI_INT32_T;
    case PB_DTYPE_I64:
      return MPI_INT64_T;
  }
  throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                              "unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

size_t dtype_size(pb_dtype dtype) {
  switch (dtype) {
    case PB_DTYPE_F32:
      return 4;
    case PB_DTYPE_BF16:
      return 2;
    case PB_DTYPE_F16:
      return 2;
    case PB_DTYPE_I32:
      return 4;
    case PB_DTYPE_I64:
      return 8;
  }
  throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                              "unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

MPI_Op mpi_reduce_op(pb_dtype dtype, bool max) {
  switch (dtype) {
    case PB_DTYPE_BF16:
      return max ? mpi_types().bf16_max : mpi_types().bf16_sum;
    case PB_DTYPE_F16:
      return max ? mpi_types().f16_max : mpi_types().f16_sum;
    default:
      return max ? MPI_MAX : MPI_SUM;
  }
}

}  // namespace patchbay_parallel_mpi
