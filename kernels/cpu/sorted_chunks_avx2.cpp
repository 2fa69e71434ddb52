// The sorted-chunk (LSH) attention chunk kernels built for the avx2 code path (compile flags
// are set per file in CMakeLists.txt): 8-float vectors, 12 accumulators, column blocks of up to 2
// vectors, the flash tiles' micro-kernel shape. The code itself is sorted_chunks_body.inc.
#define PB_TILES_NAMESPACE avx2
#define PB_CHUNKS_GETTER chunk_kernels_avx2
#define PB_VECTOR_BYTES 32
#define PB_ACC_VECTORS 12
#define PB_MAX_COL_VECTORS 2
#include "sorted_chunks_body.inc"
