// Range checks for integer index buffers, run by callers before the indexing kernels.
// The kernels themselves assume valid indices (checking inside hot loops would cost and
// would force them to report errors); callers check once with these and turn a failure
// into their own error message naming the position, the value and the limit.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

// Position of the first entry of ids[0, count) outside [0, limit), or -1 when all are in
// range. Index is int32_t or int64_t.
template <class Index>
int64_t first_index_out_of_range(const Index* ids, int64_t count, int64_t limit);

}  // namespace patchbay::kernels
