// split_rows: one tensor [M, C] -> the row blocks [bounds[i], bounds[i+1]) as separate outputs,
// as a custom op whose backward is ONE concat of the blocks' gradients (O(M·C)). The engine's
// slice backward writes a zero tensor of the whole input per slice, so E slices of the grouped
// rows cost E·M·C in backward; `patchbay bench moe` measures both (README "Dispatch").
#pragma once

#include <cstdint>
#include <patchbay/tensor.hpp>
#include <vector>

namespace patchbay_ffn_moe {

// bounds: non-decreasing, bounds.front() = 0, bounds.back() = rows.size(0); empty blocks are
// skipped (the result has one tensor per non-empty block, in order).
std::vector<patchbay::Tensor> split_rows(const patchbay::Tensor& rows,
                                         const std::vector<int64_t>& bounds);

}  // namespace patchbay_ffn_moe
