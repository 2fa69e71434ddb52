// Stream-aware caching allocator for devices with asynchronous work queues (CUDA), written
// over an abstract raw-memory + event interface so that its bookkeeping runs (and is tested)
// on the CPU with host memory and test-controlled events (tests/device/).
//
// Why stream-aware: on a device, free() returns while kernels queued on a stream may still
// read the block. Reusing it on the SAME stream is safe (the stream runs in order), so each
// stream has its own free lists and a same-stream allocation takes a cached block at once.
// Reusing it on ANOTHER stream is safe only once the work queued before the free has
// finished: the allocator then records an event on the owning stream (the first time another
// stream asks) and hands the block over only when that event has completed. No host
// synchronisation happens on the allocation path; only running out of memory waits for
// pending events before giving cached blocks back and retrying.
//
// Sizes are rounded to the size classes of CachingAllocator (allocator.hpp); statistics
// count rounded sizes. Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/device.hpp"

namespace patchbay::engine {

// A stream as the allocator sees it: an opaque id (cudaStream_t on CUDA, any distinct value
// elsewhere). Blocks remember the stream they were last used on.
using StreamId = const void*;
using EventId = void*;

// What a device gives the allocator. Implementations: the CUDA backend (cudaMalloc,
// cudaEventRecord, ...), the host stand-in device and the tests' scripted fake.
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  // `bytes` of device memory, or nullptr when the device is out of memory (never throws).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // A new event marking everything queued on `stream` so far.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_complete(EventId event) = 0;     // non-blocking query
  virtual void event_synchronize(EventId event) = 0;  // blocks the host until complete
  virtual void destroy_event(EventId event) = 0;
};

class StreamCachingAllocator {
 public:
  // Counters for tests and `memory_stats` readers; all monotonic.
  struct Counters {
    size_t device_allocations = 0;   // raw allocate() calls that succeeded
    size_t same_stream_reuses = 0;   // allocations served from the stream's own free list
    size_t cross_stream_reuses = 0;  // served from another stream's list after its event
    size_t events_recorded = 0;
  };

  explicit StreamCachingAllocator(RawDeviceMemory& raw);
  ~StreamCachingAllocator();  // waits for pending events, releases every cached block
  StreamCachingAllocator(const StreamCachingAllocator&) = delete;
  StreamCachingAllocator& operator=(const StreamCachingAllocator&) = delete;

  // A block of at least `bytes` to be used on `stream` (bytes == 0 gives a unique block).
  // Throws patchbay::Error (kInternal, "out of memory ...") when the device has no room even
  // after the cache is given back.
  void* allocate(size_t bytes, StreamId stream);
  // `stream`: the stream whose queued work last used the block (the one it was allocated on
  // unless the caller moved it). `bytes` as passed to allocate().
  void free(void* ptr, size_t bytes, StreamId stream);

  MemoryStats stats() const;
  Counters counters() const;
  void reset_peak();
  // Waits for pending events and releases every cached block to the device.
  void empty_cache();

 private:
  struct CachedBlock {
    void* ptr = nullptr;
    EventId ready = nullptr;  // recorded on the owner stream when another stream asked
  };
  using FreeLists = std::map<size_t, std::vector<CachedBlock>>;  // size class -> blocks

  void* take_cached(size_t cls, StreamId stream);              // mutex held
  void* take_from_other_streams(size_t cls, StreamId stream);  // mutex held
  void note_allocated(size_t cls);                             // mutex held
  void release_all_cached();                                   // mutex held

  RawDeviceMemory& raw_;
  mutable std::mutex mutex_;
  std::map<StreamId, FreeLists> free_by_stream_;
  MemoryStats stats_;
  Counters counters_;
};

}  // namespace patchbay::engine
