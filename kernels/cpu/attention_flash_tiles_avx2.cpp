// The flash-attention tile kernels built for the avx2 code path (compile flags are set per
// file in CMakeLists.txt): 8-float vectors, 12 accumulators, column blocks of up to 2
// vectors (micro-tile 6 x 16). The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE avx2
#define PB_TILES_GETTER tile_kernels_avx2
#define PB_VECTOR_BYTES 32
#define PB_ACC_VECTORS 12
#define PB_MAX_COL_VECTORS 2
#include "attention_flash_tiles_body.inc"
