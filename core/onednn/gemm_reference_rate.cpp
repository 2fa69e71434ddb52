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

#include "onednn/primitive_cache.hpp"

namespace patchbay::onednn {
namespace {

using Clock = std::chrono::steady_clock;

// Deterministic values in [-1, 1) so products stay finite in bf16 and f32.
void fill(dnnl::memory& memory, std::int64_t count, DType dtype) {
  void* data = memory.get_data_handle();
  for (std::int64_t i = 0; i < count; ++i) {
    const float value = static_cast<float>((i * 7919) % 2000 - 1000) / 1000.0f;
    if (dtype == DType::kF32) {
      static_cast<float*>(data)[i] = value;
    } else {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &value, sizeof bits);
      static_cast<std::uint16_t*>(data)[i] = static_cast<std::uint16_t>(bits >> 16);
    }
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
    auto run = [&](int iterations) {
      for (int i = 0; i < iterations; ++i) primitive.execute(stream, args);
      stream.wait();
    };

    run(std::max(1, options.warmup_iterations));
    // Calibrate: enough iterations per sample to last min_sample_seconds.
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
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                         static_cast<double>(k);
    rate.iterations_per_sample = iterations;
    rate.median_seconds = per_call[per_call.size() / 2];
    rate.median_gflops = flops / rate.median_seconds / 1e9;
    rate.best_gflops = flops / per_call.front() / 1e9;
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
