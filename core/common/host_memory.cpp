// Host buffers with huge-page advice (see host_memory.hpp).
#include "common/host_memory.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace patchbay {

bool host_huge_pages_enabled() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool enabled = [] {
    const char* value = std::getenv("PATCHBAY_HUGE_PAGES");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
#else
  return false;
#endif
}

void* host_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < kHostHugePageBytes || !host_huge_pages_enabled())
    return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  void* p = nullptr;  // posix_memalign: no size-multiple rule, unlike C's aligned_alloc
  if (posix_memalign(&p, kHostHugePageBytes, rounded) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Whole huge pages only: advising the partial last one would let the kernel back it with a
  // full 2 MiB page past the end of the buffer. A refusal (EINVAL on kernels without THP) only
  // costs speed, so its result is not checked.
  (void)madvise(p, rounded / kHostHugePageBytes * kHostHugePageBytes, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace patchbay
