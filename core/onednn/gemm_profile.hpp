// Per-shape time of onednn::matmul while profiling is on: which GEMMs of a training step run
// below oneDNN's reference rate (`patchbay bench train --gemm-breakdown`). Off by default;
// while off a matmul pays one relaxed atomic load.
//
// A shape is the whole call as the caller made it (before matmul.cpp's own row or depth
// slices and its weight repacking, whose time it includes): dtype, [m x k] x [k x n], which
// operands are stored transposed, and the batch when > 1. Timing is wall time around the
// call on the calling thread (oneDNN runs it on the OpenMP threads and returns when done).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace patchbay::onednn {

struct GemmShapeStat {
  std::string shape;        // e.g. "bf16 [1024 x 768] x [768 x 2304]^T"
  std::int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;       // 2 * batch * m * n * k per call, summed
};

// Starts (true) or stops (false) recording, process-wide. Starting does not clear.
void set_gemm_profiling(bool on);
bool gemm_profiling();

// What was recorded since the last take, most time first; clears it.
std::vector<GemmShapeStat> take_gemm_profile();

// The summed time and FLOPs of the stats whose shape starts with `dtype` ("f32" or "bf16").
GemmShapeStat gemm_profile_total(const std::vector<GemmShapeStat>& stats,
                                 const std::string& dtype);

// The stats whose shape starts with `dtype` ("f32" or "bf16") as a table, most time first:
// per step (stats summed over `steps` steps of `step_seconds` each) the milliseconds, calls,
// GFLOP/s and share of `reference_gflops`, then the total and its share of the step. Rows
// past `max_rows` are summed into one line.
std::string format_gemm_profile(const std::vector<GemmShapeStat>& stats, const std::string& dtype,
                                std::int64_t steps, double step_seconds, double reference_gflops,
                                std::size_t max_rows = 16);

namespace detail {
// Called by matmul() for each call while profiling is on.
void record_gemm(const std::string& shape, double seconds, double flops);
}  // namespace detail

}  // namespace patchbay::onednn
