// AdamW's update loop for the baseline target, and the run-time choice (adamw_loop.hpp).
#define ADAMW_UPDATE_NAME adamw_update_generic
#include "adamw_loop_body.inc"

namespace optimizers_basic {

bool adamw_update_avx512_available() {
#if defined(PB_OPTIMIZERS_AVX512)
  static const bool available = __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") &&
                                __builtin_cpu_supports("avx512dq");
  return available;
#else
  return false;
#endif
}

void adamw_update(const AdamWLoop& loop) {
#if defined(PB_OPTIMIZERS_AVX512)
  if (adamw_update_avx512_available()) {
    adamw_update_avx512(loop);
    return;
  }
#endif
  adamw_update_generic(loop);
}

#if !defined(PB_OPTIMIZERS_AVX512)
void adamw_update_avx512(const AdamWLoop& loop) { adamw_update_generic(loop); }
#endif

}  // namespace optimizers_basic
