// MPI datatypes and reduction ops for the engine's dtypes, so tensors travel in their own
// type (never converted through another one on the wire):
//   f32 -> MPI_FLOAT, i32 -> MPI_INT32_T, i64 -> MPI_INT64_T (MPI's built-in SUM / MAX);
//   bf16, f16 -> two-byte contiguous types of our own, reduced by user ops (MPI_Op_create)
//   that add or compare element pairs in float and round the result back to nearest-even, as
//   a bf16/f16 add in hardware would. Summation order is MPI's (for two ranks a + b, exact
//   up to that one rounding).
// The derived types and ops are created once, after MPI_Init, and freed before MPI_Finalize.
#pragma once

#include <mpi.h>
#include <patchbay/ops.h>

#include <cstdint>

namespace patchbay_parallel_mpi {

struct MpiTypes {
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum = MPI_OP_NULL;
  MPI_Op bf16_max = MPI_OP_NULL;
  MPI_Op f16_sum = MPI_OP_NULL;
  MPI_Op f16_max = MPI_OP_NULL;
};

// Creates (once) and returns the derived types and ops; MPI must be initialised.
const MpiTypes& mpi_types();
// Frees them (before MPI_Finalize); a later mpi_types() would create them again.
void free_mpi_types();

// The MPI datatype of one element of `dtype`, and its size in bytes.
MPI_Datatype mpi_datatype(pb_dtype dtype);
size_t dtype_size(pb_dtype dtype);
// SUM (also used for AVG before the division) or MAX for `dtype`.
MPI_Op mpi_reduce_op(pb_dtype dtype, bool max);

// Conversions used by the user ops and by AVG's division (round to nearest even; NaN kept).
float bf16_to_float(uint16_t v);
uint16_t float_to_bf16(float f);
float f16_to_float(uint16_t v);
uint16_t float_to_f16(float f);

}  // namespace patchbay_parallel_mpi
