// The machine's arithmetic peak, measured: chains of independent vector multiply-adds on every
// OpenMP thread, with no memory traffic, so a benchmark can say how close a GEMM rate (oneDNN's
// reference in `bench train`) comes to what the cores can do at all, in the same run and at
// the clock the cores run at then (a datasheet peak assumes a frequency the machine may not
// hold).
//
//   f32:  vfmadd231ps on kPeakChains accumulators (AVX-512F: 16 lanes, AVX2+FMA: 8 lanes),
//         2 FLOPs per lane per instruction;
//   bf16: vdpbf16ps (AVX512-BF16) on kPeakChains accumulators, 16 lanes each adding two bf16
//         products, 4 FLOPs per lane per instruction.
// kPeakChains independent chains cover the latency of either instruction on two pipes on the
// x86 cores we run on (4–6 cycles), so the loop is bound by throughput.
//
// Paths are chosen at run time (__builtin_cpu_supports); on other CPUs the figure is 0 and
// the ISA name empty.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace patchbay::kernels {

inline constexpr int kPeakChains = 16;

struct PeakRate {
  double median_gflops = 0;  // over the rounds; 0 when the ISA is missing
  double best_gflops = 0;
  std::string isa;  // "avx512f", "avx2+fma", "avx512bf16"; empty when not measured
};

struct FmaPeak {
  PeakRate f32, bf16;
  int threads = 0;  // omp_get_max_threads()
};

// `rounds` timed rounds per precision (each thread runs `iterations` loop trips of kPeakChains
// instructions per round), after one untimed round. Throws std::invalid_argument for rounds < 1
// or iterations < 1.
FmaPeak measure_fma_peak(int rounds = 5, std::int64_t iterations = std::int64_t{1} << 22);

// For tests: one thread's f32 probe run for `iterations` trips from accumulators
// a[c] = start + c, every lane doing a = a * scale + step (one rounding, as fmaf). Returns
// lane 0 of each chain (kPeakChains values), or an empty vector when the CPU lacks the path.
// `avx512` picks the AVX-512 path, else AVX2+FMA.
std::vector<float> fma_peak_f32_chains(bool avx512, std::int64_t iterations, float start,
                                       float scale, float step);

// For tests: one thread's bf16 probe from zero accumulators, every instruction adding
// a_even * b_even + a_odd * b_odd to each lane with all four factors the bf16 values given.
// Returns lane 0 of each chain, or an empty vector without AVX512-BF16.
std::vector<float> fma_peak_bf16_chains(std::int64_t iterations, float a, float b);

}  // namespace patchbay::kernels
