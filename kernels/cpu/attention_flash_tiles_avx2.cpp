// The flash-attention tile kernels built for the avx2 code path (compile flags are set per
// file in CMakeLists.txt). Register budget: 6 accumulators of 16 floats, column blocks of
// up to 2 vectors. The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE avx2
#define PB_TILES_GETTER tile_kernels_avx2
#define PB_ACC_VECTORS 6
#define PB_MAX_COL_VECTORS 2
#include "attention_flash_tiles_body.inc"
