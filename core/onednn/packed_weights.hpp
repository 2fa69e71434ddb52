// A direct copy of f32 weights into oneDNN's blocked BA16a64b layout, the layout its
// AVX-512 f32 matmul asks for when given the choice (matmul.cpp packs B that way when its
// plain rows would alias in the cache). oneDNN's own reorder for this copy ran at ~12-23 GB/s
// on the 2-core Zen 5 machine; the copy below is 256-byte memcpys.
#pragma once

#include <cstdint>

namespace patchbay::onednn::detail {

// dst = src [k, n] (row stride ldb floats, columns contiguous) in BA16a64b: blocks of 16 rows
// x 64 columns (4 KiB, row-major inside), ordered by column block, then row block; rows past k
// and columns past n are zero. dst holds round_up(k, 16) * round_up(n, 64) floats.
void pack_f32_ba16a64b(const float* src, std::int64_t ldb, std::int64_t k, std::int64_t n,
                       float* dst);

}  // namespace patchbay::onednn::detail
