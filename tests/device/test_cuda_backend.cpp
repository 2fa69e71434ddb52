// The CUDA backend on a real GPU (core/cuda/): round trips host <-> device bit-exact across
// the pinned staging chunks, fills with byte-uniform and mixed patterns, device-to-device
// copies, the allocator's statistics and reuse, the dispatch entries of fill and copy and the
// refusals of what has no kernel (the other ops' entries: test_cuda_ops.cpp). Without a usable GPU
// (CI, the development machines) it checks only that the refusal says why, and says that the GPU
// checks were skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "cuda/cuda_device.hpp"
#include "engine/kernel_registry.hpp"
#include "engine/ops.hpp"
#include "engine/ops_device.hpp"
#include "engine/ops_indexing.hpp"

namespace {

using namespace patchbay::engine;

bool gpu_usable() {
  const patchbay::cuda::CudaProbe& probe = patchbay::cuda::initialise_cuda();
  if (!probe.usable) MESSAGE("CUDA backend GPU checks skipped: " << probe.reason);
  return probe.usable;
}

std::vector<uint32_t> pattern_words(size_t n) {
  std::vector<uint32_t> words(n);
  uint32_t x = 2463534242u;
  for (uint32_t& w : words) {  // xorshift32: every bit pattern, NaNs included
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    w = x;
  }
  return words;
}

}  // namespace

TEST_CASE("without a usable GPU the probe says why; with one it describes the device") {
  const patchbay::cuda::CudaProbe& probe = patchbay::cuda::initialise_cuda();
  // The work list of the CUDA dispatch table, printed for the device check's log.
  std::string missing;
  for (const std::string& op : kernels_missing_for(DeviceType::kCuda)) missing += " " + op;
  MESSAGE("ops without a CUDA kernel:" << (missing.empty() ? " none" : missing));
  if (probe.usable) {
    CHECK(probe.device_count >= 1);
    CHECK_FALSE(probe.description.empty());
    MESSAGE("CUDA device 0: " << probe.description);
  } else if (patchbay::cuda::built_with_cuda()) {
    CHECK(probe.reason.rfind("no GPU: ", 0) == 0);
  } else {
    CHECK(probe.reason.find("no CUDA support") != std::string::npos);
  }
}

TEST_CASE("host -> device -> host is bit-exact across the staging chunks") {
  if (!gpu_usable()) return;
  const Device gpu{DeviceType::kCuda, 0};
  for (size_t words : {size_t{1}, size_t{1000}, size_t{5} << 20}) {  // 4 B to 20 MiB (3 chunks)
    CAPTURE(words);
    const std::vector<uint32_t> host = pattern_words(words);
    Tensor on_gpu = Tensor::from_data(host.data(), {static_cast<int64_t>(words)}, DType::kI32, gpu);
    CHECK(on_gpu.device() == gpu);
    Tensor back = on_gpu.to(cpu());
    CHECK(std::memcmp(back.data_ptr(), host.data(), words * 4) == 0);
    // device -> device, then back
    Tensor copy = Tensor::empty(on_gpu.shape(), DType::kI32, gpu);
    transfer_bytes(copy.data_ptr(), gpu, on_gpu.data_ptr(), gpu, words * 4);
    CHECK(std::memcmp(copy.to(cpu()).data_ptr(), host.data(), words * 4) == 0);
  }
}

TEST_CASE("fills: byte-uniform patterns through memset, others by doubling copies") {
  if (!gpu_usable()) return;
  const Device gpu{DeviceType::kCuda, 0};
  Backend& backend = backend_for(gpu);
  for (size_t count : {size_t{1}, size_t{7}, size_t{1000003}}) {
    CAPTURE(count);
    Tensor t = Tensor::empty({static_cast<int64_t>(count)}, DType::kF32, gpu);
    const float value = 1.5f;
    backend.fill(t.data_ptr(), &value, sizeof value, count, backend.default_stream());
    std::vector<float> got = t.to_vector();
    CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 1.5f; }));
    const float zero = 0.0f;
    backend.fill(t.data_ptr(), &zero, sizeof zero, count, backend.default_stream());
    got = t.to_vector();
    CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.0f; }));
  }
}

TEST_CASE("the caching allocator reuses freed blocks and keeps statistics") {
  if (!gpu_usable()) return;
  const Device gpu{DeviceType::kCuda, 0};
  backend_for(gpu).empty_cache();
  const MemoryStats before = memory_stats(gpu);
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::kF32, gpu);  // 4 MiB
    first = t.data_ptr();
    CHECK(memory_stats(gpu).current_bytes == before.current_bytes + (size_t{4} << 20));
  }
  CHECK(memory_stats(gpu).cached_bytes >= size_t{4} << 20);
  Tensor again = Tensor::empty({1 << 20}, DType::kF32, gpu);
  CHECK(again.data_ptr() == first);
}

TEST_CASE("the CUDA dispatch entries of fill and copy, and refusals naming op and device") {
  if (!gpu_usable()) return;
  const Device gpu{DeviceType::kCuda, 0};
  CHECK(has_kernel("fill", DeviceType::kCuda));
  CHECK(has_kernel("copy", DeviceType::kCuda));
  const std::vector<float> ones = full({1000003}, 1.5, DType::kF32, gpu).to_vector();
  CHECK(std::all_of(ones.begin(), ones.end(), [](float v) { return v == 1.5f; }));
  CHECK(zeros({7}, DType::kBF16, gpu).to(DType::kF32).to_vector() == std::vector<float>(7, 0.0f));

  // f32 -> bf16 -> f32 on the GPU gives the CPU's bits (round to nearest even, NaN kept).
  const std::vector<uint32_t> words = pattern_words(4099);
  Tensor host = Tensor::from_data(words.data(), {4099}, DType::kF32);
  Tensor on_gpu = host.to(gpu).to(DType::kBF16);
  Tensor want = host.to(DType::kBF16);
  CHECK(std::memcmp(on_gpu.to(cpu()).data_ptr(), want.data_ptr(), want.nbytes()) == 0);
  Tensor widened = on_gpu.to(DType::kF32).to(cpu());
  CHECK(std::memcmp(widened.data_ptr(), want.to(DType::kF32).data_ptr(), widened.nbytes()) == 0);

  auto message_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const patchbay::Error& e) {
      return e.what();
    }
    return "";
  };
  Tensor matrix = Tensor::empty({4, 6}, DType::kF32, gpu);
  const std::string f16 = message_of([&] { (void)matrix.to(DType::kF16); });
  CHECK(f16.find("'copy'") != std::string::npos);
  CHECK(f16.find("cuda") != std::string::npos);
  if (!has_kernel("topk", DeviceType::kCuda)) {
    const std::string missing = message_of([&] { (void)topk(matrix, 2); });
    CHECK(missing.find("'topk'") != std::string::npos);
    CHECK(missing.find("cuda") != std::string::npos);
  }
}
