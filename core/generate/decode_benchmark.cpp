// Decoding benchmark pieces (see decode_benchmark.hpp): the streaming-read bandwidth, the
// bytes a decode step reads, and the timed decode loop.
#include "generate/decode_benchmark.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>

#include "common/error.hpp"
#include "common/host_memory.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/skinny_matmul.hpp"

namespace patchbay::generate {
namespace {

namespace eng = engine;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Sum of data[0, count) with 64 independent accumulators (four 512-bit vectors' worth), so
// the loop is bound by loads, not by the latency of one add chain. Cloned per ISA so the
// widest loads this CPU has are used without -march for the whole library.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PB_READ_LOOP_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PB_READ_LOOP_CLONES
#endif
PB_READ_LOOP_CLONES float sum_floats(const float* data, std::int64_t count) {
  constexpr int kLanes = 64;
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += data[i + l];
  }
  for (; i < count; ++i) acc[0] += data[i];
  float total = 0;
  for (float a : acc) total += a;
  return total;
}

// Seconds to sum data[0, count) on `threads` OpenMP threads, each an equal contiguous chunk
// with a 64-byte aligned start: the streaming read every bound here is measured with.
double timed_parallel_read(const float* data, std::int64_t count, int threads) {
  static volatile float sink = 0;  // keeps the sums
  const auto start = Clock::now();
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const std::int64_t chunk = (count / n + 15) / 16 * 16;
    const std::int64_t begin = std::min(count, chunk * t);
    const std::int64_t end = std::min(count, begin + chunk);
    total += sum_floats(data + begin, end - begin);
  }
  const double seconds = since(start);
  sink = sink + total;
  return seconds;
}

struct HostDeleter {
  void operator()(float* p) const { host_free(p); }
};

// A buffer of `count` floats for paired reads, written by the threads that read it (first
// touch places its pages near them, as measure_read_bandwidth's).
std::unique_ptr<float, HostDeleter> read_buffer(std::int64_t count) {
  std::unique_ptr<float, HostDeleter> buffer(
      static_cast<float*>(host_allocate(static_cast<std::size_t>(count) * 4)));
  if (!buffer)
    throw Error(ErrorKind::kInternal, "bench generate: out of memory for the paired read");
  float* data = buffer.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(i & 1023) * 1e-3f;
  return buffer;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(std::int64_t buffer_bytes, int passes) {
  if (buffer_bytes < (std::int64_t{1} << 20) || passes < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                "measure_read_bandwidth: need a buffer of at least 1 MiB and passes >= 1, found " +
                    std::to_string(buffer_bytes) + " bytes and " + std::to_string(passes) +
                    " passes");
  }
  const std::int64_t count = buffer_bytes / 4;
  const std::size_t bytes = static_cast<std::size_t>(count) * 4;
  // The same kind of memory as the model's weights (huge pages where the engine's tensors get
  // them), so the bound is not lowered by TLB misses the weights do not pay.
  std::unique_ptr<float, HostDeleter> buffer(static_cast<float*>(host_allocate(bytes)));
  if (!buffer) throw Error(ErrorKind::kInternal, "measure_read_bandwidth: out of memory");
  float* data = buffer.get();
  const int threads = omp_get_max_threads();
  // Written by the threads that later read it (first touch places pages near them).
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(i & 1023) * 1e-3f;

  std::vector<double> gbps, gbps_per_cpu;
  for (int pass = 0; pass < passes + 1; ++pass) {  // pass 0 warms up
    const double cpu_start = process_cpu_seconds();
    const double seconds = timed_parallel_read(data, count, threads);
    const double cpu_seconds = process_cpu_seconds() - cpu_start;
    if (pass > 0) {
      gbps.push_back(static_cast<double>(bytes) / seconds / 1e9);
      gbps_per_cpu.push_back(static_cast<double>(bytes) / std::max(cpu_seconds, 1e-9) / 1e9);
    }
  }
  std::sort(gbps.begin(), gbps.end());
  std::sort(gbps_per_cpu.begin(), gbps_per_cpu.end());
  ReadBandwidth result;
  result.median_gbps = gbps[gbps.size() / 2];
  result.median_gbps_per_cpu = gbps_per_cpu[gbps_per_cpu.size() / 2];
  result.best_gbps = gbps.back();
  result.buffer_bytes = static_cast<std::int64_t>(bytes);
  result.passes = passes;
  result.threads = threads;
  return result;
}

std::int64_t streamed_weight_bytes(const model::LanguageModel& model) {
  const model::ModelOptions& o = model.options();
  std::int64_t total = 0;
  for (const model::NamedParameter& p : model.parameters()) {
    const bool gathered_only =
        p.name == "wpe.weight" || (p.name == "wte.weight" && !o.tie_embeddings);
    if (!gathered_only) total += static_cast<std::int64_t>(p.tensor.nbytes());
  }
  return total;
}

std::int64_t kv_cache_bytes_read(const model::ModelOptions& options, std::int64_t position) {
  return 2 * options.n_layers * (position + 1) * options.d_model * 4;
}

DecodeTiming time_decoding(model::LanguageModel& model, runtime::SamplerChain& chain,
                           const DecodeTimingOptions& options) {
  const model::ModelOptions& o = model.options();
  const std::int64_t total = options.prompt_tokens + options.warmup_tokens + options.new_tokens;
  if (options.prompt_tokens < 1 || options.new_tokens < 1 || options.warmup_tokens < 0 ||
      total > o.context_length) {
    throw Error(ErrorKind::kInvalidArgument,
                "bench generate: need prompt >= 1, new tokens >= 1 and prompt + warmup + new <= "
                "the context length " +
                    std::to_string(o.context_length) + ", found " +
                    std::to_string(options.prompt_tokens) + " + " +
                    std::to_string(options.warmup_tokens) + " + " +
                    std::to_string(options.new_tokens) + "; use fewer tokens");
  }
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(o.vocab_size - 1));
  std::vector<std::int32_t> history(static_cast<std::size_t>(options.prompt_tokens));
  for (std::int32_t& t : history) t = id(rng);
  const std::size_t prompt_len = history.size();

  chain.reset();
  model::DecodeState state = model.start_decoding(1, total);
  eng::Tensor logits = model.decode_step(
      state, eng::Tensor::from_data(history.data(), {1, options.prompt_tokens}, eng::DType::kI32),
      1);
  std::vector<float> last = logits.to_vector();  // [1, 1, V]: the prompt's last position

  DecodeTiming timing;
  const std::int64_t weight_bytes = streamed_weight_bytes(model);
  // The paired reads walk a buffer of at least kPairedBufferBytes, each from where the last
  // ended (wrapping): a model whose step fits in the caches (the quickstart's 3.5 MB) would
  // otherwise be read back from them, and its bound would be the caches' speed.
  constexpr std::int64_t kPairedBufferBytes = std::int64_t{512} << 20;
  std::unique_ptr<float, HostDeleter> paired;
  std::int64_t paired_count = 0, paired_offset = 0;
  if (options.paired_read) {
    paired_count = std::max(weight_bytes + kv_cache_bytes_read(o, total), kPairedBufferBytes) / 4;
    paired = read_buffer(paired_count);
  }
  double cpu_start = 0, paired_cpu_seconds = 0;
  for (std::int64_t step = 0; step < options.warmup_tokens + options.new_tokens; ++step) {
    const bool timed = step >= options.warmup_tokens;
    if (step == options.warmup_tokens) {
      cpu_start = process_cpu_seconds();
      (void)kernels::take_skinny_profile();
      kernels::set_skinny_profiling(options.profile_products);
    }
    auto start = Clock::now();
    const std::int32_t token = chain.next(last, history, prompt_len);
    const double sampling_seconds = since(start);
    if (timed) timing.sampling_seconds += sampling_seconds;
    history.push_back(token);
    timing.generated.push_back(token);
    const std::int64_t kv_bytes = kv_cache_bytes_read(o, state.length());
    if (timed) timing.mean_kv_bytes_read += static_cast<double>(kv_bytes);
    start = Clock::now();
    logits = model.decode_step(state, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32));
    last = logits.to_vector();
    if (!timed) continue;
    const double model_seconds = since(start);
    timing.model_seconds += model_seconds;
    if (paired) {
      const double cpu_before = process_cpu_seconds();
      const std::int64_t count = (weight_bytes + kv_bytes) / 4;
      if (paired_offset + count > paired_count) paired_offset = 0;
      const double read_seconds =
          timed_parallel_read(paired.get() + paired_offset, count, omp_get_max_threads());
      paired_offset += count;
      timing.paired_read_seconds += read_seconds;
      timing.paired_read_bytes += static_cast<double>(count * 4);
      timing.paired_ratios.push_back(read_seconds / (model_seconds + sampling_seconds));
      paired_cpu_seconds += process_cpu_seconds() - cpu_before;
    }
  }
  kernels::set_skinny_profiling(false);
  const kernels::SkinnyProfile products = kernels::take_skinny_profile();
  timing.product_seconds = products.seconds;
  timing.product_weight_bytes = static_cast<double>(products.weight_bytes);
  timing.cpu_seconds = process_cpu_seconds() - cpu_start - paired_cpu_seconds;
  timing.tokens = options.new_tokens;
  timing.tokens_per_cpu_second =
      static_cast<double>(options.new_tokens) / std::max(1e-12, timing.cpu_seconds);
  timing.mean_kv_bytes_read /= static_cast<double>(options.new_tokens);
  timing.tokens_per_second = static_cast<double>(options.new_tokens) /
                             std::max(1e-12, timing.model_seconds + timing.sampling_seconds);
  return timing;
}

}  // namespace patchbay::generate
