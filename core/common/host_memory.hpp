// Large host buffers backed by 2 MiB pages where Linux offers them (transparent huge pages in
// `madvise` mode, the common default): the engine's CPU allocator and oneDNN's per-thread
// buffers take their memory here.
//
// Why: a training step streams gigabytes through buffers of megabytes (GPT-2 124M: the
// optimizer reads and writes 3.7 GB per update, the LM head's gradient is 154 MB). With 4 KiB
// pages every 4 KiB of a stream is a TLB miss and the hardware prefetchers stop at each page
// boundary. Measured on the 2-vCPU Zen 4 (docs/BENCHMARKS.md, "Huge pages"): GPT-2 124M at
// 4 x 64 trains 10% faster in f32 and 5% in bf16 with them.
//
// host_allocate(bytes) returns 64-byte aligned memory (release it with std::free); from 2 MiB
// up it is 2 MiB aligned and every whole 2 MiB page inside it is advised MADV_HUGEPAGE, so the
// partial last page stays in 4 KiB pages and the resident size does not grow. The kernel may
// still give 4 KiB pages (THP `never`, no free huge pages): only speed depends on it.
// PATCHBAY_HUGE_PAGES=0 in the environment turns the advice off (read once per process).
#pragma once

#include <cstddef>

namespace patchbay {

void* host_allocate(std::size_t bytes);  // nullptr when out of memory
bool host_huge_pages_enabled();          // the advice is given (Linux, not turned off)
inline constexpr std::size_t kHostHugePageBytes = std::size_t(2) << 20;

}  // namespace patchbay
