// Free lists per stream, event-guarded hand-over between streams and statistics of the
// stream-aware caching allocator (see stream_allocator.hpp).
#include "engine/stream_allocator.hpp"

#include <string>

#include "common/error.hpp"
#include "engine/allocator.hpp"

namespace patchbay::engine {

StreamCachingAllocator::StreamCachingAllocator(RawDeviceMemory& raw) : raw_(raw) {}

StreamCachingAllocator::~StreamCachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_all_cached();
}

void StreamCachingAllocator::note_allocated(size_t cls) {
  stats_.current_bytes += cls;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
}

void* StreamCachingAllocator::take_cached(size_t cls, StreamId stream) {
  auto lists = free_by_stream_.find(stream);
  if (lists == free_by_stream_.end()) return nullptr;
  auto it = lists->second.find(cls);
  if (it == lists->second.end() || it->second.empty()) return nullptr;
  CachedBlock block = it->second.back();
  it->second.pop_back();
  // A block of this stream that another stream once asked for carries an event; this
  // stream needs none (its own queue is ordered), so drop it.
  if (block.ready != nullptr) raw_.destroy_event(block.ready);
  ++counters_.same_stream_reuses;
  return block.ptr;
}

void* StreamCachingAllocator::take_from_other_streams(size_t cls, StreamId stream) {
  for (auto& [owner, lists] : free_by_stream_) {
    if (owner == stream) continue;
    auto it = lists.find(cls);
    if (it == lists.end()) continue;
    std::vector<CachedBlock>& blocks = it->second;
    for (size_t i = 0; i < blocks.size(); ++i) {
      CachedBlock& block = blocks[i];
      if (block.ready == nullptr) {
        // First request from another stream: mark the owner's queue now; the block is
        // handed over by a later allocation once that work has finished.
        block.ready = raw_.record_event(owner);
        ++counters_.events_recorded;
        continue;
      }
      if (!raw_.event_complete(block.ready)) continue;
      raw_.destroy_event(block.ready);
      void* ptr = block.ptr;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      ++counters_.cross_stream_reuses;
      return ptr;
    }
  }
  return nullptr;
}

void* StreamCachingAllocator::allocate(size_t bytes, StreamId stream) {
  const size_t cls = CachingAllocator::size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = take_cached(cls, stream);
  if (ptr == nullptr) ptr = take_from_other_streams(cls, stream);
  if (ptr != nullptr) {
    stats_.cached_bytes -= cls;
    note_allocated(cls);
    return ptr;
  }
  ptr = raw_.allocate(cls);
  if (ptr == nullptr) {  // give every cached block back (after its pending work) and retry
    release_all_cached();
    ptr = raw_.allocate(cls);
  }
  if (ptr == nullptr)
    throw Error(ErrorKind::kInternal,
                "out of device memory: could not allocate " + std::to_string(cls) + " bytes (" +
                    std::to_string(stats_.current_bytes) +
                    " bytes in live tensors); reduce batch size or sequence length");
  ++counters_.device_allocations;
  note_allocated(cls);
  return ptr;
}

void StreamCachingAllocator::free(void* ptr, size_t bytes, StreamId stream) {
  if (ptr == nullptr) return;
  const size_t cls = CachingAllocator::size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  free_by_stream_[stream][cls].push_back(CachedBlock{ptr, nullptr});
  stats_.current_bytes -= cls;
  stats_.cached_bytes += cls;
}

void StreamCachingAllocator::release_all_cached() {
  for (auto& [owner, lists] : free_by_stream_) {
    for (auto& [cls, blocks] : lists) {
      for (CachedBlock& block : blocks) {
        // Work queued before the free may still use the block: wait for it. Blocks without
        // an event are released at once: a device's release (cudaFree) waits for the
        // device's queued work itself.
        if (block.ready != nullptr) {
          raw_.event_synchronize(block.ready);
          raw_.destroy_event(block.ready);
        }
        raw_.release(block.ptr);
      }
    }
  }
  free_by_stream_.clear();
  stats_.cached_bytes = 0;
}

MemoryStats StreamCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

StreamCachingAllocator::Counters StreamCachingAllocator::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

void StreamCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
}

void StreamCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_all_cached();
}

}  // namespace patchbay::engine
