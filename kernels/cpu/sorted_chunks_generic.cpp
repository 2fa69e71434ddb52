// The sorted-chunk (LSH) attention chunk kernels built for the generic code path (compile flags
// are set per file in CMakeLists.txt): 4-float vectors, 8 accumulators, column blocks of up to 2
// vectors, the flash tiles' micro-kernel shape. The code itself is sorted_chunks_body.inc.
#define PB_TILES_NAMESPACE generic
#define PB_CHUNKS_GETTER chunk_kernels_generic
#define PB_VECTOR_BYTES 16
#define PB_ACC_VECTORS 8
#define PB_MAX_COL_VECTORS 2
#include "sorted_chunks_body.inc"
