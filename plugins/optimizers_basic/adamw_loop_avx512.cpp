// AdamW's update loop compiled for AVX-512 (F, BW, VL, DQ); called only where the CPU has them
// (adamw_loop.hpp). Built on x86-64 only (CMakeLists.txt).
#define ADAMW_UPDATE_NAME adamw_update_avx512
#include "adamw_loop_body.inc"
