// The flash-attention tile kernels built for the generic code path (compile flags are set per
// file in CMakeLists.txt). Register budget: 2 accumulators of 16 floats, column blocks of
// up to 1 vectors. The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE generic
#define PB_TILES_GETTER tile_kernels_generic
#define PB_ACC_VECTORS 2
#define PB_MAX_COL_VECTORS 1
#include "attention_flash_tiles_body.inc"
