// Private entry points of the bf16 flash kernel (attention_flash_bf16.cpp, built with
// -mavx512bf16). The public functions in attention_flash.cpp call them after
// attention_params_error has accepted the params (so the CPU has AVX512-BF16), with
// p.workspace set to a block of workspace_bytes(p, pass) bytes (64-byte aligned).
#pragma once

#include <cstddef>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels::flash_bf16 {

void forward(const AttentionParams& p);
void backward(const AttentionParams& p);
std::size_t workspace_bytes(const AttentionParams& p, AttentionPass pass);

}  // namespace patchbay::kernels::flash_bf16
