// The GPU test harness (gpu_test_harness.hpp): registry, GPU detection, comparisons, main.
// Usage: <binary> [--list] [--filter SUBSTRING] [--seed N]
#include "gpu_test_harness.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "patchbay/kernels/cuda/fill.hpp"

namespace patchbay::kernels::cuda::testing {
namespace {

struct Registered {
  const char* name;
  TestFunction function;
};

std::vector<Registered>& registry() {
  static std::vector<Registered> tests;
  return tests;
}

// Empty when a GPU is usable; else why not. Any error at initialisation means "no GPU": without
// a driver cudaGetDeviceCount says "CUDA driver version is insufficient", not "no device".
std::string gpu_unavailable_reason() {
  int devices = 0;
  if (const cudaError_t s = cudaGetDeviceCount(&devices); s != cudaSuccess)
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(s);
  if (devices == 0) return "cudaGetDeviceCount found no device";
  if (const cudaError_t s = cudaSetDevice(0); s != cudaSuccess)
    return std::string("cudaSetDevice(0) failed: ") + cudaGetErrorString(s);
  if (const cudaError_t s = cudaFree(nullptr); s != cudaSuccess)  // creates the context
    return std::string("creating a CUDA context failed: ") + cudaGetErrorString(s);
  return "";
}

void print_device() {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device 0: %s, sm_%d%d, %d SMs, %.1f GiB; driver API %d, runtime %d\n",
              properties.name, properties.major, properties.minor, properties.multiProcessorCount,
              double(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), driver, runtime);
}

}  // namespace

void throw_if_cuda_error(cudaError_t status, const char* expression, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw TestFailure(std::string(file) + ":" + std::to_string(line) + ": " + expression +
                    " returned " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                    ")");
}

TestRegistration::TestRegistration(const char* name, TestFunction function) {
  registry().push_back({name, function});
}

TestContext::TestContext(std::string name, uint64_t seed) : name_(std::move(name)), random_(seed) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

TestContext::~TestContext() { cudaStreamDestroy(stream_); }

std::vector<float> TestContext::uniform(size_t count, float low, float high) {
  std::uniform_real_distribution<float> pick(low, high);
  std::vector<float> values(count);
  for (auto& v : values) v = pick(random_);
  return values;
}

std::vector<float> TestContext::normal(size_t count, float stddev) {
  std::normal_distribution<float> pick(0.0f, stddev);
  std::vector<float> values(count);
  for (auto& v : values) v = pick(random_);
  return values;
}

void TestContext::poison(DeviceBuffer<float>& buffer) {
  CUDA_CHECK(fill_f32(buffer.get(), int64_t(buffer.size()), std::numeric_limits<float>::quiet_NaN(),
                      stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void TestContext::poison(DeviceBuffer<uint16_t>& buffer) {
  CUDA_CHECK(fill_u16(buffer.get(), int64_t(buffer.size()), 0x7FC0u, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void TestContext::expect_close(const std::string& what, const std::vector<float>& gpu,
                               const std::vector<float>& reference, double tolerance) {
  if (gpu.size() != reference.size()) {
    std::printf("  FAIL %s: %zu values from the GPU, %zu from the reference\n", what.c_str(),
                gpu.size(), reference.size());
    failed_ = true;
    return;
  }
  double error = 0.0, norm = 0.0;
  size_t non_finite = 0, first_bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (!std::isfinite(gpu[i]) && std::isfinite(reference[i])) {
      if (non_finite++ == 0) first_bad = i;
      continue;
    }
    if (!std::isfinite(reference[i])) {
      // NaN where the reference has NaN (documented NaN outputs) passes; anything else fails.
      if (std::isnan(reference[i]) != std::isnan(gpu[i]) ||
          (!std::isnan(reference[i]) && reference[i] != gpu[i])) {
        if (non_finite++ == 0) first_bad = i;
      }
      continue;
    }
    const double d = double(gpu[i]) - double(reference[i]);
    error += d * d;
    norm += double(reference[i]) * double(reference[i]);
  }
  const double relative = std::sqrt(error) / std::max(std::sqrt(norm), 1e-30);
  const bool ok = non_finite == 0 && relative <= tolerance;
  std::printf("  %s %s: relative error %.3g (tolerance %.1g) over %zu values", ok ? "ok  " : "FAIL",
              what.c_str(), relative, tolerance, gpu.size());
  if (non_finite > 0)
    std::printf("; %zu non-finite where the reference is finite (first at %zu: %g vs %g)",
                non_finite, first_bad, double(gpu[first_bad]), double(reference[first_bad]));
  std::printf("\n");
  if (!ok) failed_ = true;
}

void TestContext::expect_equal_bits(const std::string& what, const std::vector<uint16_t>& gpu,
                                    const std::vector<uint16_t>& reference) {
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < std::min(gpu.size(), reference.size()); ++i)
    if (gpu[i] != reference[i] && differing++ == 0) first = i;
  const bool ok = differing == 0 && gpu.size() == reference.size();
  std::printf("  %s %s: %zu of %zu patterns differ", ok ? "ok  " : "FAIL", what.c_str(), differing,
              reference.size());
  if (differing > 0)
    std::printf(" (first at %zu: %04x vs %04x)", first, gpu[first], reference[first]);
  std::printf("\n");
  if (!ok) failed_ = true;
}

void TestContext::expect_true(const std::string& what, bool condition) {
  std::printf("  %s %s\n", condition ? "ok  " : "FAIL", what.c_str());
  if (!condition) failed_ = true;
}

}  // namespace patchbay::kernels::cuda::testing

int main(int argc, char** argv) {
  using namespace patchbay::kernels::cuda::testing;
  std::string filter;
  uint64_t seed =
      static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      filter = argv[++i];
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--list] [--filter SUBSTRING] [--seed N]\n", argv[0]);
      return 2;
    }
  }
  if (list) {
    for (const auto& test : registry()) std::printf("%s\n", test.name);
    return 0;
  }
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) {
    std::printf(
        "SKIP: no usable GPU (%s); these tests run on the GPU machine "
        "(scripts/gpu/device_check.sh)\n",
        reason.c_str());
    return 77;
  }
  print_device();
  std::printf("seed %llu (rerun with --seed %llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  int passed = 0, failed = 0;
  for (size_t index = 0; index < registry().size(); ++index) {
    const auto& test = registry()[index];
    if (!filter.empty() && std::string(test.name).find(filter) == std::string::npos) continue;
    std::printf("[ RUN  ] %s\n", test.name);
    bool ok = true;
    try {
      TestContext context(test.name, seed + index * 0x9E3779B97F4A7C15ull);
      test.function(context);
      CUDA_CHECK(cudaDeviceSynchronize());
      ok = !context.failed();
    } catch (const std::exception& error) {
      std::printf("  FAIL %s\n", error.what());
      ok = false;
    }
    std::printf("[ %s ] %s\n", ok ? " OK " : "FAIL", test.name);
    (ok ? passed : failed) += 1;
    if (!ok && cudaGetLastError() != cudaSuccess) {
      // A sticky error (an illegal address) poisons the context: the rest cannot run.
      std::printf("the CUDA context holds a sticky error; stopping\n");
      break;
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
