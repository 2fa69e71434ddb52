// Measurements behind `patchbay bench generate`: batch-1 KV-cache decoding speed of a model,
// and the memory-bandwidth bound it is compared with, both measured in the same run.
//
// The bound. Decoding one token at batch 1 is a chain of matrix-vector products: every
// weight matrix is read once per token and each weight takes part in one multiply-add, so on
// a CPU whose caches cannot hold the model the step is limited by how fast memory streams:
//   bound (tokens/s) = read bandwidth (bytes/s) / bytes read per token
//   bytes read per token = streamed weight bytes + KV cache bytes read at that position
// streamed weight bytes = every parameter's bytes, except the tables only gathered from (the
// learned position table wpe, and wte when the head is untied: one row each per token); a
// tied head streams wte once. KV cache bytes at position t = 2 (K and V) · n_layers · t ·
// d_model · 4 (the dense layer's f32 cache). The bandwidth is a plain streaming read (a sum
// over a buffer many times larger than the last-level cache, on the same OpenMP threads the
// engine uses), so the bound is what this machine can deliver, not a datasheet figure. On a
// machine shared with other work that speed drifts over seconds; the token-paired read
// (DecodeTimingOptions::paired_read) measures it after every step instead.
//
// Thread safety: none (a benchmark drives one model from one thread).
#pragma once

#include <cstdint>
#include <vector>

#include "model/language_model.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

// Both measurements keep wall time and process CPU time (every thread's, CLOCK_PROCESS_CPUTIME_ID).
// On a machine shared with other work, wall-time rates fall with the share of the cores this
// process gets while CPU-time rates do not: bytes or tokens per CPU-second, compared with
// each other, still give the fraction of the bound (spinning OpenMP threads count as CPU time,
// so a multi-threaded decode's CPU-time figure errs low, never high).
struct ReadBandwidth {
  double median_gbps = 0;  // GB/s = 1e9 bytes/s, median over the passes
  double best_gbps = 0;
  double median_gbps_per_cpu = 0;  // bytes per CPU-second of all threads, median over passes
  std::int64_t buffer_bytes = 0;
  int passes = 0;
  int threads = 0;
};

// Sums `buffer_bytes` of floats (default 512 MiB) `passes` times on omp_get_max_threads()
// threads; the buffer is written once first so every page is mapped. Throws
// Error(kInvalidArgument) for buffer_bytes < 1 MiB or passes < 1.
ReadBandwidth measure_read_bandwidth(std::int64_t buffer_bytes = std::int64_t{512} << 20,
                                     int passes = 7);

// Bytes of weights one batch-1 decode step reads (see the file comment).
std::int64_t streamed_weight_bytes(const model::LanguageModel& model);
// Bytes of the dense layers' f32 KV cache read by the step at `position` (keys and values of
// positions 0..position).
std::int64_t kv_cache_bytes_read(const model::ModelOptions& options, std::int64_t position);

struct DecodeTimingOptions {
  std::int64_t prompt_tokens = 16;  // random ids, prefilled in one step (not timed)
  std::int64_t new_tokens = 64;     // timed decode steps
  std::int64_t warmup_tokens = 4;   // untimed decode steps before them
  std::uint64_t seed = 0;           // prompt ids
  // After each timed step, a plain streaming read of the step's bytes (streamed weights + KV
  // cache at its position) from a buffer of their size, timed on its own: the bound measured
  // next to every token, so that memory whose speed drifts over seconds moves both sides.
  bool paired_read = false;
  // Profile the skinny matmul kernel (batch-1 products) during the timed steps.
  bool profile_products = false;
};

struct DecodeTiming {
  std::int64_t tokens = 0;       // timed steps
  double model_seconds = 0;      // decode_step + copying the last logits to the host
  double sampling_seconds = 0;   // chain.next over the logits
  double tokens_per_second = 0;  // tokens / (model + sampling)
  double cpu_seconds = 0;        // process CPU time of the timed steps (all threads)
  double tokens_per_cpu_second = 0;
  double mean_kv_bytes_read = 0;        // kv_cache_bytes_read averaged over the timed positions
  // paired_read: seconds of the reads after the timed steps, and the bytes they read; per
  // timed step, its read's seconds over its own (model + sampling), in step order.
  double paired_read_seconds = 0;
  double paired_read_bytes = 0;
  std::vector<double> paired_ratios;
  // profile_products: time in the skinny matmul kernel during the timed steps, and the
  // weight bytes it read (kernels::SkinnyProfile); the rest of model_seconds is the other ops.
  double product_seconds = 0;
  double product_weight_bytes = 0;
  std::vector<std::int32_t> generated;  // every decoded token (warmup and timed)
};

// Prefills a random prompt, then decodes warmup + new tokens one at a time with `chain`
// choosing each next token (the chain is reset first), with the paired reads and the
// products' profile when asked for. Needs prompt + warmup + new <=
// context_length (Error(kInvalidArgument) naming the numbers otherwise).
DecodeTiming time_decoding(model::LanguageModel& model, runtime::SamplerChain& chain,
                           const DecodeTimingOptions& options);

}  // namespace patchbay::generate
