// Host buffers with huge-page advice (see host_memory.hpp).
#include "common/host_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace patchbay {
namespace {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
constexpr bool kCanAdvise = true;
#else
constexpr bool kCanAdvise = false;
#endif

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// The mappings host_allocate made (start -> length), so host_free can unmap them; heap blocks
// are not in it. Allocations this size are rare (the engine's allocator caches its blocks).
struct Mappings {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> length_of;
};
Mappings& mappings() {
  static Mappings* m = new Mappings;  // never destroyed: frees may come during static teardown
  return *m;
}

// A mapping of `length` bytes (a multiple of 4 KiB) starting on a 2 MiB boundary, its whole
// huge pages advised; nullptr when the system refuses.
void* map_huge_aligned(std::size_t length) {
  const std::size_t span = length + kHostHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (base + kHostHugePageBytes - 1) / kHostHugePageBytes * kHostHugePageBytes;
  if (start > base) munmap(raw, start - base);  // the unaligned head
  const std::uintptr_t end = start + length, span_end = base + span;
  if (span_end > end) munmap(reinterpret_cast<void*>(end), span_end - end);  // the tail
  void* p = reinterpret_cast<void*>(start);
  // Whole huge pages only: advising the partial last one would let the kernel back it with a
  // full 2 MiB page. A refusal (EINVAL without THP) only costs speed.
  (void)madvise(p, length / kHostHugePageBytes * kHostHugePageBytes, MADV_HUGEPAGE);
  return p;
}
#endif

}  // namespace

bool host_huge_pages_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("PATCHBAY_HUGE_PAGES");
    return kCanAdvise && (value == nullptr || std::strcmp(value, "0") != 0);
  }();
  return enabled;
}

void* host_allocate(std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - 2 * kHostHugePageBytes) return nullptr;
  const std::size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (rounded >= kHostHugePageBytes && host_huge_pages_enabled()) {
    const std::size_t length = (rounded + 4095) / 4096 * 4096;
    void* p = map_huge_aligned(length);
    if (p == nullptr) return nullptr;
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.length_of.emplace(p, length);
    return p;
  }
#endif
  return std::aligned_alloc(64, rounded);
}

void host_free(void* p) {
  if (p == nullptr) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  std::size_t length = 0;
  {
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto found = m.length_of.find(p);
    if (found != m.length_of.end()) {
      length = found->second;
      m.length_of.erase(found);
    }
  }
  if (length != 0) {
    munmap(p, length);
    return;
  }
#endif
  std::free(p);
}

}  // namespace patchbay
