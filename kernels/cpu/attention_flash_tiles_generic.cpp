// The flash-attention tile kernels built for the generic code path (compile flags are set per
// file in CMakeLists.txt): 4-float vectors, 8 accumulators, column blocks of up to 2
// vectors (micro-tile 4 x 8: without FMA each product needs a spare register; 6 x 8 spilled
// and ran 1.7x slower). The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE generic
#define PB_TILES_GETTER tile_kernels_generic
#define PB_VECTOR_BYTES 16
#define PB_ACC_VECTORS 8
#define PB_MAX_COL_VECTORS 2
#include "attention_flash_tiles_body.inc"
