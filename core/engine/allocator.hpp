// Caching allocator shared by backends: requests are rounded up to a size class (64-byte
// multiples below 4 KiB, then 8 steps per power of two), freed blocks go to a per-class free
// list and are reused, so steady-state training steps do not hit the system allocator.
// Statistics count the rounded sizes. Thread-safe (one mutex; allocation is not hot enough
// per op to need more).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "engine/device.hpp"

namespace patchbay::engine {

class CachingAllocator {
 public:
  // raw_alloc/raw_free obtain memory from the device (aligned_alloc on the CPU).
  CachingAllocator(void* (*raw_alloc)(size_t), void (*raw_free)(void*));
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes);  // bytes == 0 returns a valid unique 64-byte block
  void free(void* ptr, size_t bytes);
  MemoryStats stats() const;
  void reset_peak();
  void empty_cache();

  static size_t size_class(size_t bytes);

 private:
  void* (*raw_alloc_)(size_t);
  void (*raw_free_)(void*);
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_lists_;
  MemoryStats stats_;
};

}  // namespace patchbay::engine
