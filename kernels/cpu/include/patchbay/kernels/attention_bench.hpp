// Benchmark of the flash attention against the naive reference, as a plain function so the
// engine can expose it (`patchbay bench ops`) and a developer can run it from a small driver.
// Not a test: it asserts nothing and takes seconds to minutes.
//
// FLOP convention: forward = 4 * B * H * Tq * Tk * D (QK^T and PV, 2 FLOP per multiply-add),
// halved for causal with Tq == Tk (4*T^2*D*H/2); backward = 2.5 x forward (five products
// instead of two). exp, max and the softmax bookkeeping are not counted. Both kernels are
// charged the same nominal count, so GFLOP/s compare directly (the naive one computes in
// double and does not skip masked entries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels {

struct AttentionBenchConfig {
  std::vector<std::int64_t> seq_lens = {256, 512, 1024, 2048, 4096, 8192, 16384};  // Tq == Tk
  std::int64_t batch = 1;
  std::int64_t heads = 12;
  std::int64_t head_dim = 64;
  bool causal = true;
  int num_threads = 0;                              // 0 = OpenMP default
  KernelIsa isa = KernelIsa::automatic;             // flash code path
  std::size_t naive_max_workspace_bytes = 4ull << 30;  // naive skipped above this
  std::int64_t naive_max_seq_len = 0;               // also skipped above this (0 = no limit)
  double min_seconds_per_measure = 0.2;             // repeat until this much time is spent; best run kept
  // Options: when window > 0 or alibi, a "flash*" row with them follows each plain flash row
  // (same tensors, same run), so their cost or saving reads as a ratio to the plain kernel.
  std::int64_t window = 0;
  bool alibi = false;
  // Packed sequences: when > 0, a "packed" row follows each plain flash row (same tensors,
  // same run): segment_ids cut every row into segments of this many positions (the last one
  // shorter), charged the plain row's nominal FLOP, so its GF/s over the flash row's is the
  // speed-up from skipping the tiles outside the segments (ideally about T / this, causal).
  std::int64_t packed_segment_len = 0;
  // A "bf16" row after each flash row: the bf16 kernel (q_bf16 ...) on the same inputs
  // rounded to bf16, where the CPU has AVX512-BF16 (and D is even, the ISA not forced below
  // avx512); its max|diff| is against the f32 flash output.
  bool bf16 = true;
};

struct AttentionBenchRow {
  std::int64_t seq_len = 0;
  std::string kernel;       // "flash", "bf16", "flash*" (with the options), "packed" or "naive"
  std::string skip_reason;  // non-empty: not run, the figures below are 0
  double forward_ms = 0, backward_ms = 0;  // wall clock, best of the repeats
  // Process CPU time (all threads) of the same best runs: on a shared, loaded machine
  // wall >> cpu / threads shows time lost to other processes rather than to the kernel.
  double forward_cpu_ms = 0, backward_cpu_ms = 0;
  double forward_gflops = 0, backward_gflops = 0;
  std::size_t forward_workspace_bytes = 0, backward_workspace_bytes = 0;
  double max_abs_diff_vs_flash = -1;  // naive rows: max |out_naive - out_flash|; -1 = n/a
};

// Nominal FLOP of one forward (see the convention above).
double attention_forward_flop(std::int64_t batch, std::int64_t heads, std::int64_t q_len,
                              std::int64_t kv_len, std::int64_t head_dim, bool causal);

// Runs forward then backward for each length, flash then naive. Inputs are deterministic
// pseudo-random values in [-1, 1].
std::vector<AttentionBenchRow> run_attention_bench(const AttentionBenchConfig& config);

// A fixed-width table, one line per row, with the FLOP convention in the header line.
void print_attention_bench(const std::vector<AttentionBenchRow>& rows, std::ostream& os);

}  // namespace patchbay::kernels
