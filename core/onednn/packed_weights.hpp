// Direct copies of weights into the blocked layouts oneDNN's AVX-512 matmuls ask for when
// given the choice (matmul.cpp packs B that way where it pays): f32 BA16a64b and bf16
// BA16a64b2a. oneDNN's own reorders for these copies ran at ~12-30 GB/s on the 2-core Zen 5
// machine. From memory, 2 threads, a 4.7 MB bf16 weight takes 0.13 ms stored [k, n] and
// 0.17-0.29 ms stored [n, k], where a memcpy of the same bytes takes 0.09 ms.
#pragma once

#include <cstdint>

namespace patchbay::onednn::detail {

// dst = src [k, n] (row stride ldb floats, columns contiguous) in BA16a64b: blocks of 16 rows
// x 64 columns (4 KiB, row-major inside), ordered by column block, then row block; rows past k
// and columns past n are zero. dst holds round_up(k, 16) * round_up(n, 64) floats.
void pack_f32_ba16a64b(const float* src, std::int64_t ldb, std::int64_t k, std::int64_t n,
                       float* dst);

// dst = B [k, n] of bf16 (uint16 bits) in BA16a64b2a, the pairs-along-k ("VNNI") layout of
// vdpbf16ps: blocks of 32 rows x 64 columns (4 KiB), ordered by column block, then row block;
// inside a block, row pair j (rows 2j, 2j+1) is 64 (even, odd) pairs. Rows past k and
// columns past n are zero; dst holds round_up(k, 32) * round_up(n, 64) elements.
// B(r, c) = src[r * row_stride + c * col_stride], with col_stride == 1 (B stored [k, n]) or
// row_stride == 1 (B stored transposed, [n, k]: a linear layer's [out, in] weight as W^T).
void pack_bf16_ba16a64b2a(const std::uint16_t* src, std::int64_t row_stride,
                          std::int64_t col_stride, std::int64_t k, std::int64_t n,
                          std::uint16_t* dst);
// The same copy one element at a time: CPUs without AVX-512BW, and the tests.
void pack_bf16_portable(const std::uint16_t* src, std::int64_t row_stride, std::int64_t col_stride,
                        std::int64_t k, std::int64_t n, std::uint16_t* dst);

}  // namespace patchbay::onednn::detail
