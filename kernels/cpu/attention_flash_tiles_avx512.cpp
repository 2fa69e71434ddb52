// The flash-attention tile kernels built for the avx512 code path (compile flags are set per
// file in CMakeLists.txt): 16-float vectors, 24 accumulators, column blocks of up to 4
// vectors (micro-tile 6 x 64). The code itself is attention_flash_tiles_body.inc.
#define PB_TILES_NAMESPACE avx512
#define PB_TILES_GETTER tile_kernels_avx512
#define PB_VECTOR_BYTES 64
#define PB_ACC_VECTORS 24
#define PB_MAX_COL_VECTORS 4
#include "attention_flash_tiles_body.inc"
