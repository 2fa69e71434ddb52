// The sorted-chunk (LSH) attention chunk kernels built for the avx512 code path (compile flags
// are set per file in CMakeLists.txt): 16-float vectors, 24 accumulators, column blocks of up to 4
// vectors, the flash tiles' micro-kernel shape. The code itself is sorted_chunks_body.inc.
#define PB_TILES_NAMESPACE avx512
#define PB_CHUNKS_GETTER chunk_kernels_avx512
#define PB_VECTOR_BYTES 64
#define PB_ACC_VECTORS 24
#define PB_MAX_COL_VECTORS 4
#include "sorted_chunks_body.inc"
