// oneDNN's own raw matmul rate and the machine description for benchmark headers (see
// gemm_reference_rate.hpp). Deliberately independent of the primitive cache: a fresh
// primitive, plain row-major layouts, execute() in a timed loop.
#include "onednn/gemm_reference_rate.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "onednn/bf16_through_f32.hpp"
#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using Clock = std::chrono::steady_clock;

// Deterministic values in [-1, 1) so products stay finite in bf16 and f32.
float fill_value(std::int64_t i) {
  return static_cast<float>((i * 7919) % 2000 - 1000) / 1000.0f;
}

std::uint16_t bf16_value(std::int64_t i) {
  const float value = fill_value(i);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

void fill(dnnl::memory& memory, std::int64_t count, DType dtype) {
  void* data = memory.get_data_handle();
  for (std::int64_t i = 0; i < count; ++i) {
    if (dtype == DType::kF32) {
      static_cast<float*>(data)[i] = fill_value(i);
    } else {
      static_cast<std::uint16_t*>(data)[i] = bf16_value(i);
    }
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// Times run(iterations) after a warm-up: enough iterations per sample to last
// min_sample_seconds, `repeats` samples, the median and best per-call rate into `rate`.
template <class Run>
void time_calls(Run&& run, const GemmRateOptions& options, GemmRate& rate) {
  run(std::max(1, options.warmup_iterations));
  int iterations = 1;
  for (;;) {
    const auto start = Clock::now();
    run(iterations);
    const double elapsed = seconds_since(start);
    if (elapsed >= options.min_sample_seconds || iterations >= (1 << 20)) break;
    const double scale = elapsed > 0.0 ? options.min_sample_seconds / elapsed * 1.2 : 16.0;
    iterations = std::max(iterations + 1, static_cast<int>(iterations * std::min(scale, 16.0)));
  }
  std::vector<double> per_call;
  for (int r = 0; r < options.repeats; ++r) {
    const auto start = Clock::now();
    run(iterations);
    per_call.push_back(seconds_since(start) / iterations);
  }
  std::sort(per_call.begin(), per_call.end());
  const double flops = 2.0 * static_cast<double>(rate.m) * static_cast<double>(rate.n) *
                       static_cast<double>(rate.k);
  rate.iterations_per_sample = iterations;
  rate.median_seconds = per_call[per_call.size() / 2];
  rate.median_gflops = flops / rate.median_seconds / 1e9;
  rate.best_gflops = flops / per_call.front() / 1e9;
}

// bf16 on a CPU without oneDNN bf16 kernels: the rate of the path the engine takes there
// (matmul() widening the operands to f32, bf16_through_f32.cpp), conversions included.
void measure_bf16_through_f32(const GemmRateOptions& options, GemmRate& rate) {
  const std::int64_t m = rate.m, n = rate.n, k = rate.k;
  std::vector<std::uint16_t> a(static_cast<std::size_t>(m * k));
  std::vector<std::uint16_t> b(static_cast<std::size_t>(k * n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bf16_value(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = bf16_value(static_cast<std::int64_t>(i));
  std::vector<float> c(static_cast<std::size_t>(m * n));
  std::vector<std::uint16_t> c16(options.output_dtype == DType::kBF16 ? c.size() : 0);
  MatmulArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = {a.data(), DType::kBF16, 0, k, 1};
  args.b = {b.data(), DType::kBF16, 0, n, 1};
  args.c = {c.data(), DType::kF32, 0, n, 1};
  if (options.output_dtype == DType::kBF16) args.c = {c16.data(), DType::kBF16, 0, n, 1};
  rate.implementation = "bf16 through f32 (this CPU's oneDNN has no bf16 matmul)";
  time_calls(
      [&](int iterations) {
        for (int i = 0; i < iterations; ++i) matmul(args);
      },
      options, rate);
}

}  // namespace

GemmRate measure_onednn_matmul_rate(std::int64_t m, std::int64_t n, std::int64_t k,
                                    DType input_dtype, const GemmRateOptions& options) {
  if (m <= 0 || n <= 0 || k <= 0 || options.repeats <= 0 || options.warmup_iterations < 0) {
    detail::throw_invalid("gemm_reference_rate",
                          "need m, n, k, repeats >= 1; got m " + std::to_string(m) + ", n " +
                              std::to_string(n) + ", k " + std::to_string(k));
  }
  if (input_dtype == DType::kF32 && options.output_dtype != DType::kF32) {
    detail::throw_invalid("gemm_reference_rate", "f32 inputs need an f32 output");
  }
  GemmRate rate;
  rate.m = m;
  rate.n = n;
  rate.k = k;
  rate.input_dtype = input_dtype;
  rate.output_dtype = options.output_dtype;
  rate.packed_weights = options.packed_weights;
  if (input_dtype == DType::kBF16 && !bf16_kernels_available()) {
    measure_bf16_through_f32(options, rate);
    return rate;
  }
  const std::string shapes = "[m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                             std::to_string(k) + "]";
  detail::run_guarded("gemm_reference_rate", [&] { return shapes; }, [&] {
    using tag = dnnl::memory::format_tag;
    dnnl::engine& engine = detail::cpu_engine();
    dnnl::stream stream(engine);
    const dnnl::memory::desc a_desc({m, k}, detail::to_dnnl(input_dtype), tag::ab);
    const dnnl::memory::desc b_plain({k, n}, detail::to_dnnl(input_dtype), tag::ab);
    const dnnl::memory::desc b_request =
        options.packed_weights
            ? dnnl::memory::desc({k, n}, detail::to_dnnl(input_dtype), tag::any)
            : b_plain;
    const dnnl::memory::desc c_desc({m, n}, detail::to_dnnl(options.output_dtype), tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_request, c_desc), engine);
    rate.implementation = pd.impl_info_str();
    dnnl::matmul primitive(pd);
    dnnl::memory a(a_desc, engine), b_source(b_plain, engine), c(c_desc, engine);
    fill(a, m * k, input_dtype);
    fill(b_source, k * n, input_dtype);
    dnnl::memory b = b_source;
    if (pd.weights_desc() != b_plain) {  // packed: reorder once, outside the timing
      b = dnnl::memory(pd.weights_desc(), engine);
      dnnl::reorder(b_source, b).execute(stream, b_source, b);
      stream.wait();
    }
    const std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    time_calls(
        [&](int iterations) {
          for (int i = 0; i < iterations; ++i) primitive.execute(stream, args);
          stream.wait();
        },
        options, rate);
  });
  return rate;
}

MachineInfo machine_info() {
  MachineInfo info;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) info.cpu_model = line.substr(colon + 2);
      break;
    }
  }
  if (info.cpu_model.empty()) info.cpu_model = "unknown CPU";
  info.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  info.openmp_threads = omp_get_max_threads();
  info.onednn = onednn_build_description();
  return info;
}

std::string machine_info_line(const MachineInfo& info) {
  return info.cpu_model + " | " + std::to_string(info.logical_cpus) + " CPUs, " +
         std::to_string(info.openmp_threads) + " OpenMP threads | " + info.onednn;
}

}  // namespace patchbay::onednn
