// Size classes, free lists and statistics of the caching allocator (see allocator.hpp).
#include "engine/allocator.hpp"

#include <bit>

#include "common/error.hpp"

namespace patchbay::engine {

CachingAllocator::CachingAllocator(void* (*raw_alloc)(size_t), void (*raw_free)(void*))
    : raw_alloc_(raw_alloc), raw_free_(raw_free) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  // 8 classes per power of two: waste at most 12.5%.
  size_t pow2 = std::bit_floor(bytes);
  size_t step = pow2 / 8;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t cls = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_lists_.find(cls);
    if (it != free_lists_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= cls;
      stats_.current_bytes += cls;
      if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
      return p;
    }
  }
  void* p = raw_alloc_(cls);
  if (p == nullptr) {
    empty_cache();  // give cached blocks back and try once more
    p = raw_alloc_(cls);
  }
  if (p == nullptr)
    throw Error(ErrorKind::kInternal, "out of memory: could not allocate " + std::to_string(cls) +
                                          " bytes; reduce batch size or sequence length");
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.current_bytes += cls;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  return p;
}

void CachingAllocator::free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t cls = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  free_lists_[cls].push_back(ptr);
  stats_.current_bytes -= cls;
  stats_.cached_bytes += cls;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [cls, list] : free_lists_)
    for (void* p : list) raw_free_(p);
  free_lists_.clear();
  stats_.cached_bytes = 0;
}

}  // namespace patchbay::engine
