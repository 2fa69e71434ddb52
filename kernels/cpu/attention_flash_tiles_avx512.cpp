// The flash-attention tile kernels built for the avx512 code path (compile flags are set per
// file in CMakeLists.txt). Register budget: 24 accumulators of 16 floats, column blocks of
// up to 4 vectors. The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE avx512
#define PB_TILES_GETTER tile_kernels_avx512
#define PB_ACC_VECTORS 24
#define PB_MAX_COL_VECTORS 4
#include "attention_flash_tiles_body.inc"
