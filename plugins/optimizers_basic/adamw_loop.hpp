// AdamW's fused update loop (formula in adamw.hpp), compiled twice: for the baseline x86-64
// target (SSE) and, on x86-64, for AVX-512 (adamw_loop_avx512.cpp), picked at run time by
// adamw_update(). Both compile without FMA contraction (-ffp-contract=off) and use IEEE sqrt
// and division, so they give the same bits (tests/optimizers/adamw_test.cpp checks). The loop
// is memory-bound either way; the AVX-512 build matters when it also writes the bf16 copy
// (optimizer.h minor 2), whose rounding costs a dozen SSE2 instructions per 4 elements, and
// which it writes with non-temporal stores (adamw_loop_body.inc says why).
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_LOOP_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_LOOP_HPP_

#include <cstdint>

namespace optimizers_basic {

struct AdamWLoop {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  float* max_exp_avg_sq = nullptr;  // amsgrad only
  uint16_t* bf16_copy = nullptr;    // nullable: also store the new values rounded to bf16
  int64_t n = 0;
  bool amsgrad = false;
  // Scalars rounded once to f32 (adamw_step): 1 - lr * wd, lr / bc1, sqrt(bc2), 1 - beta1,
  // beta2, 1 - beta2, eps, and the gradient scale (1: none).
  float decay = 1, step_size = 0, bias_correction2_sqrt = 1, one_minus_beta1 = 0, beta2 = 0,
        one_minus_beta2 = 0, eps = 0, grad_scale = 1;
};

void adamw_update_generic(const AdamWLoop& loop);
// Only on a CPU with AVX-512 F, BW, VL and DQ (adamw_update_avx512_available()).
void adamw_update_avx512(const AdamWLoop& loop);
bool adamw_update_avx512_available();
// The AVX-512 build where available, else the generic one.
void adamw_update(const AdamWLoop& loop);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_LOOP_HPP_
