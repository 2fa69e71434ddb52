// Internal to core/cuda: CUDA runtime error checks, the current-device guard, the raw
// memory + event interface the stream-aware allocator runs on (engine/stream_allocator.hpp),
// and the pinned staging ring that makes host -> device copies from pageable memory
// asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "engine/device.hpp"
#include "engine/stream_allocator.hpp"

namespace patchbay::cuda {

// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)".
std::string describe(cudaError_t status, const char* what);
// Throws patchbay::Error (kInternal) with describe() when status is not cudaSuccess.
void check(cudaError_t status, const char* what);

// The compute stream of the CUDA backend of `device` (cuda_backend.cpp): where every kernel
// of that device is queued. The backend must be registered (initialise_cuda()).
cudaStream_t compute_stream_of(engine::Device device);

// Makes `device` current for the scope (restores the previous one).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

// cudaMalloc / cudaFree and timing-free events on one device.
class CudaRawMemory final : public engine::RawDeviceMemory {
 public:
  explicit CudaRawMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override;  // nullptr on cudaErrorMemoryAllocation
  void release(void* ptr) override;
  engine::EventId record_event(engine::StreamId stream) override;
  bool event_complete(engine::EventId event) override;
  void event_synchronize(engine::EventId event) override;
  void destroy_event(engine::EventId event) override;

 private:
  int device_;
};

// Host -> device copies from pageable memory: the bytes are copied into one of a few pinned
// chunks and queued from there with cudaMemcpyAsync, so the call returns once the source
// may be reused, without waiting for the device. A chunk is refilled only after the event
// recorded behind its last copy has completed (the host waits only when every chunk is in
// flight, i.e. more than kChunks * kChunkBytes are queued).
class PinnedStaging {
 public:
  static constexpr size_t kChunkBytes = size_t(8) << 20;
  static constexpr size_t kChunks = 4;

  explicit PinnedStaging(int device) : device_(device) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  void copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream);

 private:
  struct Chunk {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
    bool in_flight = false;
  };
  Chunk& next_chunk();  // mutex held; waits for the chunk's last copy

  int device_;
  std::mutex mutex_;
  std::vector<Chunk> chunks_;
  size_t next_ = 0;
};

}  // namespace patchbay::cuda
