// CUDA runtime checks, device guard, raw memory with events, and the pinned staging ring
// (cuda_runtime_helpers.hpp).
#include "cuda/cuda_runtime_helpers.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace patchbay::cuda {

std::string describe(cudaError_t status, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) +
         ")";
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(ErrorKind::kInternal, "CUDA " + describe(status, what));
}

DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) (void)cudaSetDevice(previous_);
}

void* CudaRawMemory::allocate(size_t bytes) {
  DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: cudaGetLastError would report it later otherwise
    return nullptr;
  }
  check(status, "cudaMalloc");
  return ptr;
}

void CudaRawMemory::release(void* ptr) {
  DeviceGuard guard(device_);
  check(cudaFree(ptr), "cudaFree");
}

engine::EventId CudaRawMemory::record_event(engine::StreamId stream) {
  DeviceGuard guard(device_);
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(event, static_cast<cudaStream_t>(const_cast<void*>(stream))),
        "cudaEventRecord");
  return event;
}

bool CudaRawMemory::event_complete(engine::EventId event) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

void CudaRawMemory::event_synchronize(engine::EventId event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

void CudaRawMemory::destroy_event(engine::EventId event) {
  check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
}

PinnedStaging::~PinnedStaging() {
  for (Chunk& chunk : chunks_) {
    if (chunk.done != nullptr) {
      (void)cudaEventSynchronize(chunk.done);
      (void)cudaEventDestroy(chunk.done);
    }
    if (chunk.host != nullptr) (void)cudaFreeHost(chunk.host);
  }
}

PinnedStaging::Chunk& PinnedStaging::next_chunk() {
  if (chunks_.size() < kChunks) {  // grow lazily: a run that never copies pins nothing
    Chunk chunk;
    check(cudaHostAlloc(&chunk.host, kChunkBytes, cudaHostAllocDefault), "cudaHostAlloc (staging)");
    check(cudaEventCreateWithFlags(&chunk.done, cudaEventDisableTiming), "cudaEventCreate");
    chunks_.push_back(chunk);
    return chunks_.back();
  }
  Chunk& chunk = chunks_[next_];
  next_ = (next_ + 1) % kChunks;
  if (chunk.in_flight) check(cudaEventSynchronize(chunk.done), "cudaEventSynchronize (staging)");
  chunk.in_flight = false;
  return chunk;
}

void PinnedStaging::copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    Chunk& chunk = next_chunk();
    std::memcpy(chunk.host, static_cast<const char*>(src) + done, n);
    check(cudaMemcpyAsync(static_cast<char*>(dst) + done, chunk.host, n, cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync (host to device)");
    check(cudaEventRecord(chunk.done, stream), "cudaEventRecord (staging)");
    chunk.in_flight = true;
    done += n;
  }
}

}  // namespace patchbay::cuda
