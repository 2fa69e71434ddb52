// A small self-contained harness for the GPU tests of kernels/cuda (no doctest: the GPU
// machine builds these tests standalone and lacks this project's Debian packages).
//   GPU_TEST(name) { ... }   registers a test; inside, `t` is the TestContext.
// Every test gets fresh random inputs (a seed printed per run; --seed N repeats a run), writes
// NaN into outputs before the kernel runs (poisoning: an element the kernel skips fails), and
// compares against the CPU twin by relative norm, ||gpu - reference|| / ||reference||; any NaN
// or infinity in the GPU output fails. Exit codes: 0 all passed, 1 a failure, 77 no usable GPU
// (ctest's SKIP_RETURN_CODE), with the reason printed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace patchbay::kernels::cuda::testing {

// Thrown by the CUDA_CHECK macro and by failed requirements; the harness reports and moves on.
struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void throw_if_cuda_error(cudaError_t status, const char* expression, const char* file, int line);
#define CUDA_CHECK(expression)                                                                 \
  ::patchbay::kernels::cuda::testing::throw_if_cuda_error((expression), #expression, __FILE__, \
                                                          __LINE__)

// Device memory of `count` T, freed on destruction (cudaMalloc, never managed memory).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T) + 1));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  void upload(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

class TestContext {
 public:
  TestContext(std::string name, uint64_t seed);
  ~TestContext();

  cudaStream_t stream() const { return stream_; }
  std::mt19937_64& random() { return random_; }

  std::vector<float> uniform(size_t count, float low = -1.0f, float high = 1.0f);
  std::vector<float> normal(size_t count, float stddev = 1.0f);
  template <class Index>
  std::vector<Index> ids(size_t count, int64_t limit) {
    std::uniform_int_distribution<int64_t> pick(0, limit - 1);
    std::vector<Index> values(count);
    for (auto& v : values) v = static_cast<Index>(pick(random_));
    return values;
  }

  // A device buffer of `count` floats filled with NaN (through the fill kernel).
  void poison(DeviceBuffer<float>& buffer);
  void poison(DeviceBuffer<uint16_t>& buffer);

  // Fails the test (records, does not throw) when gpu has a non-finite value where the
  // reference is finite, or when ||gpu - reference|| / ||reference|| > tolerance. Prints the
  // error either way.
  void expect_close(const std::string& what, const std::vector<float>& gpu,
                    const std::vector<float>& reference, double tolerance);
  void expect_equal_bits(const std::string& what, const std::vector<uint16_t>& gpu,
                         const std::vector<uint16_t>& reference);
  void expect_true(const std::string& what, bool condition);

  bool failed() const { return failed_; }

 private:
  std::string name_;
  std::mt19937_64 random_;
  cudaStream_t stream_ = nullptr;
  bool failed_ = false;
};

using TestFunction = void (*)(TestContext&);
struct TestRegistration {
  TestRegistration(const char* name, TestFunction function);
};

#define GPU_TEST(name)                                                                       \
  static void name(::patchbay::kernels::cuda::testing::TestContext& t);                      \
  static const ::patchbay::kernels::cuda::testing::TestRegistration name##_registered(#name, \
                                                                                      name); \
  static void name([[maybe_unused]] ::patchbay::kernels::cuda::testing::TestContext& t)

}  // namespace patchbay::kernels::cuda::testing
