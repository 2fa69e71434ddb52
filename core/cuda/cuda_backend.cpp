// The CUDA Backend (engine/device.hpp): memory from the stream-aware caching allocator over
// cudaMalloc, one compute stream per device (non-blocking: it never waits for the legacy
// default stream), copies queued on that stream, fills without a kernel; and
// initialise_cuda(), which probes the runtime once and registers the backend.
//
// Copy contract (Backend::copy): the call returns once the source may be reused.
//   host -> device: staged through pinned memory and queued; the host does not wait.
//   device -> host: queued, then the stream is synchronised (the host reads it next): the
//                   only host synchronisation, and it happens where a value is read.
//   device -> device: queued (cudaMemcpyPeerAsync across devices).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "common/error.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/cuda_kernel_support.hpp"
#include "cuda/cuda_runtime_helpers.hpp"
#include "engine/device.hpp"
#include "engine/stream_allocator.hpp"

namespace patchbay::cuda {
namespace {

using engine::Device;
using engine::DeviceType;

class CudaStream final : public engine::Stream {
 public:
  explicit CudaStream(Device device) : device_(device) {
    DeviceGuard guard(device.index);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaStream() override {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  Device device() const override { return device_; }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  cudaStream_t handle() const { return stream_; }

 private:
  Device device_;
  cudaStream_t stream_ = nullptr;
};

bool all_bytes_equal(const void* pattern, size_t pattern_bytes) {
  const auto* p = static_cast<const unsigned char*>(pattern);
  for (size_t i = 1; i < pattern_bytes; ++i)
    if (p[i] != p[0]) return false;
  return true;
}

class CudaBackend final : public engine::Backend {
 public:
  explicit CudaBackend(int index)
      : device_{DeviceType::kCuda, index},
        raw_(index),
        stream_(device_),
        allocator_(raw_),
        staging_(index) {}
  ~CudaBackend() override {
    // Queued work may still use cached blocks; the allocator waits for what it recorded.
    (void)cudaStreamSynchronize(stream_.handle());
  }

  Device device() const override { return device_; }
  void* allocate(size_t bytes) override { return allocator_.allocate(bytes, stream_id()); }
  void free(void* ptr, size_t bytes) override { allocator_.free(ptr, bytes, stream_id()); }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            engine::Stream& stream) override {
    if (bytes == 0) return;
    const cudaStream_t s = handle_of(stream);
    const bool from_host = src_device.type == DeviceType::kCpu;
    const bool to_host = dst_device.type == DeviceType::kCpu;
    if (from_host && to_host) {
      std::memcpy(dst, src, bytes);
    } else if (from_host) {
      check_is_mine(dst_device, "destination");
      staging_.copy_to_device(dst, src, bytes, s);
    } else if (to_host) {
      check_is_mine(src_device, "source");
      DeviceGuard guard(device_.index);
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s),
            "cudaMemcpyAsync (device to host)");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize (device to host)");
    } else if (src_device == dst_device) {
      DeviceGuard guard(device_.index);
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (device to device)");
    } else {
      DeviceGuard guard(device_.index);
      check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, s),
            "cudaMemcpyPeerAsync");
    }
  }

  // cudaMemsetAsync when every byte of the pattern is the same (zeros, all-ones bits);
  // otherwise the pattern is written once and doubled by device-to-device copies
  // (log2(count) of them), so no kernel is needed.
  void fill(void* dst, const void* pattern, size_t pattern_bytes, size_t count,
            engine::Stream& stream) override {
    if (count == 0 || pattern_bytes == 0) return;
    const cudaStream_t s = handle_of(stream);
    DeviceGuard guard(device_.index);
    auto* d = static_cast<char*>(dst);
    if (all_bytes_equal(pattern, pattern_bytes)) {
      check(
          cudaMemsetAsync(d, *static_cast<const unsigned char*>(pattern), pattern_bytes * count, s),
          "cudaMemsetAsync");
      return;
    }
    staging_.copy_to_device(d, pattern, pattern_bytes, s);
    for (size_t filled = 1; filled < count;) {
      const size_t n = std::min(filled, count - filled);
      check(cudaMemcpyAsync(d + filled * pattern_bytes, d, n * pattern_bytes,
                            cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (fill)");
      filled += n;
    }
  }

  engine::Stream& default_stream() override { return stream_; }
  engine::MemoryStats memory_stats() const override { return allocator_.stats(); }
  void reset_peak() override { allocator_.reset_peak(); }
  void empty_cache() override { allocator_.empty_cache(); }

 private:
  engine::StreamId stream_id() const { return stream_.handle(); }
  cudaStream_t handle_of(engine::Stream& stream) const {
    auto* cuda_stream = dynamic_cast<CudaStream*>(&stream);
    if (cuda_stream == nullptr || stream.device() != device_)
      throw Error(ErrorKind::kInternal,
                  "CUDA backend " + device_.str() +
                      ": expected one of its own streams, found a stream of " +
                      stream.device().str());
    return cuda_stream->handle();
  }
  void check_is_mine(Device side, const char* which) const {
    if (side != device_)
      throw Error(ErrorKind::kInvalidArgument,
                  "CUDA backend " + device_.str() + ": copy " + which + " is on " + side.str());
  }

  Device device_;
  CudaRawMemory raw_;
  CudaStream stream_;
  engine::StreamCachingAllocator allocator_;  // after raw_ and stream_: destroyed before them
  PinnedStaging staging_;
};

int probed_device_count = 0;

std::unique_ptr<engine::Backend> make_cuda_backend(int index) {
  if (index < 0 || index >= probed_device_count)
    throw Error(ErrorKind::kInvalidArgument,
                "cuda:" + std::to_string(index) + " does not exist: this machine has " +
                    std::to_string(probed_device_count) +
                    " CUDA device(s), cuda:0 to cuda:" + std::to_string(probed_device_count - 1));
  return std::make_unique<CudaBackend>(index);
}

std::string describe_device(int index) {
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index) != cudaSuccess) return "";
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB",
                static_cast<double>(props.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(props.name) + ", sm_" + std::to_string(props.major) +
         std::to_string(props.minor) + ", " + memory;
}

CudaProbe probe() {
  CudaProbe result;
  int count = 0;
  // Without a driver this fails with "CUDA driver version is insufficient", not "no
  // device": every failure here means "no GPU".
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    result.reason = "no GPU: " + describe(status, "cudaGetDeviceCount");
    return result;
  }
  if (count == 0) {
    result.reason = "no GPU: the CUDA runtime sees no device";
    return result;
  }
  // Creating the context is where a broken driver or a busy, exclusive GPU shows.
  if (const cudaError_t status = cudaSetDevice(0); status != cudaSuccess) {
    result.reason = "no GPU: " + describe(status, "cudaSetDevice(0)");
    return result;
  }
  if (const cudaError_t status = cudaFree(nullptr); status != cudaSuccess) {
    result.reason = "no GPU: " + describe(status, "creating the CUDA context");
    return result;
  }
  result.usable = true;
  result.device_count = count;
  result.description = describe_device(0);
  return result;
}

}  // namespace

cudaStream_t compute_stream_of(Device device) {
  auto* stream = dynamic_cast<CudaStream*>(&engine::backend_for(device).default_stream());
  if (stream == nullptr)
    throw Error(ErrorKind::kInternal, device.str() + " is not served by the CUDA backend");
  return stream->handle();
}

bool built_with_cuda() { return true; }

const CudaProbe& initialise_cuda() {
  static const CudaProbe result = [] {
    CudaProbe p = probe();
    if (p.usable) {
      probed_device_count = p.device_count;
      engine::register_backend(DeviceType::kCuda, &make_cuda_backend);
      register_elementwise_kernels();
      register_matmul_kernels();
      register_norm_softmax_kernels();
      register_row_kernels();
      register_attention_kernels();
      register_cross_entropy_kernels();
      register_optimizer_kernels();
      register_indexing_kernels();
      register_linear_attention_kernels();
    }
    return p;
  }();
  return result;
}

}  // namespace patchbay::cuda
