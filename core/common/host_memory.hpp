// Large host buffers backed by 2 MiB pages where Linux offers them (transparent huge pages in
// `madvise` mode, the common default): the engine's CPU allocator and oneDNN's per-thread
// buffers take their memory here.
//
// Why: a training step streams gigabytes through buffers of megabytes (GPT-2 124M: the
// optimizer reads and writes 3.7 GB per update, the LM head's gradient is 154 MB). With 4 KiB
// pages every 4 KiB of a stream is a TLB miss and the hardware prefetchers stop at each page
// boundary. Measured on the 2-vCPU Zen 4 (docs/BENCHMARKS.md, issue 18 fifth pass): GPT-2 124M
// at 4 x 64 trains 10% faster in f32 and 11% in bf16 with them.
//
// host_allocate(bytes) returns 64-byte aligned memory; release it with host_free (never
// std::free). From 2 MiB up (Linux) it is a mapping of its own, 2 MiB aligned, whose whole
// 2 MiB pages are advised MADV_HUGEPAGE: the partial last page stays in 4 KiB pages, so the
// resident size does not grow, and the advice goes away with the mapping (memory the C heap
// hands out again never carries it). The kernel may still give 4 KiB pages (THP `never`, no
// free huge pages): only speed depends on it. PATCHBAY_HUGE_PAGES=0 in the environment (that
// exact value) turns this off: heap blocks, no advice (read once per process).
#pragma once

#include <cstddef>

namespace patchbay {

void* host_allocate(std::size_t bytes);  // nullptr when out of memory
void host_free(void* p);                 // p from host_allocate, or nullptr
bool host_huge_pages_enabled();          // the advice is given (Linux, not turned off)
inline constexpr std::size_t kHostHugePageBytes = std::size_t(2) << 20;

}  // namespace patchbay
