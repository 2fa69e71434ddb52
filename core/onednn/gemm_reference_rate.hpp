// Reference figures for benchmarks: oneDNN's own raw GEMM rate and a description of the
// machine. The engine's GEMM benchmark prints its own rate beside
// measure_onednn_matmul_rate() for the same shape, measured in the same run, so a
// regression in the engine's dispatch shows up as a gap between the two numbers.
//
// The measurement creates a fresh dnnl::matmul primitive (plain row-major A [m,k] and
// C [m,n]; B [k,n] plain or pre-packed, see GemmRateOptions; f32 accumulation) and times primitive::execute directly, bypassing
// this library's cache and argument checks: that is "what oneDNN can do" on this shape.
#pragma once

#include <cstdint>
#include <string>

#include "onednn/onednn_ops.hpp"

namespace patchbay::onednn {

struct GemmRateOptions {
  int warmup_iterations = 3;
  int repeats = 7;              // timed samples; the median is reported
  double min_sample_seconds = 0.02;  // each sample runs enough iterations to last this long
  DType output_dtype = DType::kF32;  // bf16 inputs may write f32 or bf16
  // false: B plain row-major [k, n], as the engine hands weights to matmul() (bf16 on AMX
  //   then repacks B inside every call). true: B in the layout oneDNN picks (format
  //   `any`), reordered once before timing: the kernel's ceiling for pre-packed weights.
  bool packed_weights = false;
};

struct GemmRate {
  std::int64_t m = 0, n = 0, k = 0;
  DType input_dtype = DType::kF32;
  DType output_dtype = DType::kF32;
  double median_gflops = 0.0;   // 2*m*n*k / median seconds per call / 1e9
  double best_gflops = 0.0;     // from the fastest sample
  double median_seconds = 0.0;  // per call
  int iterations_per_sample = 0;
  bool packed_weights = false;
  std::string implementation;   // oneDNN's implementation name, e.g. "brg:avx512_core_amx"
};

// Inputs are filled with small deterministic values; throws patchbay::Error on bad sizes.
GemmRate measure_onednn_matmul_rate(std::int64_t m, std::int64_t n, std::int64_t k,
                                    DType input_dtype, const GemmRateOptions& options = {});

struct MachineInfo {
  std::string cpu_model;      // /proc/cpuinfo "model name"
  int logical_cpus = 0;       // std::thread::hardware_concurrency()
  int openmp_threads = 0;     // omp_get_max_threads(): what oneDNN will use
  std::string onednn;         // onednn_build_description()
};

MachineInfo machine_info();
// One line for benchmark headers: "Intel(R) Xeon(R) ... | 2 CPUs, 2 OpenMP threads | oneDNN ..."
std::string machine_info_line(const MachineInfo& info);

}  // namespace patchbay::onednn
